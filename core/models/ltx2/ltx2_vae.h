#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/models/ltx2/ltx2_blocks.h"
#include "core/models/ltx2/ltx2_config.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [LTX-2 exact tiles]
// LTX-2's VAE is convolutions and per-pixel norms only: every layer is local, so exact tiles (Note [Exact
// tiles] in core/trunk.h) run it through time (Note [Tiles through time] in core/split/exact_tiles.h), encode
// and decode, with no attention to leave to the whole frame. The parts:
//   encode: the trunk is conv_in (on the patchified frames: to_trunk_input) and the down blocks up to the
//           last that halves space; the rest, at latent resolution (the middle res_x, norm, conv_out, the
//           means and their normalisation), is the whole-frame part;
//   decode: the whole-frame part is what runs at latent resolution before the first upsampler that doubles
//           space (the latents' statistics undone, conv_in, the middle res_x); the trunk is the rest, up to
//           conv_out (unpatchified after it: from_trunk_output).
// The whole-frame parts are not needed for exactness: they keep the widest layers, where a margin costs the
// most and tiling saves the least memory, out of the tiles (2.0's decoder tiles then read 11 latent pixels
// past their edges instead of 22).
// Reaches: a conv reads one pixel each side, a res_x two per ResBlock, a resampler of space as Resize::kUp2
// or kDown2 declare (their comments in ltx2_blocks.h), one of time as its conv; patch 4 sits outside the
// trunk, in the spatial factor's rest (32 = 8 of the trunk x 4).
// Padding: inside the frame a tile's cut is padded as the frame's edge is (zeros, or reflection in 2.0's
// decoder), which is wrong there, and the error moves inward a pixel per conv: within the margins, as a
// zero padding's does in the Wan trunks. At the frame's edge a tile's crop is flush with the frame and the
// conv's own padding is the frame's: reflection reads the frame's second row, which the crop holds (it is
// at least its margin plus one pixel wide). So tiles need no exchange between them, unlike bands (Note
// [LTX-2 in bands] in ltx2_blocks.cpp), whose rows have no margins.
// Time: the encoder is causal; every tile's cache starts from its own first chunk (frame 0 repeated) as the
// whole frame's does. The decoder looks ahead (Note [LTX-2 decoder lag]): the whole-frame part holds back
// features and each tile's trunk holds back frames in its own cache, across windows too (parked with it),
// and a window's frames are those its tiles settle, counted by ModelInfo::decode_lag. When the clip ends,
// the whole-frame part's held-back features go through every tile's trunk, and then each tile's trunk is
// ended (decode_features_end, decode_tile_end: the trunk run once more with `end` set, on no new features)
// (Note [Held-back frames of exact tiles] in core/split/exact_tiles.cpp). The trunk's layers are the
// layers themselves, wrapped for Trunk with `end` fixed: one trunk for the chunks, one for the end.

// Encoder (causal): patchify, conv_in, down_blocks.N (res_x and downsamplers alternating), pixel norm, SiLU,
// conv_out (-> latent channels + one shared log-variance).
class LTX2Encoder : public torch::nn::Module {
 public:
  explicit LTX2Encoder(const LTX2Config& config);
  // x: [B, 3, t, H, W] -> the posterior mean [B, z, t', H/f, W/f] (raw, not normalised).
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache);
  // Exact tiles (Note [LTX-2 exact tiles]): the trunk, patchified frames -> features at latent resolution;
  // the whole-frame part, features -> the posterior mean.
  const Trunk& trunk() const { return trunk_; }
  torch::Tensor whole_frame(const torch::Tensor& features, CausalCache& cache);
  int64_t feature_channels() const { return feature_channels_; }

 private:
  std::shared_ptr<LTX2Conv> conv_in_, conv_out_;
  std::vector<std::shared_ptr<LTX2Module>> blocks_;
  int64_t patch_size_, latent_channels_;
  size_t whole_from_ = 0;  // blocks_ from here on run on the whole frame
  int64_t feature_channels_ = 0;
  std::vector<std::shared_ptr<CausalModule>> trunk_layers_;  // the trunk's wrappers of the layers
  Trunk trunk_;
};

// Decoder (looks one frame ahead at every conv: Note [LTX-2 decoder lag]): conv_in, up_blocks.N (latent side
// first), pixel norm, SiLU, conv_out, unpatchify. Output unclamped.
class LTX2Decoder : public torch::nn::Module {
 public:
  explicit LTX2Decoder(const LTX2Config& config);
  // z: raw latents [B, z, n, h, w] -> the frames this chunk settles, [B, 3, t, h*f, w*f]; with `end`, also
  // every frame held back.
  torch::Tensor forward(const torch::Tensor& z, CausalCache& cache, bool end);
  // Exact tiles (Note [LTX-2 exact tiles]): the whole-frame part, raw latents -> the features it settles
  // (with `end`, also those held back); the trunk, features -> patches, for the chunks or (`end`) for the
  // end of the clip.
  torch::Tensor whole_frame(const torch::Tensor& z, CausalCache& cache, bool end);
  const Trunk& trunk(bool end) const { return end ? end_trunk_ : trunk_; }
  int64_t feature_channels() const { return feature_channels_; }

 private:
  std::shared_ptr<LTX2Conv> conv_in_, conv_out_;
  std::vector<std::shared_ptr<LTX2Module>> blocks_;
  int64_t patch_size_;
  size_t trunk_from_ = 0;  // blocks_ from here on run in the trunk
  int64_t feature_channels_ = 0;
  std::vector<std::shared_ptr<CausalModule>> trunk_layers_;
  Trunk trunk_, end_trunk_;
};

// Note [LTX-2 latent statistics]
// The original encoder normalises its mean per channel, (mu - mean) / std, with the checkpoint's
// per_channel_statistics (mean-of-means, std-of-means), and its decoder undoes it; vaecodec's encode() and
// decode() do the same, so LTX-2 latents are exchanged normalised, as Wan's. Detection reads the two tensors
// into the config (latents_mean, latents_std: diffusers' names, which a diffusers folder's config.json may
// replace), so that ModelInfo and latent files carry them; a model built from a config without them uses
// its loaded tensors. The files' other statistics (channel, mean-of-stds, ...) are unused and dropped on
// loading.
class LTX2Vae : public VaeModel {
 public:
  explicit LTX2Vae(const LTX2Config& config);
  const ModelInfo& info() const override { return info_; }

  static std::optional<LTX2Config> detect(const StateDict& tensors) { return detect_ltx2(tensors); }
  static ModelInfo describe(const LTX2Config& config);

 protected:
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor decode_end_chunk(CausalCache& cache) override;
  // Exact tiles (Note [LTX-2 exact tiles]).
  const Trunk* trunk(bool encode) const override;
  int64_t feature_channels(bool encode) const override;
  torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache) override;
  torch::Tensor decode_features_end_chunk(CausalCache& cache) override;
  torch::Tensor decode_tile_end_chunk(CausalCache& cache, Area interior, int64_t latent_height,
                                      int64_t latent_width) override;
  torch::Tensor to_trunk_input(const torch::Tensor& x) const override;
  torch::Tensor from_trunk_output(const torch::Tensor& y) const override;

 private:
  // The per-channel statistics as [1, z, 1, 1, 1] in `like`'s dtype and device.
  std::pair<torch::Tensor, torch::Tensor> statistics(const torch::Tensor& like) const;
  // The encoder's means, normalised; the decoder's latents, raw (Note [LTX-2 latent statistics]).
  torch::Tensor normalised(const torch::Tensor& mu) const;
  torch::Tensor raw(const torch::Tensor& z) const;

  LTX2Config config_;
  ModelInfo info_;
  std::shared_ptr<LTX2Encoder> encoder_;
  std::shared_ptr<LTX2Decoder> decoder_;
  torch::Tensor mean_, std_;  // per_channel_statistics.mean-of-means, std-of-means [z]
};

}  // namespace vaecodec::core
