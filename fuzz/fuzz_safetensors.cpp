// The safetensors header and tensor table (core/safetensors.cpp) and what the weights loader does with them
// (dtype checks, layout renaming). Any failure other than a vaecodec::Error is a finding.

#include "core/error.h"
#include "core/models/registry.h"
#include "core/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const vaecodec::fuzz::MemoryFile file(data, size);
  try {
    const vaecodec::core::SafetensorsFile tensors(file.path());
    for (const auto& [name, entry] : tensors.entries()) {
      const auto t = tensors.load(name);
      if (static_cast<size_t>(t.nbytes()) != entry.end - entry.begin) std::abort();
    }
  } catch (const vaecodec::Error&) {
  }
  try {
    vaecodec::core::load_checkpoint(file.path());
  } catch (const vaecodec::Error&) {
  }
  return 0;
}
