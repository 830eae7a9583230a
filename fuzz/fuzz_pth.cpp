// The .pth loader (core/checkpoint.cpp: the torch.save zip, the pickle check, LibTorch's unpickler). An input
// that starts like a zip is the file itself; anything else is taken as the pickle and wrapped, with storage
// records "0" to "15" of 1 KiB each, into a zip by LibTorch's own writer, so that mutations reach the pickle
// instead of breaking the zip's checksums. Any failure other than a vaecodec::Error is a finding.

#include <cstring>
#include <map>
#include <string>

#include "core/error.h"
#include "core/models/registry.h"
#include "fuzz/fuzz_support.h"
#include "tests/pickle_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (size < 2 || std::memcmp(data, "PK", 2) != 0) {
    static const std::map<std::string, std::string> storages = [] {
      std::map<std::string, std::string> out;
      for (int key = 0; key < 16; ++key) out[std::to_string(key)] = std::string(1024, static_cast<char>(key));
      return out;
    }();
    file = vaecodec::test::torch_zip(file, storages);
  }
  const vaecodec::fuzz::MemoryFile memory(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  try {
    const auto checkpoint = vaecodec::core::load_checkpoint(memory.path());
    for (const auto& [name, tensor] : checkpoint.tensors) {
      // Touch every element: a tensor reaching outside its storage is read here.
      if (tensor.numel() > 0) tensor.to(torch::kDouble).sum().item<double>();
    }
  } catch (const vaecodec::Error&) {
  }
  return 0;
}
