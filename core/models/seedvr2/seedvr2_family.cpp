// The seedvr2-vae family's record (Note [Model families] in core/models/model_family.h).
#include "core/models/model_family.h"
#include "core/models/seedvr2/seedvr2_layouts.h"
#include "core/models/seedvr2/seedvr2_vae.h"

namespace vaecodec::core {

ModelFamily seedvr2_family() {
  ModelFamily f;
  f.name = "seedvr2-vae";
  f.description = "SeedVR2's VAE (the SeedVR and SeedVR2 upscalers)";
  f.released_config = SeedVR2Config{}.to_json();
  set_model_functions<SeedVR2Vae, SeedVR2Config>(f);
  f.layouts = {seedvr2_legacy_attention_layout()};
  f.no_fp8 =
      "SeedVR2's convolutions read GroupNorm's output, which has no bound to scale e4m3 by, so it has no fp8 "
      "path";
  // cache_elements: CausalCache::bytes() of the released architecture on the CPU per pixel (the test "the
  // cache coefficients match the released models' caches" recomputes them); stream_window_elements, the
  // three largest consecutive slots of that cache (the test "the stream window coefficients match the
  // released models' slots"). Peaks: `scripts/gpu_check.sh` on
  // an H100, bf16, bench --chunk 1, channels-last engine with the fused norms (docs/benchmarks.md); bench
  // holds its input and output clip besides the run (resident); the time is bench's median there. Other
  // dtypes scale these by element size.
  f.calibration = {
      {Op::kDecode, torch::kBFloat16, 4320.5, 250648227, 1280, 720, 81, 1, 14.91, 0.852, 1771.79,
       "H100 bench decode 1280x720x81 chunk 1: 14.91 GiB peak allocated", 3.82, 1280},
      {Op::kEncode, torch::kBFloat16, 1962.75, 250648227, 1280, 720, 81, 1, 9.59, 0.852, 677.94,
       "H100 bench encode 1280x720x81 chunk 1: 9.59 GiB peak allocated", 1.65, 768},
  };
  return f;
}

}  // namespace vaecodec::core
