// The wan2.2-vae family's record (Note [Model families] in core/models/model_family.h).
#include "core/models/model_family.h"
#include "core/models/wan/wan_layouts.h"
#include "core/models/wan22/wan22_vae.h"

namespace vaecodec::core {

ModelFamily wan22_family() {
  ModelFamily f;
  f.name = "wan2.2-vae";
  f.description = "Wan2.2's 48-channel VAE (Wan2.2-TI2V-5B)";
  f.released_config = Wan22Config{}.to_json();
  set_model_functions<Wan22Vae, Wan22Config>(f);
  f.layouts = {wan_diffusers_layout()};
  // cache_elements: CausalCache::bytes() of the released architecture on the CPU per pixel (the test "the
  // cache coefficients match the released models' caches" recomputes them). Peaks: `scripts/gpu_check.sh` on
  // an H100, bf16, bench --chunk 1, channels-last engine with the fused norms (docs/benchmarks.md); bench
  // holds its input and output clip besides the run (resident); the time is bench's median there. Other
  // dtypes scale these by element size.
  f.calibration = {
      {Op::kDecode, torch::kBFloat16, 1784.375, 704688668, 1280, 704, 81, 1, 8.78, 0.829, 1347.62,
       "H100 bench decode 1280x704x81 chunk 1: 8.78 GiB peak allocated", 2.35},
      {Op::kEncode, torch::kBFloat16, 588.5, 704688668, 1280, 704, 81, 1, 4.80, 0.829, 256.50,
       "H100 bench encode 1280x704x81 chunk 1: 4.80 GiB peak allocated", 0.75},
  };
  return f;
}

}  // namespace vaecodec::core
