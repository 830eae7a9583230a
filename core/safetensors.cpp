#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_text.h"
#include "core/untrusted_json.h"

namespace vaecodec::core {

namespace {

// The format stores numbers little-endian and we copy tensor bytes as they are.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// A header larger than this is refused before it is parsed (the reference implementation uses the same
// bound).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 64;

struct DtypeInfo {
  std::string_view name;
  torch::ScalarType type;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", torch::kDouble, 8},    {"F32", torch::kFloat, 4}, {"F16", torch::kHalf, 2},
    {"BF16", torch::kBFloat16, 2}, {"I64", torch::kLong, 8},  {"I32", torch::kInt, 4},
    {"I16", torch::kShort, 2},     {"I8", torch::kChar, 1},   {"U8", torch::kByte, 1},
    {"BOOL", torch::kBool, 1},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) {
      return &d;
    }
  }
  return nullptr;
}

const DtypeInfo* find_dtype(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) {
      return &d;
    }
  }
  return nullptr;
}

std::string supported_dtypes() {
  std::string out;
  for (const auto& d : kDtypes) {
    out += out.empty() ? "" : ", ";
    out += d.name;
  }
  return out;
}

// Names come from the file: keep the message on one line and of reasonable length whatever they hold.
std::string shown_name(std::string_view name) {
  constexpr size_t kMaxShown = 160;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  out += name.size() > kMaxShown ? "...'" : "'";
  return out;
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& why) {
  throw Error(path.string() + ": " + why);
}

[[noreturn]] void fail_header(const std::filesystem::path& path, const std::string& why) {
  fail(path, "not a valid safetensors file (" + why + ")");
}

std::string errno_text() {
  return std::strerror(errno);
}

// A JSON integer that fits in [0, max], or nothing.
std::optional<uint64_t> non_negative(const nlohmann::json& value, uint64_t max) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    return v <= max ? std::optional(v) : std::nullopt;
  }
  if (value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    return v >= 0 && static_cast<uint64_t>(v) <= max ? std::optional(static_cast<uint64_t>(v)) : std::nullopt;
  }
  return std::nullopt;
}

SafetensorsFile::Entry parse_entry(const std::filesystem::path& path, const std::string& name,
                                   const nlohmann::json& spec, size_t data_size) {
  const auto where = "tensor " + shown_name(name);
  if (!spec.is_object()) {
    fail_header(path, where + " is not a JSON object");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!spec.contains(field)) {
      fail_header(path, where + " has no '" + field + "'");
    }
  }
  const auto& dtype_json = spec["dtype"];
  const auto& shape_json = spec["shape"];
  const auto& offsets_json = spec["data_offsets"];

  if (!dtype_json.is_string()) {
    fail_header(path, where + ": 'dtype' is not a string");
  }
  const auto* dtype = find_dtype(dtype_json.get_ref<const std::string&>());
  if (dtype == nullptr) {
    fail(path, where + " has unsupported dtype " + shown_name(dtype_json.get_ref<const std::string&>()) +
                   " (supported: " + supported_dtypes() + ")");
  }

  if (!shape_json.is_array() || shape_json.size() > kMaxRank) {
    fail_header(path, where + ": 'shape' is not an array of at most " + std::to_string(kMaxRank) + " sizes");
  }
  SafetensorsFile::Entry entry;
  entry.dtype = dtype->type;
  uint64_t numel = 1;
  // LibTorch's contiguous strides multiply the sizes with zeros counted as ones: they must fit in int64 too,
  // even for an empty tensor.
  int64_t stride_span = 1;
  for (const auto& dim : shape_json) {
    const auto size = non_negative(dim, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!size) {
      fail_header(path, where + ": shape " + json_excerpt(shape_json) +
                            " holds a size that is not a non-negative integer");
    }
    if (__builtin_mul_overflow(numel, *size, &numel) ||
        __builtin_mul_overflow(stride_span, std::max<int64_t>(static_cast<int64_t>(*size), 1),
                               &stride_span)) {
      fail_header(path, where + ": shape " + json_excerpt(shape_json) + " overflows");
    }
    entry.shape.push_back(static_cast<int64_t>(*size));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype->size), &nbytes)) {
    fail_header(path, where + ": shape " + json_excerpt(shape_json) + " overflows");
  }

  if (!offsets_json.is_array() || offsets_json.size() != 2) {
    fail_header(path, where + ": 'data_offsets' is not [begin, end]");
  }
  const auto begin = non_negative(offsets_json[0], data_size);
  const auto end = non_negative(offsets_json[1], data_size);
  if (!begin || !end || *begin > *end) {
    fail_header(path, where + ": data_offsets " + json_excerpt(offsets_json) +
                          " lie outside the data section (" + std::to_string(data_size) +
                          " bytes; truncated file?)");
  }
  if (*end - *begin != nbytes) {
    fail_header(path, where + ": data_offsets " + json_excerpt(offsets_json) + " hold " +
                          std::to_string(*end - *begin) + " bytes but " + std::string(dtype->name) + " " +
                          json_excerpt(shape_json) + " needs " + std::to_string(nbytes));
  }
  entry.begin = static_cast<size_t>(*begin);
  entry.end = static_cast<size_t>(*end);
  return entry;
}

// Two tensors sharing bytes would alias each other's data: the format gives every tensor its own range.
void check_no_overlap(const std::filesystem::path& path,
                      const std::map<std::string, SafetensorsFile::Entry>& entries) {
  std::vector<std::pair<const std::string*, const SafetensorsFile::Entry*>> by_offset;
  for (const auto& [name, entry] : entries) {
    if (entry.end > entry.begin) by_offset.emplace_back(&name, &entry);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [name, entry] = by_offset[i];
    const auto& [previous_name, previous] = by_offset[i - 1];
    if (entry->begin < previous->end) {
      fail_header(path, "tensors " + shown_name(*previous_name) + " and " + shown_name(*name) +
                            " overlap (data_offsets [" + std::to_string(previous->begin) + ", " +
                            std::to_string(previous->end) + "] and [" + std::to_string(entry->begin) + ", " +
                            std::to_string(entry->end) + "])");
    }
  }
}

struct Unmap {
  size_t size;
  void operator()(const std::byte* p) const { ::munmap(const_cast<std::byte*>(p), size); }
};
using Mapping = std::unique_ptr<const std::byte, Unmap>;

// Closes a descriptor on scope exit.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  // Closes now and reports whether the close succeeded (for files being written).
  bool close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0;
  }

 private:
  int fd_;
};

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  struct stat st {};
  FdGuard fd(open_for_reading(path, st));  // Note [Regular inputs]
  if (fd.get() < 0) {
    fail(path, "cannot open safetensors file (" + errno_text() + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    fail(path, "is " + file_type_name(st.st_mode) + ", not a regular file");
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    fail_header(path, std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  }

  void* addr = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (addr == MAP_FAILED) {
    fail(path, "cannot map safetensors file (" + errno_text() + ")");
  }
  Mapping mapping(static_cast<const std::byte*>(addr), Unmap{file_size});
  const std::byte* bytes = mapping.get();

  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes, sizeof(header_size));
  if (header_size > kMaxHeaderBytes) {
    fail_header(path, "header length " + std::to_string(header_size) + " is implausibly large");
  }
  if (header_size > file_size - 8) {
    fail_header(path, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                          std::to_string(file_size) + " bytes; truncated?)");
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json header;
  try {
    header = parse_untrusted_json(std::string_view(header_begin, header_size));
  } catch (const Error& e) {
    fail_header(path, std::string("header: ") + e.what());
  }
  if (!header.is_object()) {
    fail_header(path, "header is not a JSON object");
  }

  const size_t data_offset = 8 + static_cast<size_t>(header_size);
  const size_t data_size = static_cast<size_t>(file_size) - data_offset;
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__") {
      if (!spec.is_object()) {
        fail_header(path, "__metadata__ is not a JSON object");
      }
      for (const auto& [key, value] : spec.items()) {
        if (!value.is_string()) {
          fail_header(path, "__metadata__ value of " + shown_name(key) + " is not a string");
        }
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    entries_.emplace(name, parse_entry(path, name, spec, data_size));
  }
  check_no_overlap(path, entries_);

  size_ = static_cast<size_t>(file_size);
  data_offset_ = data_offset;
  map_ = mapping.release();
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) {
    ::munmap(const_cast<std::byte*>(map_), size_);
  }
}

torch::Tensor SafetensorsFile::load(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    fail(path_, "no tensor named " + shown_name(name));
  }
  const Entry& entry = it->second;
  auto tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.dtype).device(torch::kCPU));
  const size_t nbytes = entry.end - entry.begin;
  if (nbytes > 0) {
    // The data section has no alignment guarantee, so the bytes are copied rather than viewed.
    std::memcpy(tensor.data_ptr(), map_ + data_offset_ + entry.begin, nbytes);
  }
  return tensor;
}

namespace {

void write_all(int fd, const void* data, size_t size, const std::filesystem::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(path, "cannot write safetensors file (" + errno_text() + ")");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_safetensors(AtomicFile& file, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::filesystem::path& path = file.final_path();
  // Everything is checked and laid out before the first byte is written.
  std::vector<torch::Tensor> contiguous;
  contiguous.reserve(tensors.size());
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") {
      fail(path, "cannot write safetensors file (the name '__metadata__' is reserved for the metadata)");
    }
    if (!tensor.defined()) {
      fail(path, "cannot write safetensors file (tensor " + shown_name(name) + " is undefined)");
    }
    const auto* dtype = find_dtype(tensor.scalar_type());
    if (dtype == nullptr) {
      fail(path, "cannot write safetensors file (tensor " + shown_name(name) + " has dtype " +
                     std::string(c10::toString(tensor.scalar_type())) + "; supported: " + supported_dtypes() +
                     ")");
    }
    auto cpu = tensor.detach().to(torch::kCPU).contiguous();
    const auto nbytes = static_cast<uint64_t>(cpu.nbytes());
    header[name] = {{"dtype", std::string(dtype->name)},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(std::move(cpu));
  }
  if (!metadata.empty()) {
    header["__metadata__"] = metadata;
  }

  // The format recommends padding the header with spaces so that the data section starts 8-byte aligned.
  std::string header_text = json_text(header);
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_size = header_text.size();

  FdGuard fd(::open(file.path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (fd.get() < 0) {
    fail(path, "cannot write safetensors file (" + errno_text() + ")");
  }
  write_all(fd.get(), &header_size, sizeof(header_size), path);
  write_all(fd.get(), header_text.data(), header_text.size(), path);
  for (const auto& t : contiguous) {
    if (t.nbytes() > 0) {
      write_all(fd.get(), t.data_ptr(), t.nbytes(), path);
    }
  }
  if (::fsync(fd.get()) != 0) {
    fail(path, "cannot write safetensors file (fsync: " + errno_text() + ")");
  }
  if (!fd.close()) {
    fail(path, "cannot write safetensors file (close: " + errno_text() + ")");
  }
}

void write_safetensors(const std::filesystem::path& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  AtomicFile file(path);
  write_safetensors(file, tensors, metadata);
  file.commit();
}

}  // namespace vaecodec::core
