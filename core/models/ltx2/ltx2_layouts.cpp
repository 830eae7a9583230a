#include "core/models/ltx2/ltx2_layouts.h"

#include <set>
#include <string>
#include <vector>

#include "core/state_dict_keys.h"

namespace vaecodec::core {
namespace {

constexpr const char* kFullModelProbe = "vae.encoder.conv_in.conv.weight";
constexpr const char* kUnusedStatistics[] = {"per_channel_statistics.channel",
                                             "per_channel_statistics.mean-of-stds",
                                             "per_channel_statistics.mean-of-stds_over_std-of-means"};

bool is_ltx2_checkpoint(const StateDict& tensors) {
  if (tensors.count(kFullModelProbe)) return true;
  if (!tensors.count("encoder.conv_in.conv.weight")) return false;
  for (const char* name : kUnusedStatistics)
    if (tensors.count(name)) return true;
  return false;
}

bool is_ltx2_diffusers(const StateDict& tensors) {
  return tensors.count("encoder.mid_block.resnets.0.conv1.conv.weight") &&
         tensors.count("decoder.mid_block.resnets.0.conv1.conv.weight") && tensors.count("latents_mean");
}

std::string num(int64_t i) {
  return std::to_string(i);
}

// diffusers' name -> the original's; `encoder_blocks`: diffusers' encoder down blocks (the original's middle
// is its down block 2 * encoder_blocks).
std::string ltx2_original_name(const std::string& name, int64_t encoder_blocks) {
  if (name == "latents_mean") return "per_channel_statistics.mean-of-means";
  if (name == "latents_std") return "per_channel_statistics.std-of-means";
  const auto p = split_key(name);
  if (p.size() < 5 || (p[0] != "encoder" && p[0] != "decoder")) return name;
  const bool encoder = p[0] == "encoder";
  const std::string blocks = encoder ? ".down_blocks." : ".up_blocks.";
  if (p[1] == "mid_block" && p[2] == "resnets")  // mid_block.resnets.j.rest
    return p[0] + blocks + num(encoder ? 2 * encoder_blocks : 0) + ".res_blocks." + join_key(p, 3);
  const auto i = key_index(p[2]);
  if (!i || (p[1] != "down_blocks" && p[1] != "up_blocks")) return name;
  if (p[3] == "resnets")  // {down,up}_blocks.i.resnets.j.rest
    return p[0] + blocks + num(encoder ? 2 * *i : 2 * *i + 2) + ".res_blocks." + join_key(p, 4);
  if ((p[3] == "downsamplers" || p[3] == "upsamplers") && p[4] == "0")
    return p[0] + blocks + num(2 * *i + 1) + "." + join_key(p, 5);
  return name;
}

}  // namespace

WeightLayout ltx2_original_layout() {
  return {"ltx2-checkpoint", is_ltx2_checkpoint, [](StateDict& tensors) {
            if (tensors.count(kFullModelProbe)) {
              StateDict vae;
              for (auto& [name, tensor] : tensors)
                if (starts_with(name, "vae.")) vae.emplace(name.substr(4), std::move(tensor));
              tensors = std::move(vae);
            }
            for (const char* name : kUnusedStatistics) tensors.erase(name);
          }};
}

WeightLayout ltx2_diffusers_layout() {
  return {"ltx2-diffusers", is_ltx2_diffusers, [](StateDict& tensors) {
            std::set<int> down_blocks;
            for (const auto& item : tensors) {
              const auto p = split_key(item.first);
              if (p.size() > 2 && p[0] == "encoder" && p[1] == "down_blocks")
                if (const auto i = key_index(p[2])) down_blocks.insert(*i);
            }
            const auto count = static_cast<int64_t>(down_blocks.size());
            rename_keys(tensors, [&](const std::string& name) { return ltx2_original_name(name, count); });
          }};
}

}  // namespace vaecodec::core
