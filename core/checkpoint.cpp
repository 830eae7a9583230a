#include "core/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import_read.h>

#include "core/error.h"
#include "core/safetensors.h"

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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(path, std::string("cannot open checkpoint (") + std::strerror(errno) + ")");
  }
  FileHead head;
  struct stat st {};
  std::string error;
  if (::fstat(fd, &st) != 0) {
    error = std::string("cannot stat checkpoint (") + std::strerror(errno) + ")";
  } else if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not a checkpoint";
  } else if (!S_ISREG(st.st_mode)) {
    error = "not a regular file";
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
// copies its argument once more), so loading costs the tensors' size and not three times the file's. Only
// plain containers and tensors can be unpickled; anything else (custom classes, numpy arrays) is a c10::Error
// we report.
c10::IValue read_torch_zip(const std::filesystem::path& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader{path.string()};
    return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                             /*type_resolver=*/std::nullopt, /*obj_loader=*/std::nullopt,
                                             torch::Device(torch::kCPU), reader);
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

// Nested dicts of tensors ({"encoder": {...}}) become dotted names; values that are neither are skipped.
void collect_tensors(const c10::IValue& node, const std::string& prefix, StateDict& out,
                     const std::filesystem::path& path, int depth) {
  if (depth > 8) {
    fail(path, "not a usable PyTorch checkpoint (dicts nested more than 8 deep)");
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
      collect_tensors(item.value(), name + ".", out, path, depth + 1);
    }
  }
}

StateDict load_pth(const std::filesystem::path& path) {
  const auto root = read_torch_zip(path);
  const auto& state = unwrap_state_dict(root);
  if (!state.isGenericDict()) {
    fail(path, "not a usable PyTorch checkpoint (holds a " + state.tagKind() + ", not a state dict)");
  }
  StateDict tensors;
  collect_tensors(state, "", tensors, path, 0);
  if (tensors.empty()) {
    fail(path, "not a usable PyTorch checkpoint (no tensors in it)");
  }
  for (auto& [name, tensor] : tensors) {
    if (!tensor.device().is_cpu()) {
      tensor = tensor.to(torch::kCPU);
    }
  }
  return tensors;
}

// Note [checkpoint layouts]
// The same weights circulate under several naming schemes; models are written against one ("original") and
// the loader renames the others to it:
// - "original": the names of the family's reference code (Wan2.1/2.2
// `encoder.downsamples.3.residual.2.weight`,
//   SeedVR2 `encoder.down_blocks.0.resnets.0.conv1.weight`). Left as they are.
// - "diffusers": diffusers' AutoencoderKLWan, for Wan2.1 and Wan2.2 (is_residual). Recognised by `quant_conv`
// or
//   by RMS-norm `gamma`s under diffusers' module names (norm1, norm2, norm_out); neither occurs in an
//   original Wan file, and SeedVR2 (GroupNorm weights, no quant convs) has neither, so its diffusers-style
//   names are safe.
// - "seedvr2-legacy-attention": SeedVR2 checkpoints written before diffusers renamed the attention
// projections
//   (`attentions.N.query/key/value/proj_attn` for `to_q/to_k/to_v/to_out.0`).
// The Wan2.1 decoder is the one place where the names do not map one to one: diffusers groups the flat list
// `upsamples.*` into up blocks of (num_res_blocks + 1) resnets and one upsampler, so the flat index is
// counted from the blocks present in the file rather than taken from a table for one configuration.

using Parts = std::vector<std::string>;

Parts split(const std::string& name) {
  Parts parts;
  size_t start = 0;
  while (true) {
    const auto dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) {
      return parts;
    }
    start = dot + 1;
  }
}

std::string join(const Parts& parts, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) {
    out += (i > from ? "." : "") + parts[i];
  }
  return out;
}

// A module index as written in a key ("0", "12"), or nothing for anything else (including absurdly long
// numbers).
std::optional<int> index_of(const std::string& part) {
  if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoi(part);
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::string_view(s).substr(0, prefix.size()) == prefix;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && std::string_view(s).substr(s.size() - suffix.size()) == suffix;
}

// Renames every key with `rename`; two keys landing on one name is an error.
template <typename Rename>
void rename_keys(StateDict& tensors, Rename rename) {
  StateDict renamed;
  for (auto& [name, tensor] : tensors) {
    auto new_name = rename(name);
    if (renamed.count(new_name) != 0) {
      throw Error("two tensors map to the same name " + new_name + " (the second is " + name + ")");
    }
    renamed.emplace(std::move(new_name), std::move(tensor));
  }
  tensors = std::move(renamed);
}

void strip_wrapper_prefixes(StateDict& tensors) {
  static constexpr std::string_view kPrefixes[] = {"first_stage_model.", "vae.", "model.", "module."};
  for (bool stripped = true; stripped && !tensors.empty();) {
    stripped = false;
    for (const auto prefix : kPrefixes) {
      bool all = true;
      for (const auto& item : tensors) {
        all = all && starts_with(item.first, prefix) && item.first.size() > prefix.size();
      }
      if (all) {
        rename_keys(tensors, [&](const std::string& name) { return name.substr(prefix.size()); });
        stripped = true;
        break;
      }
    }
  }
}

// `...attentions.N.query.weight` -> `...attentions.N.to_q.weight`, and so on; nullopt when nothing is
// renamed.
std::optional<std::string> modern_attention_name(const std::string& name) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {
      {"query", "to_q"}, {"key", "to_k"}, {"value", "to_v"}, {"proj_attn", "to_out.0"}};
  auto parts = split(name);
  for (size_t i = 0; i + 2 < parts.size(); ++i) {
    if (parts[i] != "attentions" || !index_of(parts[i + 1])) {
      continue;
    }
    for (const auto& [old_name, new_name] : kRenames) {
      if (parts[i + 2] == old_name) {
        parts[i + 2] = new_name;
        return join(parts);
      }
    }
  }
  return std::nullopt;
}

bool is_wan_diffusers(const StateDict& tensors) {
  for (const auto& item : tensors) {
    const auto& name = item.first;
    if (starts_with(name, "quant_conv.") || starts_with(name, "post_quant_conv.") ||
        ends_with(name, ".norm1.gamma") || ends_with(name, ".norm2.gamma") ||
        ends_with(name, ".norm_out.gamma")) {
      return true;
    }
  }
  return false;
}

// How diffusers grouped the Wan blocks in this file, counted from its keys.
struct WanBlocks {
  bool residual = false;            // Wan2.2: down blocks own their resnets and a `downsampler`
  std::map<int, int> down_resnets;  // Wan2.2 encoder block -> number of resnets
  std::map<int, int> up_resnets;    // decoder block -> number of resnets
  std::map<int, bool> up_has_upsampler;

  // Position of decoder block `block`'s first module in the original flat `upsamples` list (Wan2.1).
  int flat_base(int block) const {
    int base = 0;
    for (const auto& [b, resnets] : up_resnets) {
      if (b < block) {
        base += resnets;
      }
    }
    for (const auto& [b, has] : up_has_upsampler) {
      if (b < block && has) {
        base += 1;
      }
    }
    return base;
  }
};

WanBlocks count_wan_blocks(const StateDict& tensors) {
  WanBlocks blocks;
  for (const auto& item : tensors) {
    const auto p = split(item.first);
    if (p.size() < 4) {
      continue;
    }
    const auto block = index_of(p[2]);
    if (!block) {
      continue;
    }
    if (p[0] == "encoder" && p[1] == "down_blocks") {
      if (p[3] == "downsampler") {
        blocks.residual = true;
      } else if (p[3] == "resnets" && p.size() > 4 && index_of(p[4])) {
        blocks.residual = true;
        auto& n = blocks.down_resnets[*block];
        n = std::max(n, *index_of(p[4]) + 1);
      }
    } else if (p[0] == "decoder" && p[1] == "up_blocks") {
      if (p[3] == "upsampler") {
        blocks.residual = true;
      } else if (p[3] == "upsamplers") {
        blocks.up_has_upsampler[*block] = true;
      } else if (p[3] == "resnets" && p.size() > 4 && index_of(p[4])) {
        auto& n = blocks.up_resnets[*block];
        n = std::max(n, *index_of(p[4]) + 1);
      }
    }
  }
  return blocks;
}

// The original name of a residual block's sub-key; attention and resample sub-keys keep theirs.
std::string wan_block_rest(const Parts& p, size_t from) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {{"norm1", "residual.0"},
                                                                           {"conv1", "residual.2"},
                                                                           {"norm2", "residual.3"},
                                                                           {"conv2", "residual.6"},
                                                                           {"conv_shortcut", "shortcut"}};
  if (from >= p.size()) {
    return "";
  }
  for (const auto& [diffusers, original] : kRenames) {
    if (p[from] == diffusers) {
      return std::string(original) + (from + 1 < p.size() ? "." + join(p, from + 1) : "");
    }
  }
  return join(p, from);
}

// The original name of one diffusers AutoencoderKLWan key; keys it does not know are returned unchanged, so
// that the model reports them by name.
std::string wan_original_name(const std::string& name, const WanBlocks& blocks) {
  const auto p = split(name);
  const auto num = [](int i) { return std::to_string(i); };
  const auto index_at = [&](size_t k) { return k < p.size() ? index_of(p[k]).value_or(-1) : -1; };
  if (p.size() < 2) {
    return name;
  }
  if (p[0] == "quant_conv" || p[0] == "post_quant_conv") {
    return (p[0] == "quant_conv" ? "conv1." : "conv2.") + join(p, 1);
  }
  if ((p[0] != "encoder" && p[0] != "decoder") || p.size() < 3) {
    return name;
  }
  const std::string& side = p[0];
  if (p[1] == "conv_in") {
    return side + ".conv1." + join(p, 2);
  }
  if (p[1] == "norm_out") {
    return side + ".head.0." + join(p, 2);
  }
  if (p[1] == "conv_out") {
    return side + ".head.2." + join(p, 2);
  }
  // <side>.mid_block.{resnets,attentions}.<k>.*: resnets.0, attentions.0, resnets.1 -> middle.0, .1, .2
  if (p[1] == "mid_block" && index_at(3) >= 0 && p.size() > 4) {
    const int k = index_at(3);
    if (p[2] == "resnets") {
      return side + ".middle." + num(2 * k) + "." + wan_block_rest(p, 4);
    }
    if (p[2] == "attentions") {
      return side + ".middle." + num(2 * k + 1) + "." + join(p, 4);
    }
    return name;
  }
  // <side>.{down,up}_blocks.<block>.<member>[.<j>].*
  const int block = index_at(2);
  const int j = index_at(4);
  if (block < 0 || p.size() < 5) {
    return name;
  }
  if (side == "encoder" && p[1] == "down_blocks") {
    const std::string base = "encoder.downsamples." + num(block);
    if (!blocks.residual) {
      return base + "." + wan_block_rest(p, 3);  // Wan2.1: the same flat list
    }
    if (p[3] == "resnets" && j >= 0 && p.size() > 5) {
      return base + ".downsamples." + num(j) + "." + wan_block_rest(p, 5);
    }
    if (p[3] == "downsampler") {
      const auto it = blocks.down_resnets.find(block);
      const int resnets = it == blocks.down_resnets.end() ? 0 : it->second;
      return base + ".downsamples." + num(resnets) + "." + join(p, 4);
    }
    return name;
  }
  if (side == "decoder" && p[1] == "up_blocks") {
    const auto it = blocks.up_resnets.find(block);
    const int resnets = it == blocks.up_resnets.end() ? 0 : it->second;
    if (blocks.residual) {
      const std::string base = "decoder.upsamples." + num(block) + ".upsamples.";
      if (p[3] == "resnets" && j >= 0 && p.size() > 5) {
        return base + num(j) + "." + wan_block_rest(p, 5);
      }
      if (p[3] == "upsampler") {
        return base + num(resnets) + "." + join(p, 4);
      }
      return name;
    }
    const int flat = blocks.flat_base(block);
    if (p[3] == "resnets" && j >= 0 && p.size() > 5) {
      return "decoder.upsamples." + num(flat + j) + "." + wan_block_rest(p, 5);
    }
    if (p[3] == "upsamplers" && j == 0 && p.size() > 5) {
      return "decoder.upsamples." + num(flat + resnets) + "." + join(p, 5);
    }
  }
  return name;
}

}  // namespace

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const FileHead head = read_head(path);
  Checkpoint checkpoint;
  checkpoint.path = path;
  if (head.size == 0) {
    fail(path, "empty file, not a checkpoint (" + std::string(kExpected) + ")");
  }
  if (starts_with(head, "PK\x03\x04") || starts_with(head, "PK\x05\x06")) {
    checkpoint.format = "pth";
    checkpoint.tensors = load_pth(path);
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
  try {
    checkpoint.layout = normalize_layout(checkpoint.tensors);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  return checkpoint;
}

std::string normalize_layout(StateDict& tensors) {
  strip_wrapper_prefixes(tensors);
  std::string layout = "original";

  bool legacy_attention = false;
  for (const auto& item : tensors) {
    legacy_attention = legacy_attention || modern_attention_name(item.first).has_value();
  }
  if (legacy_attention) {
    rename_keys(tensors, [](const std::string& name) { return modern_attention_name(name).value_or(name); });
    layout = "seedvr2-legacy-attention";
  }

  if (is_wan_diffusers(tensors)) {
    const WanBlocks blocks = count_wan_blocks(tensors);
    rename_keys(tensors, [&](const std::string& name) { return wan_original_name(name, blocks); });
    layout = "diffusers";
  }
  return layout;
}

}  // namespace vaecodec::core
