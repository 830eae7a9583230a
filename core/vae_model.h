#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/causal_cache.h"
#include "core/checkpoint.h"
#include "core/run_choices.h"
#include "core/trunk.h"

namespace vaecodec::core {

// What the engine and the I/O need to know about a model, independent of its family.
struct ModelInfo {
  std::string family;     // "wan2.1-vae", "wan2.2-vae", "seedvr2-vae"
  nlohmann::json config;  // the family's own config (dim, z_dim, ...), as in the golden meta.json
  int64_t latent_channels = 16;
  int64_t spatial_factor = 8;   // pixels per latent pixel; input sizes must be multiples of it
  int64_t temporal_factor = 4;  // T = 1 + factor * k frames <-> 1 + k latent frames
  // Latents exchanged with the family's diffusion model are raw * scale (SeedVR2: 0.9152); Wan latents are
  // normalized inside the model and this is 1.
  double latent_scale = 1.0;
  // encode() returns (raw - mean) / std per channel (Wan); empty when it returns the raw latent (SeedVR2).
  std::vector<float> latent_mean, latent_std;
  // Channels of the attention over whole latent frames (the middles' blocks), 0 where there is none: its
  // work grows with the square of the frame (Note [Plan cost]).
  int64_t encode_attention = 0, decode_attention = 0;
  // Output frames a streaming decode holds back until later latents or the end of the clip arrive, 0 for a
  // causal decoder (Note [Decoders that look ahead]).
  int64_t decode_lag = 0;
};

// Note [Latent statistics in the config]
// A family's config may carry the latent statistics of its weights under diffusers' key names, from which
// they come (a diffusers folder's config.json, Note [diffusers model folders]): "latents_mean" and
// "latents_std" (per channel: Wan's normalization) and "scaling_factor" (SeedVR2's latent_scale). Present,
// they replace the family's released constants in ModelInfo, and so in the model's normalization and in the
// latent files' record (the model's config): a fine-tuned VAE with statistics of its own is not normalized
// with the released ones. Absent or null (every single weights file), the released constants apply. The
// keys a family has no use for are refused rather than ignored.
inline constexpr const char* kStatisticsKeys[] = {"latents_mean", "latents_std", "scaling_factor"};

// config[key] as `channels` finite numbers (positive ones when `positive`); nullopt when absent or null.
// Throws Error "FAMILY config: KEY ..." for another type or length.
std::optional<std::vector<float>> config_statistics(const nlohmann::json& config, const std::string& key,
                                                    int64_t channels, bool positive,
                                                    const std::string& family);
// config[key] as one finite positive number; nullopt when absent or null.
std::optional<double> config_factor(const nlohmann::json& config, const std::string& key,
                                    const std::string& family);
// Throws Error when config[key] is present and not null: a statistic `family` has no use for (`why`).
void refuse_config_key(const nlohmann::json& config, const std::string& key, const std::string& family,
                       const std::string& why);

// A causal video VAE. encode() and decode() take one chunk of a sequence and continue the run whose history
// is in `cache`; a fresh cache starts a new sequence at frame 0.
//   encode: x [B, 3, t, H, W] in [-1, 1] -> latent [B, z, t', H/f, W/f]; the first chunk has 1 + 4k frames,
//           later ones multiples of 4 (t' = 1 + k, then t/4).
//   decode: latent [B, z, n, h, w] -> video [B, 3, t, h*f, w*f], unclamped; the first chunk gives 1 + 4(n-1)
//           frames, later ones 4n.
// The result does not depend on the chunking. Each call runs under the model's run choices
// (Note [Run choices] in core/run_choices.h); a family implements encode_chunk and decode_chunk.
//
// Note [Decoders that look ahead]
// A decoder whose convolutions read later frames (LTX-2's: Note [LTX-2 decoder lag] in
// core/models/ltx2/ltx2_blocks.h) cannot settle a chunk's last frames before the next chunk arrives: its
// decode() returns fewer frames than above (none at all for a short first chunk), keeping the rest in the
// cache, ModelInfo::decode_lag output frames in all, and decode_end() returns them once the clip has ended,
// with the clip's right padding applied. Over a whole run the frames are the same as a causal decoder's, and
// the same for any chunking. For a causal decoder decode_end() returns nothing. Whoever runs the cache ends
// it: a split when its run ends (Note [Held-back frames of a split] in core/split/blended_tiles.cpp), a
// streaming session when its caller says the clip ends (Session::finish, Note [Streaming sessions] in
// core/session.h).
class VaeModel : public torch::nn::Module {
 public:
  virtual const ModelInfo& info() const = 0;
  torch::Tensor encode(const torch::Tensor& x, CausalCache& cache);
  torch::Tensor decode(const torch::Tensor& z, CausalCache& cache);
  // The frames held back at the end of the clip (Note [Decoders that look ahead]); undefined when none.
  torch::Tensor decode_end(CausalCache& cache);

  // --- exact tiles (Note [Exact tiles] in core/trunk.h): where the family's trunks are local, each op splits
  // into a trunk that tiles run and a whole-frame part at latent resolution. Areas are in latent pixels
  // (`interior`: what the trunk computes) of a frame latent_height x latent_width.
  // Whether the trunks are local, so that tiles can run them through time (Note [Tiles through time] in
  // core/split/exact_tiles.h), and whether those tiles are exact: not where a trunk normalises over the frame
  // (SeedVR2: Note [Norms of tiles through time]).
  bool tiles_through_time() const;
  bool exact_tiles() const;
  // What a tile's trunk reads: decode, an area of the features (latent pixels); encode, of the frames
  // (pixels).
  Area tile_input(bool encode, Area interior, int64_t latent_height, int64_t latent_width) const;
  // Decode: latents [B, z, n, h, w] -> the trunk's input features for the whole frame, [B, C, n, h, w].
  torch::Tensor decode_features(const torch::Tensor& z, CausalCache& cache);
  // Decode: features cropped to tile_input(false, interior, ...) -> the interior's pixels [B, 3, t, ., .].
  torch::Tensor decode_tile(const torch::Tensor& features, CausalCache& cache, Area interior,
                            int64_t latent_height, int64_t latent_width);
  // Decode, once the clip has ended (Note [Decoders that look ahead]): what the whole-frame part held back
  // (features, as decode_features returns them), and what a tile's trunk held back (the interior's pixels,
  // as decode_tile returns them), each completed with the clip's right padding; undefined when nothing was
  // held back (a causal decoder, or a cache that has seen nothing). A tile ends its trunk after the
  // whole-frame part's held-back features have gone through it.
  torch::Tensor decode_features_end(CausalCache& cache);
  torch::Tensor decode_tile_end(CausalCache& cache, Area interior, int64_t latent_height,
                                int64_t latent_width);
  // Encode: frames cropped to tile_input(true, interior, ...) -> the interior's features [B, C, n, ., .].
  torch::Tensor encode_tile(const torch::Tensor& x, CausalCache& cache, Area interior, int64_t latent_height,
                            int64_t latent_width);
  // Encode: the whole frame's features -> latents, as encode() returns them.
  torch::Tensor encode_features(const torch::Tensor& features, CausalCache& cache);
  // The trunk's extra work for a tile against its interior alone: the sum over blocks of the area each
  // reads, relative to the interior's, weighted by the block's pixels per latent pixel squared (a proxy of
  // its FLOPs per pixel being alike across resolutions).
  double tile_work(bool encode, Area interior, int64_t latent_height, int64_t latent_width) const;
  // The trunk of encode or decode (nullptr without one).
  const Trunk* trunk_for(bool encode) const { return trunk(encode); }
  // The channels of the features between the trunk and the whole-frame part (0 without exact tiles).
  virtual int64_t feature_channels(bool encode) const {
    (void)encode;
    return 0;
  }

  const RunChoices& choices() const { return choices_; }
  // Set where the model is placed (place_model, which checks them); later only to compare choices (bench).
  void set_choices(const RunChoices& choices) { choices_ = choices; }

  int64_t parameter_count() const;
  torch::ScalarType dtype() const;
  torch::Device device() const;

  // Copies a checkpoint's tensors into the parameters (converting dtype). The state dict must hold exactly
  // the model's tensors with their shapes: the first missing, unexpected or misshapen one is an error that
  // names it and the file.
  void load(const Checkpoint& checkpoint);
  // Names and shapes the model expects, in registration order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors() const;

  // Note [Channels-last]
  // On the GPU, cuDNN's fastest convolutions read and write channels-last tensors (NDHWC in memory). With
  // this on, the convolution weights are stored channels-last and the runs hand the model channels-last
  // activations; every layer keeps that layout, so no convolution pays for a transpose. The function computed
  // is the same either way.
  void set_channels_last(bool on);
  bool channels_last() const { return channels_last_; }
  torch::MemoryFormat memory_format() const {
    return channels_last_ ? torch::MemoryFormat::ChannelsLast3d : torch::MemoryFormat::Contiguous;
  }

 protected:
  virtual torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) = 0;
  virtual torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) = 0;
  virtual torch::Tensor decode_end_chunk(CausalCache& cache) {
    (void)cache;
    return {};
  }
  // Exact tiles: the trunk of encode or decode, or nullptr (the default) where the family has none.
  virtual const Trunk* trunk(bool encode) const {
    (void)encode;
    return nullptr;
  }
  // The whole-frame parts; called only where trunk() is local. Each rewinds the cache first.
  virtual torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache);
  virtual torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache);
  // Their ends, for a decoder that looks ahead; nothing by default.
  virtual torch::Tensor decode_features_end_chunk(CausalCache& cache) {
    (void)cache;
    return {};
  }
  virtual torch::Tensor decode_tile_end_chunk(CausalCache& cache, Area interior, int64_t latent_height,
                                              int64_t latent_width) {
    (void)cache, (void)interior, (void)latent_height, (void)latent_width;
    return {};
  }
  // Between pixels and the trunk's ends (Wan2.2 folds 2x2 pixels into channels); identity by default.
  virtual torch::Tensor to_trunk_input(const torch::Tensor& x) const { return x; }
  virtual torch::Tensor from_trunk_output(const torch::Tensor& y) const { return y; }

 private:
  bool channels_last_ = false;
  RunChoices choices_;
};

// VaeModel::tile_work for the trunk `t`, which holds the reaches of the model's blocks (a copy outlives
// nothing: it reads no block).
double trunk_tile_work(const Trunk& t, bool encode, Area interior, int64_t latent_height,
                       int64_t latent_width);

// Fills the parameters with deterministic random values of a sensible scale (unit-variance activations): for
// benchmarks and tests of models whose released weights are not at hand.
void randomize_parameters(VaeModel& model, uint64_t seed = 0);

}  // namespace vaecodec::core
