#include "core/models/wan/wan_layouts.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "core/state_dict_keys.h"

namespace vaecodec::core {
namespace {

// Note [Wan weight layouts]
// The Wan VAEs' weights circulate under two naming schemes; the models are written against the reference
// code's ("original": `encoder.downsamples.3.residual.2.weight`) and the loader renames the other to it:
// - "diffusers": diffusers' AutoencoderKLWan, for Wan2.1 and Wan2.2 (is_residual). Recognised by `quant_conv`
//   or by RMS-norm `gamma`s under diffusers' module names (norm1, norm2, norm_out); neither occurs in an
//   original Wan file, and SeedVR2 (GroupNorm weights, no quant convs) has neither, so its diffusers-style
//   names are safe.
// The Wan2.1 decoder is the one place where the names do not map one to one: diffusers groups the flat list
// `upsamples.*` into up blocks of (num_res_blocks + 1) resnets and one upsampler, so the flat index is
// counted from the blocks present in the file rather than taken from a table for one configuration.

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
    const auto p = split_key(item.first);
    if (p.size() < 4) {
      continue;
    }
    const auto block = key_index(p[2]);
    if (!block) {
      continue;
    }
    if (p[0] == "encoder" && p[1] == "down_blocks") {
      if (p[3] == "downsampler") {
        blocks.residual = true;
      } else if (p[3] == "resnets" && p.size() > 4 && key_index(p[4])) {
        blocks.residual = true;
        auto& n = blocks.down_resnets[*block];
        n = std::max(n, *key_index(p[4]) + 1);
      }
    } else if (p[0] == "decoder" && p[1] == "up_blocks") {
      if (p[3] == "upsampler") {
        blocks.residual = true;
      } else if (p[3] == "upsamplers") {
        blocks.up_has_upsampler[*block] = true;
      } else if (p[3] == "resnets" && p.size() > 4 && key_index(p[4])) {
        auto& n = blocks.up_resnets[*block];
        n = std::max(n, *key_index(p[4]) + 1);
      }
    }
  }
  return blocks;
}

// The original name of a residual block's sub-key; attention and resample sub-keys keep theirs.
std::string wan_block_rest(const std::vector<std::string>& p, size_t from) {
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
      return std::string(original) + (from + 1 < p.size() ? "." + join_key(p, from + 1) : "");
    }
  }
  return join_key(p, from);
}

// The original name of one diffusers AutoencoderKLWan key; keys it does not know are returned unchanged, so
// that the model reports them by name.
std::string wan_original_name(const std::string& name, const WanBlocks& blocks) {
  const auto p = split_key(name);
  const auto num = [](int i) { return std::to_string(i); };
  const auto index_at = [&](size_t k) { return k < p.size() ? key_index(p[k]).value_or(-1) : -1; };
  if (p.size() < 2) {
    return name;
  }
  if (p[0] == "quant_conv" || p[0] == "post_quant_conv") {
    return (p[0] == "quant_conv" ? "conv1." : "conv2.") + join_key(p, 1);
  }
  if ((p[0] != "encoder" && p[0] != "decoder") || p.size() < 3) {
    return name;
  }
  const std::string& side = p[0];
  if (p[1] == "conv_in") {
    return side + ".conv1." + join_key(p, 2);
  }
  if (p[1] == "norm_out") {
    return side + ".head.0." + join_key(p, 2);
  }
  if (p[1] == "conv_out") {
    return side + ".head.2." + join_key(p, 2);
  }
  // <side>.mid_block.{resnets,attentions}.<k>.*: resnets.0, attentions.0, resnets.1 -> middle.0, .1, .2
  if (p[1] == "mid_block" && index_at(3) >= 0 && p.size() > 4) {
    const int k = index_at(3);
    if (p[2] == "resnets") {
      return side + ".middle." + num(2 * k) + "." + wan_block_rest(p, 4);
    }
    if (p[2] == "attentions") {
      return side + ".middle." + num(2 * k + 1) + "." + join_key(p, 4);
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
      return base + ".downsamples." + num(resnets) + "." + join_key(p, 4);
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
        return base + num(resnets) + "." + join_key(p, 4);
      }
      return name;
    }
    const int flat = blocks.flat_base(block);
    if (p[3] == "resnets" && j >= 0 && p.size() > 5) {
      return "decoder.upsamples." + num(flat + j) + "." + wan_block_rest(p, 5);
    }
    if (p[3] == "upsamplers" && j == 0 && p.size() > 5) {
      return "decoder.upsamples." + num(flat + resnets) + "." + join_key(p, 5);
    }
  }
  return name;
}

}  // namespace

WeightLayout wan_diffusers_layout() {
  return {"diffusers", is_wan_diffusers, [](StateDict& tensors) {
            const WanBlocks blocks = count_wan_blocks(tensors);
            rename_keys(tensors, [&](const std::string& name) { return wan_original_name(name, blocks); });
          }};
}

}  // namespace vaecodec::core
