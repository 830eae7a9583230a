#include "core/diffusers_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "core/error.h"
#include "core/input_file.h"
#include "core/untrusted_json.h"

namespace vaecodec::core {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "diffusion_pytorch_model.safetensors";
constexpr const char* kIndex = "diffusion_pytorch_model.safetensors.index.json";
// What diffusers writes without safetensors (a torch.save zip); read_checkpoint tells the formats apart.
constexpr const char* kBinWeights = "diffusion_pytorch_model.bin";
// diffusers' configs and indexes are kilobytes (an index lists every tensor: ~100 KB for a large model).
constexpr size_t kMaxJsonBytes = 64 << 20;

bool present(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool holds_weights(const fs::path& folder) {
  return present(folder / kWeights) || present(folder / kIndex) || present(folder / kBinWeights);
}

// A JSON file of the folder, parsed under Note [Untrusted JSON]'s limits; must be an object.
nlohmann::json read_json_object(const fs::path& path) {
  struct stat st {};
  const int fd = open_for_reading(path, st);  // Note [Regular inputs]
  if (fd < 0) throw Error(path.string() + ": cannot open (" + std::strerror(errno) + ")");
  std::string text;
  std::string error;
  if (!S_ISREG(st.st_mode)) {
    error = "is " + file_type_name(st.st_mode) + ", not a regular file";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxJsonBytes) {
    error = "is " + std::to_string(st.st_size) + " bytes, too large for a diffusers JSON file";
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? std::string("cannot read (") + std::strerror(errno) + ")" : "shrank while being read";
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!error.empty()) throw Error(path.string() + ": " + error);
  nlohmann::json json;
  try {
    json = parse_untrusted_json(text);
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
  if (!json.is_object()) throw Error(path.string() + ": not a JSON object: " + json_excerpt(json));
  return json;
}

void add_tensors(Checkpoint& into, Checkpoint&& from) {
  for (auto& [name, tensor] : from.tensors)
    if (!into.tensors.emplace(name, std::move(tensor)).second)
      throw Error(into.path.string() + ": the tensor '" + name + "' is in two shards (one is " +
                  from.path.filename().string() + ")");
  into.metadata.merge(from.metadata);
}

// The shards an index names, with the tensors it says each holds.
void read_shards(Checkpoint& checkpoint) {
  const fs::path index_path = checkpoint.path / kIndex;
  const nlohmann::json index = read_json_object(index_path);
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object() || map->empty())
    throw Error(index_path.string() + ": no \"weight_map\" object naming the tensors' shards");
  std::map<std::string, std::set<std::string>> shards;  // shard -> the tensors the index puts there
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string())
      throw Error(index_path.string() + ": the shard of '" + tensor +
                  "' is not a file name: " + json_excerpt(shard));
    const std::string name = shard.get<std::string>();
    // A name, not a path: an index must not send the reader out of the folder.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
      throw Error(index_path.string() + ": the shard of '" + tensor +
                  "' is not a file name in the folder: '" + name + "'");
    shards[name].insert(tensor);
  }
  for (const auto& [name, tensors] : shards) {
    const fs::path shard = checkpoint.path / name;
    if (!present(shard))
      throw Error(index_path.string() + " names the shard " + name + ", which is not in " +
                  checkpoint.path.string());
    Checkpoint part = read_checkpoint_file(shard);
    for (const auto& tensor : tensors)
      if (!part.tensors.count(tensor))
        throw Error(shard.string() + ": holds no tensor '" + tensor + "', which " + kIndex + " puts there");
    add_tensors(checkpoint, std::move(part));
  }
}

}  // namespace

bool is_model_folder(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Checkpoint read_diffusers_folder(const fs::path& folder) {
  Checkpoint checkpoint;
  checkpoint.format = "diffusers";
  checkpoint.path = folder;
  if (!present(folder / kConfig) && !holds_weights(folder) && is_model_folder(folder / "vae"))
    checkpoint.path = folder / "vae";  // a pipeline's folder
  const fs::path& vae = checkpoint.path;
  const bool config = present(vae / kConfig), weights = holds_weights(vae);
  if (!config && !weights)
    throw UsageError(folder.string() + ": a folder, but not a diffusers VAE (it holds neither " + kConfig +
                     " with " + kWeights + " nor a vae/ folder with them)");
  if (!config)
    throw UsageError(vae.string() + ": a diffusers model folder without its " + kConfig +
                     " (the config of the weights)");
  if (!weights)
    throw UsageError(vae.string() + ": a diffusers model folder without weights (no " + kWeights + ", " +
                     kIndex + " or " + kBinWeights + ")");

  checkpoint.config = read_json_object(vae / kConfig);
  if (present(vae / kWeights)) {
    add_tensors(checkpoint, read_checkpoint_file(vae / kWeights));
  } else if (present(vae / kIndex)) {
    read_shards(checkpoint);
  } else {
    add_tensors(checkpoint, read_checkpoint_file(vae / kBinWeights));
  }
  return checkpoint;
}

Checkpoint read_checkpoint(const fs::path& path) {
  return is_model_folder(path) ? read_diffusers_folder(path) : read_checkpoint_file(path);
}

}  // namespace vaecodec::core
