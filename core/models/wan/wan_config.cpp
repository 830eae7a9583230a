#include "core/models/wan/wan_config.h"

#include "core/error.h"
#include "core/vae_model.h"

namespace vaecodec::core {

nlohmann::json WanConfig::to_json() const {
  nlohmann::json j = {{"dim", dim}};
  if (dec_dim > 0) j["dec_dim"] = dec_dim;
  j["z_dim"] = z_dim;
  j["dim_mult"] = dim_mult;
  j["num_res_blocks"] = num_res_blocks;
  j["attn_scales"] = attn_scales;
  j["temperal_downsample"] = temporal_downsample;
  if (patch_size > 0) j["patch_size"] = patch_size;
  if (latents_mean) j["latents_mean"] = *latents_mean;
  if (latents_std) j["latents_std"] = *latents_std;
  return j;
}

WanConfig WanConfig::from_json(const nlohmann::json& j, const WanConfig& defaults) {
  WanConfig c = defaults;
  c.dim = j.value("dim", c.dim);
  if (defaults.dec_dim > 0) c.dec_dim = j.value("dec_dim", c.dec_dim);
  c.z_dim = j.value("z_dim", c.z_dim);
  c.dim_mult = j.value("dim_mult", c.dim_mult);
  c.num_res_blocks = j.value("num_res_blocks", c.num_res_blocks);
  c.attn_scales = j.value("attn_scales", c.attn_scales);
  c.temporal_downsample = j.value("temperal_downsample", c.temporal_downsample);
  if (defaults.patch_size > 0) c.patch_size = j.value("patch_size", c.patch_size);
  if (c.dim_mult.size() != c.temporal_downsample.size() + 1)
    throw Error(c.family + " config: dim_mult needs one more entry than temperal_downsample");
  c.latents_mean = config_statistics(j, "latents_mean", c.z_dim, /*positive=*/false, c.family);
  c.latents_std = config_statistics(j, "latents_std", c.z_dim, /*positive=*/true, c.family);
  refuse_config_key(j, "scaling_factor", c.family,
                    "Wan latents are normalized by latents_mean and latents_std");
  if (defaults.patch_size > 0 && c.patch_size < 1)
    throw Error(c.family + " config: patch_size must be at least 1");
  return c;
}

}  // namespace vaecodec::core
