#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace vaecodec::core {

// Tensor name -> tensor, names in the original (official) layout. CPU tensors in the file's dtype.
using StateDict = std::map<std::string, torch::Tensor>;

// A weights file after loading: its tensors, and where they came from.
struct Checkpoint {
  std::filesystem::path path;
  std::string format;  // "safetensors" or "pth"
  // The weight-name layout the file was written in ("original", or one of a family's WeightLayouts:
  // core/models/ model_family.h); empty until load_checkpoint (core/models/registry.h) has renamed the
  // tensors.
  std::string layout;
  StateDict tensors;
  std::map<std::string, std::string> metadata;  // safetensors __metadata__, empty for .pth
  // A diffusers model folder's config.json (Note [diffusers model folders] in core/diffusers_folder.h); null
  // for a single file.
  nlohmann::json config;
};

// Reads a .safetensors (F32, F16, BF16) or torch.save'd .pth (zip) file, detected by content, not name: ->
// tensors under the names the file gives them. Throws vaecodec::Error naming the file and the problem for
// anything that is not a readable checkpoint. read_checkpoint (core/diffusers_folder.h) also reads diffusers
// model folders; load_checkpoint (core/models/registry.h) renames the tensors to their family's original
// layout, which is what models load.
Checkpoint read_checkpoint_file(const std::filesystem::path& path);

// The tensors of a torch.save'd file (.pt, .pth), read with the same checks as weights: a bare tensor under
// the name "", a dict's tensors under their dotted names (other values left out). For latents a Python
// pipeline saved (io/latent_file.h).
StateDict read_torch_tensors(const std::filesystem::path& path);

}  // namespace vaecodec::core
