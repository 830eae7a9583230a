#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"

namespace vaecodec::core {

// One entry of an LTX-2 block list, in the original config's terms (docs/ltx2-vae.md): `res_x` (layers
// ResBlocks at one width) or a resampler `compress_space` / `compress_time` / `compress_all` (decoder) or
// the same with `_res` (encoder), with its channel multiplier and, in the decoder, the residual flag.
struct LTX2Block {
  std::string kind;    // "res_x", "compress_space_res", "compress_all", ...
  int64_t layers = 1;  // res_x: ResBlocks
  int64_t multiplier = 1;
  bool residual = false;  // decoder upsamplers: depth-to-space of the input added (2.0)

  bool is_res() const { return kind == "res_x"; }
  // (time, height, width) strides of a resampler, from its kind.
  std::array<int64_t, 3> stride() const;
};

// The LTX-2 VAE config (the original `CausalVideoAutoencoder` terms: encoder_blocks from the pixel side,
// decoder_blocks from the pixel side too, built reversed), plus what the original leaves to code or
// defaults: the encoder's base width and both spatial padding modes. Released: LTX-2.0 and LTX-2.3 / 2.5
// (`released_20()`, `released_23()`).
struct LTX2Config {
  int64_t latent_channels = 128;
  int64_t patch_size = 4;
  int64_t encoder_base_channels = 128;  // conv_in's width
  int64_t decoder_base_channels = 128;  // the pixel side's width (conv_out's input)
  std::vector<LTX2Block> encoder_blocks, decoder_blocks;
  std::string encoder_padding = "zeros", decoder_padding = "reflect";  // "zeros" or "reflect"
  // The weights' latent statistics (Note [LTX-2 latent statistics] in ltx2_vae.h); unset: the model's own
  // per_channel_statistics tensors.
  std::optional<std::vector<float>> latents_mean, latents_std;

  static LTX2Config released_20();
  static LTX2Config released_23();

  nlohmann::json to_json() const;
  // Throws Error for what vaecodec does not implement (timestep conditioning, a causal decoder, another norm,
  // a block list that does not alternate res_x and resamplers).
  static LTX2Config from_json(const nlohmann::json& j);

  // Widths: encoder_widths()[i] is the width entering encoder block i, and the last entry the width after
  // the last block; decoder_widths() the same in build order (latent side first).
  std::vector<int64_t> encoder_widths() const;
  std::vector<int64_t> decoder_widths() const;
  // The decoder's blocks in build order (up_blocks.0 first: the latent side).
  std::vector<LTX2Block> decoder_build_order() const;
  int64_t spatial_factor() const;
  int64_t temporal_factor() const;
  // Output frames a streaming decode holds back (Note [LTX-2 decoder lag] in ltx2_blocks.h).
  int64_t decode_lag() const;
};

// The config read off a state dict in the original layout (encoder.down_blocks.N, decoder.up_blocks.N,
// per_channel_statistics.*), or nullopt when the tensors are not an LTX-2 VAE. What the shapes cannot tell
// (the upsamplers' residual flag, the decoder's padding) follows the release the block lists match: three
// decoder upsamplers are 2.0's (residual, reflection), four 2.3's (plain, zeros).
std::optional<LTX2Config> detect_ltx2(const StateDict& tensors);

}  // namespace vaecodec::core
