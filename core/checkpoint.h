#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <torch/torch.h>

namespace vaecodec::core {

// Tensor name -> tensor, names in the original (official) layout. CPU tensors in the file's dtype.
using StateDict = std::map<std::string, torch::Tensor>;

// A weights file after loading: its tensors renamed to the original layout, and where they came from.
struct Checkpoint {
  std::filesystem::path path;
  std::string format;  // "safetensors" or "pth"
  // The layout the file was written in: "original", "diffusers" or "seedvr2-legacy-attention"
  // (see Note [checkpoint layouts] in checkpoint.cpp).
  std::string layout;
  StateDict tensors;
  std::map<std::string, std::string> metadata;  // safetensors __metadata__, empty for .pth
};

// Loads a .safetensors (F32, F16, BF16) or torch.save'd .pth (zip) file, detected by content, not name.
// Throws vaecodec::Error naming the file and the problem for anything that is not a readable checkpoint.
Checkpoint load_checkpoint(const std::filesystem::path& path);

// Renames the keys of a state dict written in another layout (diffusers' AutoencoderKLWan, SeedVR2's older
// attention names) to the original layout, after stripping a wrapper prefix that every key carries
// ("first_stage_model.", "vae.", "model.", "module."); returns the name of the layout it found.
std::string normalize_layout(StateDict& tensors);

}  // namespace vaecodec::core
