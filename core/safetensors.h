#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/atomic_file.h"

namespace vaecodec::core {

// Note [safetensors]
// Layout: 8 bytes little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [b, e]},
// "__metadata__": {str: str}}, then the data; offsets are relative to the end of the header. The reader maps
// the file and checks every offset against the file size before any tensor is touched, so a truncated or
// hostile file is one clear error and never a large allocation.
class SafetensorsFile {
 public:
  struct Entry {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    size_t begin = 0;  // byte offsets into the data section
    size_t end = 0;
  };

  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // A CPU tensor that owns a copy of the named tensor's data.
  torch::Tensor load(const std::string& name) const;

 private:
  std::filesystem::path path_;
  const std::byte* map_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any device; F32, F16, BF16, F64, I64, I32, U8) and string metadata as a .safetensors file.
// Writes to a temporary name beside `path` and renames it on success (Note [Atomic outputs]).
void write_safetensors(const std::filesystem::path& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same into `file`'s temporary file; the caller commits it.
void write_safetensors(AtomicFile& file, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace vaecodec::core
