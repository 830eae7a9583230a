// The ltx2-vae family's record (Note [Model families] in core/models/model_family.h).
#include "core/models/ltx2/ltx2_layouts.h"
#include "core/models/ltx2/ltx2_vae.h"
#include "core/models/model_family.h"

namespace vaecodec::core {

ModelFamily ltx2_family() {
  ModelFamily f;
  f.name = "ltx2-vae";
  f.description = "the LTX-2 video VAE (LTX-2.0; LTX-2.3 and 2.5)";
  f.released_config = LTX2Config::released_23().to_json();
  set_model_functions<LTX2Vae, LTX2Config>(f);
  f.layouts = {ltx2_original_layout(), ltx2_diffusers_layout()};
  f.no_fp8 = "the LTX-2 VAE has no fp8 path yet";
  // PROVISIONAL, not measured on a GPU yet: derived from the released LTX-2.3 architecture at 1280x704 x 121
  // frames, bf16, chunk 1 (the benchmark size). cache_elements: the two input frames every conv keeps
  // plus the two frames each ResBlock's residual waits for (decode), per output or input pixel, counted
  // stage by stage. tflop: 2 x 27 x in x out per conv output element over that clip (decode 2.45 M FLOP,
  // encode 2.38 M per pixel and frame). Peaks: weights (726 M parameters, 1.35 GiB) + cache + the widest
  // stage's chunk with its float32 norm temporaries (~1.5 GiB decode, ~1.2 GiB encode) + bench's clip (0.61
  // GiB). Replace with bench's measurement on the H100 (docs/benchmarks.md), as the other families have.
  f.calibration = {
      {Op::kDecode, torch::kBFloat16, 610.25, 726106225, 1280, 704, 121, 1, 4.6, 0.61, 267.6,
       "provisional (derived from the architecture, not measured): decode 1280x704x121 chunk 1", 0},
      {Op::kEncode, torch::kBFloat16, 448.0, 726106225, 1280, 704, 121, 1, 3.9, 0.61, 259.4,
       "provisional (derived from the architecture, not measured): encode 1280x704x121 chunk 1", 0},
  };
  return f;
}

}  // namespace vaecodec::core
