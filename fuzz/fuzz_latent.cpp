// The latent-file reader (io/latent_file.cpp): vaecodec's .safetensors latents with their JSON record,
// ComfyUI's .latent, and bare files. Any failure other than a vaecodec::Error is a finding.

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "io/latent_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const vaecodec::fuzz::MemoryFile file(data, size);
  try {
    const auto latents = vaecodec::io::read_latents(file.path());
    if (latents.latents.dim() != 5) std::abort();
    // What decode does next with the record.
    vaecodec::io::check_latents_match(latents.meta, "wan2.1-vae", 16, "fuzz");
  } catch (const vaecodec::Error&) {
  }
  try {
    // A .latent's raw latents are normalized with the model's per-channel statistics.
    vaecodec::io::LatentNormalization normalization{std::vector<double>(16, 0.5),
                                                    std::vector<double>(16, 2.0)};
    vaecodec::io::read_latents(file.path(), normalization);
  } catch (const vaecodec::Error&) {
  }
  return 0;
}
