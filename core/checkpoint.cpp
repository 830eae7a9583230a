#include "core/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include "core/error.h"
#include "core/input_file.h"
#include "core/safetensors.h"
#include "core/torch_pickle.h"

namespace vaecodec::core {

namespace {

constexpr std::string_view kExpected = "expected .safetensors or a torch.save .pth zip";

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& why) {
  throw Error(path.string() + ": " + why);
}

// The first bytes of a file, enough to tell the formats apart.
struct FileHead {
  uint64_t size = 0;
  std::array<unsigned char, 9> bytes{};
  size_t count = 0;  // how many of `bytes` were read
};

FileHead read_head(const std::filesystem::path& path) {
  struct stat st {};
  const int fd = open_for_reading(path, st);  // Note [Regular inputs]
  if (fd < 0) {
    fail(path, std::string("cannot open checkpoint (") + std::strerror(errno) + ")");
  }
  FileHead head;
  std::string error;
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not a checkpoint";
  } else if (!S_ISREG(st.st_mode)) {
    error = "is " + file_type_name(st.st_mode) + ", not a regular file";
  } else {
    head.size = static_cast<uint64_t>(st.st_size);
    while (head.count < head.bytes.size()) {
      const ssize_t n = ::read(fd, head.bytes.data() + head.count, head.bytes.size() - head.count);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        error = std::string("cannot read checkpoint (") + std::strerror(errno) + ")";
      }
      if (n <= 0) {
        break;
      }
      head.count += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!error.empty()) {
    fail(path, error);
  }
  return head;
}

bool starts_with(const FileHead& head, std::string_view magic) {
  return head.count >= magic.size() && std::memcmp(head.bytes.data(), magic.data(), magic.size()) == 0;
}

// A safetensors file opens with its header length and then the JSON object of the header. The '{' is what we
// recognise it by, so that a damaged length is still reported as a damaged safetensors file.
bool looks_like_safetensors(const FileHead& head) {
  return head.count == head.bytes.size() && head.bytes[8] == '{';
}

// One line from a c10::Error: its message up to the first sentence end, without the C++ backtrace.
std::string first_sentence(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  const auto end = text.find_first_of("\n");
  text = text.substr(0, end);
  const auto dot = text.find(". ");
  return dot == std::string::npos ? text : text.substr(0, dot);
}

// Note [torch.save checkpoints]
// torch.save (PyTorch >= 1.6) writes a zip: `<name>/data.pkl` (the pickled object, tensors as references) and
// `<name>/data/<key>` (one record per storage). LibTorch's PyTorchStreamReader and readArchiveAndTensors read
// it as torch::pickle_load does, but from the file rather than from a copy of it in memory (pickle_load
// copies its argument once more), so loading costs the tensors' size and not three times the file's. The
// pickle is checked first (Note [Checking a torch.save pickle]): only plain containers and tensors get as far
// as LibTorch's unpickler, and a storage context makes it read each record once however many tensors share
// it. Whatever else LibTorch refuses is a c10::Error we report.
c10::IValue read_torch_zip(const std::filesystem::path& path, uint64_t file_size) {
  try {
    caffe2::serialize::PyTorchStreamReader reader{path.string()};
    if (reader.hasRecord("data.pkl")) {
      if (reader.getRecordSize("data.pkl") > file_size) {
        fail(path, "not a loadable PyTorch checkpoint (its pickle claims more bytes than the file holds)");
      }
      const auto [pickle, pickle_size] = reader.getRecord("data.pkl");
      try {
        check_torch_pickle(std::string_view(static_cast<const char*>(pickle.get()), pickle_size), file_size,
                           [&](const std::string& key) -> std::optional<uint64_t> {
                             const std::string name = "data/" + key;
                             if (!reader.hasRecord(name)) return std::nullopt;
                             return reader.getRecordSize(name);
                           });
      } catch (const Error& e) {
        fail(path, std::string("not a loadable PyTorch checkpoint: ") + e.what());
      }
    }
    return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                             /*type_resolver=*/std::nullopt, /*obj_loader=*/std::nullopt,
                                             torch::Device(torch::kCPU), reader,
                                             torch::jit::Unpickler::defaultTypeParser,
                                             std::make_shared<torch::jit::DeserializationStorageContext>());
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (message.find("central directory") != std::string::npos ||
        message.find("not a ZIP archive") != std::string::npos) {
      fail(path, "not a readable PyTorch checkpoint (truncated or corrupt zip archive)");
    }
    // A zip without the records torch.save writes (version, data.pkl) or without its top-level folder.
    for (const char* sign : {"hasRecord", "failed locating file", "not in a subdirectory"}) {
      if (message.find(sign) != std::string::npos) {
        fail(path, "not a PyTorch checkpoint (a zip archive, but not one written by torch.save)");
      }
    }
    fail(path, "not a readable PyTorch checkpoint (" + first_sentence(e) + ")");
  } catch (const std::exception& e) {
    fail(path, std::string("not a readable PyTorch checkpoint (") + e.what() + ")");
  }
}

// Training scripts often save {"state_dict": ..., "epoch": ...} or {"model": ...}; the tensors are one level
// down.
const c10::IValue& unwrap_state_dict(const c10::IValue& root) {
  static constexpr std::string_view kWrappers[] = {"state_dict", "model", "module", "ema", "vae"};
  const c10::IValue* node = &root;
  for (int depth = 0; depth < 4 && node->isGenericDict(); ++depth) {
    const auto dict = node->toGenericDict();
    bool has_tensor = false;
    for (const auto& item : dict) {
      has_tensor = has_tensor || item.value().isTensor();
    }
    if (has_tensor) {
      break;
    }
    const c10::IValue* inner = nullptr;
    for (const auto& item : dict) {
      if (!item.key().isString() || !item.value().isGenericDict()) {
        continue;
      }
      for (const auto wrapper : kWrappers) {
        if (inner == nullptr && item.key().toStringRef() == wrapper) {
          inner = &item.value();
        }
      }
    }
    if (inner == nullptr) {
      break;
    }
    node = inner;
  }
  return *node;
}

// Nested dicts of tensors ({"encoder": {...}}) become dotted names; values that are neither are skipped. A
// dict met twice (the pickle may share one) is refused: walking shared dicts could name exponentially many
// tensors.
void collect_tensors(const c10::IValue& node, const std::string& prefix, StateDict& out,
                     const std::filesystem::path& path, int depth, std::unordered_set<const void*>& seen) {
  if (depth > 8) {
    fail(path, "not a usable PyTorch checkpoint (dicts nested more than 8 deep)");
  }
  if (!seen.insert(node.internalToPointer()).second) {
    fail(path, "not a usable PyTorch checkpoint (one dict appears twice in it)");
  }
  for (const auto& item : node.toGenericDict()) {
    if (!item.key().isString()) {
      fail(path, "not a usable PyTorch checkpoint (a state dict key is a " + item.key().tagKind() +
                     ", not a string)");
    }
    const auto name = prefix + item.key().toStringRef();
    if (item.value().isTensor()) {
      out[name] = item.value().toTensor();
    } else if (item.value().isGenericDict()) {
      collect_tensors(item.value(), name + ".", out, path, depth + 1, seen);
    }
  }
}

// Whether a tensor's elements all lie inside its storage. check_torch_pickle made sure of it for every tensor
// the pickle describes; this checks what LibTorch made of them, so that nothing reaching outside its storage
// leaves the loader.
bool within_storage(const torch::Tensor& t) {
  if (t.numel() == 0) return true;
  unsigned __int128 last = static_cast<uint64_t>(t.storage_offset());
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0 || t.storage_offset() < 0) return false;
    last += static_cast<unsigned __int128>(t.size(d) - 1) * static_cast<uint64_t>(t.stride(d));
  }
  return (last + 1) * t.element_size() <= t.storage().nbytes();
}

// The tensors of an unpickled torch.save file holding a state dict.
StateDict state_dict_tensors(const c10::IValue& root, const std::filesystem::path& path) {
  const auto& state = unwrap_state_dict(root);
  if (!state.isGenericDict()) {
    fail(path, "not a usable PyTorch checkpoint (holds a " + state.tagKind() + ", not a state dict)");
  }
  StateDict tensors;
  std::unordered_set<const void*> seen;
  collect_tensors(state, "", tensors, path, 0, seen);
  if (tensors.empty()) {
    fail(path, "not a usable PyTorch checkpoint (no tensors in it)");
  }
  for (auto& [name, tensor] : tensors) {
    if (!tensor.device().is_cpu()) {
      tensor = tensor.to(torch::kCPU);
    }
    if (!tensor.has_storage() || !within_storage(tensor)) {
      fail(path, "not a usable PyTorch checkpoint (tensor '" + name + "' reaches outside its storage)");
    }
  }
  return tensors;
}

// Weights are floating point; an integer or boolean tensor in a weights file is a different kind of file (a
// quantized model, a tokenizer, an optimizer state) and would be converted to nonsense.
void check_weight_dtypes(const StateDict& tensors, const std::filesystem::path& path) {
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.is_floating_point()) {
      std::string shown = name.substr(0, 160);
      for (auto& c : shown) c = (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
      fail(path, "tensor '" + shown + "' is " + std::string(c10::toString(tensor.scalar_type())) +
                     "; weights must be floating point (F32, F16, BF16 or F64)");
    }
  }
}

StateDict load_pth(const std::filesystem::path& path, uint64_t file_size) {
  return state_dict_tensors(read_torch_zip(path, file_size), path);
}

bool is_zip(const FileHead& head) {
  return starts_with(head, "PK\x03\x04") || starts_with(head, "PK\x05\x06");
}

}  // namespace

StateDict read_torch_tensors(const std::filesystem::path& path) {
  const FileHead head = read_head(path);
  if (!is_zip(head)) fail(path, "not a torch.save file (the zip archive PyTorch >= 1.6 writes)");
  const c10::IValue root = read_torch_zip(path, head.size);
  if (root.isTensor()) {
    const torch::Tensor tensor = root.toTensor().to(torch::kCPU);
    if (!tensor.has_storage() || !within_storage(tensor))
      fail(path, "not a usable torch.save file (its tensor reaches outside its storage)");
    return {{"", tensor}};
  }
  return state_dict_tensors(root, path);
}

Checkpoint read_checkpoint_file(const std::filesystem::path& path) {
  const FileHead head = read_head(path);
  Checkpoint checkpoint;
  checkpoint.path = path;
  if (head.size == 0) {
    fail(path, "empty file, not a checkpoint (" + std::string(kExpected) + ")");
  }
  if (is_zip(head)) {
    checkpoint.format = "pth";
    checkpoint.tensors = load_pth(path, head.size);
  } else if (looks_like_safetensors(head)) {
    checkpoint.format = "safetensors";
    const SafetensorsFile file(path);
    for (const auto& [name, entry] : file.entries()) {
      checkpoint.tensors.emplace(name, file.load(name));
    }
    checkpoint.metadata = file.metadata();
  } else if (starts_with(head, "\x80\x02")) {
    // Protocol-2 pickle: what torch.save wrote before the zip format (PyTorch < 1.6).
    fail(path,
         "a legacy (non-zip) torch.save file, which cannot be read here; re-save it with PyTorch >= 1.6 or "
         "convert it to .safetensors");
  } else {
    fail(path, "not a checkpoint (" + std::string(kExpected) + ")");
  }
  if (checkpoint.tensors.empty()) {
    fail(path, "checkpoint holds no tensors");
  }
  check_weight_dtypes(checkpoint.tensors, path);
  return checkpoint;
}

}  // namespace vaecodec::core
