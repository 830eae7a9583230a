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
  // Measured on the H100 (docs/benchmarks.md, "LTX-2 against diffusers", "On the H100"): `bench --weights`
  // (scripts/bench_ltx2.py) of the released LTX-2.3 architecture with random weights at 1280x704 x 121
  // frames, bf16, chunk 1 (the untiled plan's). The decode's peak, 9.83 GiB, is 2.3x what the architecture
  // accounts for (weights 1.35 GiB, caches ~1 GiB, the widest stage's chunk with its norm's output ~1.5 GiB);
  // it was 16.90 GiB on an H200 before the norm wrote into the convolutions' input and the folds kept the
  // input's layout, and the planner takes the measured peak, which keeps its budgets, rather than the
  // architecture's count. cache_elements: the two input frames every conv keeps plus the two frames each
  // ResBlock's residual waits for (decode), per output or input pixel, counted stage by stage. tflop:
  // vaecodec's count of the run. resident: bench's clip and latents on the device (0.61 GiB).
  f.calibration = {
      {Op::kDecode, torch::kBFloat16, 610.25, 726106225, 1280, 704, 121, 1, 9.83, 0.61, 269.34,
       "H100 bench decode 1280x704x121 chunk 1: 9.83 GiB peak allocated", 0.496},
      {Op::kEncode, torch::kBFloat16, 448.0, 726106225, 1280, 704, 121, 1, 3.33, 0.61, 261.10,
       "H100 bench encode 1280x704x121 chunk 1: 3.33 GiB peak allocated", 0.552},
  };
  return f;
}

}  // namespace vaecodec::core
