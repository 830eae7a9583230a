#include "core/models/ltx2/ltx2_config.h"

#include <algorithm>

#include "core/error.h"
#include "core/untrusted_json.h"
#include "core/vae_model.h"

namespace vaecodec::core {
namespace {

constexpr const char* kFamily = "ltx2-vae";

bool is_encoder_resampler(const std::string& kind) {
  return kind == "compress_space_res" || kind == "compress_time_res" || kind == "compress_all_res";
}

bool is_decoder_resampler(const std::string& kind) {
  return kind == "compress_space" || kind == "compress_time" || kind == "compress_all";
}

LTX2Block res(int64_t layers) {
  return {"res_x", layers, 1, false};
}

LTX2Block sampler(const std::string& kind, int64_t multiplier, bool residual = false) {
  return {kind, 1, multiplier, residual};
}

// The resampler kind of a stride product: 2 time, 4 space, 8 both (the only ones the releases build).
std::optional<std::string> kind_of_product(int64_t product, bool encoder) {
  const std::string suffix = encoder ? "_res" : "";
  if (product == 2) return "compress_time" + suffix;
  if (product == 4) return "compress_space" + suffix;
  if (product == 8) return "compress_all" + suffix;
  return std::nullopt;
}

nlohmann::json blocks_json(const std::vector<LTX2Block>& blocks, bool decoder) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& b : blocks) {
    nlohmann::json params = nlohmann::json::object();
    if (b.is_res()) {
      params["num_layers"] = b.layers;
    } else {
      params["multiplier"] = b.multiplier;
      if (decoder) params["residual"] = b.residual;
    }
    list.push_back({b.kind, params});
  }
  return list;
}

std::vector<LTX2Block> blocks_from_json(const nlohmann::json& list, bool decoder) {
  const std::string side = decoder ? "decoder_blocks" : "encoder_blocks";
  if (!list.is_array() || list.empty())
    throw Error(std::string(kFamily) + " config: " + side +
                " is not a list of blocks: " + json_excerpt(list));
  std::vector<LTX2Block> blocks;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& entry = list[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string())
      throw Error(std::string(kFamily) + " config: " + side + "[" + std::to_string(i) +
                  "] is not [name, parameters]: " + json_excerpt(entry));
    LTX2Block b;
    b.kind = entry[0].get<std::string>();
    const nlohmann::json params = entry[1].is_number_integer()
                                      ? nlohmann::json{{"num_layers", entry[1]}}
                                      : (entry[1].is_object() ? entry[1] : nlohmann::json::object());
    // Blocks alternate: res_x at even positions, a resampler of this side at odd ones.
    const bool want_res = i % 2 == 0;
    const bool ok =
        want_res ? b.is_res() : (decoder ? is_decoder_resampler(b.kind) : is_encoder_resampler(b.kind));
    if (!ok)
      throw Error(std::string(kFamily) + " config: " + side + "[" + std::to_string(i) + "] is '" + b.kind +
                  "'; vaecodec runs lists of res_x blocks alternating with " +
                  (decoder ? "compress_space/time/all" : "compress_space/time/all_res") + " resamplers");
    if (params.value("inject_noise", false))
      throw Error(std::string(kFamily) + " config: noise injection is not supported");
    b.layers = params.value("num_layers", int64_t{1});
    b.multiplier = params.value("multiplier", int64_t{decoder ? 1 : 2});
    b.residual = params.value("residual", false);
    if (b.layers < 1 || b.multiplier < 1)
      throw Error(std::string(kFamily) + " config: " + side + "[" + std::to_string(i) +
                  "] has no layers or no width: " + json_excerpt(entry));
    blocks.push_back(b);
  }
  if (blocks.size() % 2 == 0)
    throw Error(std::string(kFamily) + " config: " + side + " must start and end with res_x");
  return blocks;
}

std::string padding_from(const nlohmann::json& j, const std::string& key, const std::string& fallback) {
  const std::string mode = j.value(key, fallback);
  if (mode != "zeros" && mode != "reflect")
    throw Error(std::string(kFamily) + " config: " + key + " '" + mode +
                "' is not supported (zeros, reflect)");
  return mode;
}

}  // namespace

std::array<int64_t, 3> LTX2Block::stride() const {
  if (kind.rfind("compress_space", 0) == 0) return {1, 2, 2};
  if (kind.rfind("compress_time", 0) == 0) return {2, 1, 1};
  if (kind.rfind("compress_all", 0) == 0) return {2, 2, 2};
  return {1, 1, 1};
}

LTX2Config LTX2Config::released_20() {
  LTX2Config c;
  c.encoder_blocks = {res(4), sampler("compress_space_res", 2), res(6), sampler("compress_time_res", 2),
                      res(6), sampler("compress_all_res", 2),   res(2), sampler("compress_all_res", 2),
                      res(2)};
  c.decoder_blocks = {res(5), sampler("compress_all", 2, true), res(5), sampler("compress_all", 2, true),
                      res(5), sampler("compress_all", 2, true), res(5)};
  c.decoder_padding = "reflect";
  return c;
}

LTX2Config LTX2Config::released_23() {
  LTX2Config c;
  c.encoder_blocks = {res(4), sampler("compress_space_res", 2), res(6), sampler("compress_time_res", 2),
                      res(4), sampler("compress_all_res", 2),   res(2), sampler("compress_all_res", 1),
                      res(2)};
  c.decoder_blocks = {res(4), sampler("compress_space", 2), res(6), sampler("compress_time", 2),
                      res(4), sampler("compress_all", 1),   res(2), sampler("compress_all", 2),
                      res(2)};
  c.decoder_padding = "zeros";
  return c;
}

nlohmann::json LTX2Config::to_json() const {
  nlohmann::json j = {{"latent_channels", latent_channels},
                      {"patch_size", patch_size},
                      {"norm_layer", "pixel_norm"},
                      {"latent_log_var", "uniform"},
                      {"causal_decoder", false},
                      {"timestep_conditioning", false},
                      {"encoder_base_channels", encoder_base_channels},
                      {"decoder_base_channels", decoder_base_channels},
                      {"encoder_blocks", blocks_json(encoder_blocks, false)},
                      {"decoder_blocks", blocks_json(decoder_blocks, true)},
                      {"encoder_spatial_padding_mode", encoder_padding},
                      {"decoder_spatial_padding_mode", decoder_padding}};
  if (latents_mean) j["latents_mean"] = *latents_mean;
  if (latents_std) j["latents_std"] = *latents_std;
  return j;
}

LTX2Config LTX2Config::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(std::string(kFamily) + " config is not a JSON object: " + json_excerpt(j));
  LTX2Config c = released_23();
  c.latent_channels = j.value("latent_channels", c.latent_channels);
  c.patch_size = j.value("patch_size", c.patch_size);
  c.encoder_base_channels = j.value("encoder_base_channels", c.encoder_base_channels);
  c.decoder_base_channels = j.value("decoder_base_channels", c.decoder_base_channels);
  if (j.contains("encoder_blocks")) c.encoder_blocks = blocks_from_json(j.at("encoder_blocks"), false);
  if (j.contains("decoder_blocks")) c.decoder_blocks = blocks_from_json(j.at("decoder_blocks"), true);
  // The original's spatial_padding_mode sets both sides; without it the decoder reflects (2.0).
  const bool original_mode = j.contains("spatial_padding_mode");
  const std::string both = padding_from(j, "spatial_padding_mode", "zeros");
  c.encoder_padding = padding_from(j, "encoder_spatial_padding_mode", both);
  c.decoder_padding =
      padding_from(j, "decoder_spatial_padding_mode", original_mode ? both : c.decoder_padding);
  if (j.value("timestep_conditioning", false))
    throw Error(std::string(kFamily) + " config: timestep conditioning (LTX-Video 0.9) is not supported");
  if (j.value("causal_decoder", false))
    throw Error(std::string(kFamily) + " config: a causal decoder is not supported (the releases have none)");
  if (j.value("norm_layer", std::string("pixel_norm")) != "pixel_norm")
    throw Error(std::string(kFamily) + " config: norm_layer " + json_excerpt(j.at("norm_layer")) +
                " is not supported (pixel_norm)");
  if (j.value("latent_log_var", std::string("uniform")) != "uniform")
    throw Error(std::string(kFamily) + " config: latent_log_var " + json_excerpt(j.at("latent_log_var")) +
                " is not supported (uniform)");
  if (c.latent_channels < 1 || c.patch_size < 1 || c.encoder_base_channels < 1 || c.decoder_base_channels < 1)
    throw Error(std::string(kFamily) + " config: widths and the patch size must be positive");
  if (const auto scale = config_factor(j, "scaling_factor", kFamily); scale && *scale != 1.0)
    throw Error(std::string(kFamily) + " config: scaling_factor " + std::to_string(*scale) +
                " cannot be used (LTX-2's latents are normalised per channel; its scaling factor is 1)");
  c.latents_mean = config_statistics(j, "latents_mean", c.latent_channels, false, kFamily);
  c.latents_std = config_statistics(j, "latents_std", c.latent_channels, true, kFamily);
  return c;
}

std::vector<int64_t> LTX2Config::encoder_widths() const {
  std::vector<int64_t> widths{encoder_base_channels};
  for (const auto& b : encoder_blocks) widths.push_back(widths.back() * (b.is_res() ? 1 : b.multiplier));
  return widths;
}

std::vector<LTX2Block> LTX2Config::decoder_build_order() const {
  return {decoder_blocks.rbegin(), decoder_blocks.rend()};
}

std::vector<int64_t> LTX2Config::decoder_widths() const {
  // From the pixel side: a resampler's output is the width so far, its input that times its multiplier.
  std::vector<int64_t> widths{decoder_base_channels};
  for (const auto& b : decoder_blocks) widths.push_back(widths.back() * (b.is_res() ? 1 : b.multiplier));
  std::reverse(widths.begin(), widths.end());
  return widths;
}

int64_t LTX2Config::spatial_factor() const {
  int64_t f = patch_size;
  for (const auto& b : encoder_blocks) f *= b.stride()[1];
  return f;
}

int64_t LTX2Config::temporal_factor() const {
  int64_t f = 1;
  for (const auto& b : encoder_blocks) f *= b.stride()[0];
  return f;
}

int64_t LTX2Config::decode_lag() const {
  // Frames final after n latent frames, against all of them once the clip has ended (docs/ltx2-vae.md,
  // Streaming): every convolution settles all but its last frame; a temporal upsampler maps a to 2a - 1.
  auto settled = [&](int64_t a, bool ended) {
    auto conv = [&] { a = std::max<int64_t>(ended ? a : a - 1, 0); };
    conv();  // conv_in
    for (const auto& b : decoder_build_order()) {
      if (b.is_res()) {
        for (int64_t i = 0; i < 2 * b.layers; ++i) conv();
      } else {
        conv();
        if (b.stride()[0] == 2) a = std::max<int64_t>(2 * a - 1, 0);
      }
    }
    conv();  // conv_out
    return a;
  };
  const int64_t n = 4096;
  return settled(n, true) - settled(n, false);
}

std::optional<LTX2Config> detect_ltx2(const StateDict& tensors) {
  auto shape = [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
    const auto it = tensors.find(name);
    if (it == tensors.end() || it->second.dim() != 5) return std::nullopt;
    return it->second.sizes().vec();
  };
  const auto enc_in = shape("encoder.conv_in.conv.weight");
  const auto enc_out = shape("encoder.conv_out.conv.weight");
  const auto dec_in = shape("decoder.conv_in.conv.weight");
  const auto dec_out = shape("decoder.conv_out.conv.weight");
  if (!enc_in || !enc_out || !dec_in || !dec_out) return std::nullopt;
  LTX2Config c;
  c.latent_channels = (*dec_in)[1];
  if ((*enc_out)[0] != c.latent_channels + 1) return std::nullopt;  // means and one shared log-variance
  const int64_t patch_area = (*enc_in)[1] / 3;
  c.patch_size = 1;
  while (c.patch_size * c.patch_size < patch_area) ++c.patch_size;
  if (c.patch_size * c.patch_size * 3 != (*enc_in)[1] || (*dec_out)[0] != (*enc_in)[1]) return std::nullopt;
  c.encoder_base_channels = (*enc_in)[0];
  c.decoder_base_channels = (*dec_out)[1];

  // A res_x block: its ResBlocks' conv1 widths; nullopt without any.
  auto res_block = [&](const std::string& prefix) -> std::optional<std::pair<int64_t, int64_t>> {
    int64_t layers = 0, width = 0;
    while (const auto conv1 =
               shape(prefix + ".res_blocks." + std::to_string(layers) + ".conv1.conv.weight")) {
      width = (*conv1)[0];
      ++layers;
    }
    if (layers == 0) return std::nullopt;
    return std::make_pair(layers, width);
  };

  c.encoder_blocks.clear();
  int64_t width = c.encoder_base_channels;
  for (int i = 0;; i += 2) {
    const std::string block = "encoder.down_blocks." + std::to_string(i);
    const auto r = res_block(block);
    if (!r || r->second != width) return std::nullopt;
    c.encoder_blocks.push_back(res(r->first));
    const auto conv = shape("encoder.down_blocks." + std::to_string(i + 1) + ".conv.conv.weight");
    if (!conv) break;
    const auto next = res_block("encoder.down_blocks." + std::to_string(i + 2));
    if (!next || (*conv)[1] != width || (*conv)[0] < 1 || next->second % (*conv)[0] != 0) return std::nullopt;
    // The conv makes out / (st*sh*sw) channels that space-to-depth turns into `out`.
    const auto kind = kind_of_product(next->second / (*conv)[0], true);
    if (!kind || next->second % width != 0) return std::nullopt;
    c.encoder_blocks.push_back(sampler(*kind, next->second / width));
    width = next->second;
  }
  if ((*enc_out)[1] != width) return std::nullopt;

  // Decoder, latent side first (up_blocks.0), listed pixel side first at the end.
  std::vector<LTX2Block> build;
  width = (*dec_in)[0];
  int samplers = 0;
  for (int i = 0;; i += 2) {
    const auto r = res_block("decoder.up_blocks." + std::to_string(i));
    if (!r || r->second != width) return std::nullopt;
    build.push_back(res(r->first));
    const auto conv = shape("decoder.up_blocks." + std::to_string(i + 1) + ".conv.conv.weight");
    if (!conv) break;
    const auto next = res_block("decoder.up_blocks." + std::to_string(i + 2));
    if (!next || (*conv)[1] != width || next->second < 1 || (*conv)[0] % next->second != 0 ||
        width % next->second != 0)
      return std::nullopt;
    // The conv makes in * (st*sh*sw) / m channels, depth-to-space leaves in / m = the next width.
    const auto kind = kind_of_product((*conv)[0] / next->second, false);
    if (!kind) return std::nullopt;
    build.push_back(sampler(*kind, width / next->second));
    width = next->second;
    ++samplers;
  }
  if (width != c.decoder_base_channels) return std::nullopt;
  // What the shapes cannot tell: 2.0 (three upsamplers) has residual ones and reflects, 2.3 / 2.5 not.
  const bool release_20 = samplers == 3;
  for (auto& b : build)
    if (!b.is_res()) b.residual = release_20;
  c.decoder_padding = release_20 ? "reflect" : "zeros";
  c.decoder_blocks.assign(build.rbegin(), build.rend());

  // The statistics the encoder normalises with and the decoder undoes (float32, as ModelInfo keeps them).
  for (const auto& [key, field] : {std::make_pair("per_channel_statistics.mean-of-means", &c.latents_mean),
                                   std::make_pair("per_channel_statistics.std-of-means", &c.latents_std)}) {
    const auto it = tensors.find(key);
    if (it == tensors.end() || it->second.numel() != c.latent_channels) return std::nullopt;
    const auto values = it->second.to(torch::kCPU, torch::kFloat).contiguous();
    *field = std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
  }
  return c;
}

}  // namespace vaecodec::core
