#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vaecodec::core {

// The config of both Wan VAEs (the reference's WanVAE_ arguments, under its key names: "temperal_downsample"
// is spelt as there). Wan2.1's decoder is as wide as its encoder and folds no pixels into channels: its
// dec_dim and patch_size are 0, and neither key is read or written for it. A family's defaults are its
// released model's (Wan21Config, Wan22Config).
struct WanConfig {
  std::string family;   // "wan2.1-vae", "wan2.2-vae": which keys apply, and the errors' prefix
  int64_t dim = 96;     // encoder width
  int64_t dec_dim = 0;  // decoder width (Wan2.2); 0: none of its own
  int64_t z_dim = 16;
  std::vector<int64_t> dim_mult = {1, 2, 4, 4};
  int64_t num_res_blocks = 2;  // per encoder stage; Wan2.2's decoder has one more
  // Wan2.2 keeps it because the reference takes it; it builds no attention from it (there is attention in the
  // middles).
  std::vector<double> attn_scales = {};
  std::vector<bool> temporal_downsample = {false, true, true};
  int64_t patch_size = 0;  // pixels per side folded into channels before the encoder (Wan2.2); 0: none

  // The weights' own latent statistics (Note [Latent statistics in the config]); unset: the released ones.
  std::optional<std::vector<float>> latents_mean, latents_std;

  nlohmann::json to_json() const;
  // `j` over `defaults` (a family's released config): the keys it gives replace the defaults'. Throws Error
  // "FAMILY config: ..." for a config that cannot be built.
  static WanConfig from_json(const nlohmann::json& j, const WanConfig& defaults);
};

}  // namespace vaecodec::core
