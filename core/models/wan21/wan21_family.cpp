// The wan2.1-vae family's record (Note [Model families] in core/models/model_family.h).
#include "core/models/model_family.h"
#include "core/models/wan/wan_layouts.h"
#include "core/models/wan21/wan21_vae.h"

namespace vaecodec::core {

ModelFamily wan21_family() {
  ModelFamily f;
  f.name = "wan2.1-vae";
  f.description = "The Wan2.1 VAE (Wan2.1, Wan2.2-14B and their fine-tunes)";
  f.released_config = Wan21Config{}.to_json();
  set_model_functions<Wan21Vae, Wan21Config>(f);
  f.layouts = {wan_diffusers_layout()};
  f.musubi_architecture = "wan";  // musubi-tuner's Wan2.1 and Wan2.2-14B models take its latents
  // cache_elements: CausalCache::bytes() of the released architecture on the CPU per pixel (the test "the
  // cache coefficients match the released models' caches" recomputes them). Peaks: `scripts/gpu_check.sh` on
  // an H100, bf16, bench --chunk 1, channels-last engine with the fused norms (docs/benchmarks.md); bench
  // holds its input and output clip besides the run (resident); the time is bench's median there. Other
  // dtypes scale these by element size.
  f.calibration = {
      {Op::kDecode, torch::kBFloat16, 2364.5, 126892531, 1280, 720, 81, 1, 8.984, 0.852, 639.22,
       "H100 bench decode 1280x720x81 chunk 1: 8.98 GiB peak allocated", 1.405},
      {Op::kEncode, torch::kBFloat16, 1404.0, 126892531, 1280, 720, 81, 1, 7.219, 0.852, 381.67,
       "H100 bench encode 1280x720x81 chunk 1: 7.22 GiB peak allocated", 0.932},
  };
  return f;
}

}  // namespace vaecodec::core
