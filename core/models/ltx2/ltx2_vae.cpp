#include "core/models/ltx2/ltx2_vae.h"

#include <functional>
#include <string>
#include <utility>

#include "core/error.h"

namespace vaecodec::core {
namespace {

constexpr const char* kFamily = "ltx2-vae";

// A layer of an LTX-2 trunk as Trunk runs it: the layer's own forward with the clip's end fixed for the
// trunk it belongs to (Note [LTX-2 exact tiles]), and its reach. The layer stays registered where it is.
class TrunkLayer : public CausalModule {
 public:
  using Forward = std::function<torch::Tensor(const torch::Tensor&, CausalCache&, bool)>;
  TrunkLayer(Forward forward, Reach reach, bool end)
      : forward_(std::move(forward)), reach_(reach), end_(end) {}
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override {
    return forward_(x, cache, end_);
  }
  Reach reach() const override { return reach_; }

 private:
  Forward forward_;
  Reach reach_;
  bool end_;
};

// Adds a wrapper of a layer to `trunk`, kept in `layers`.
void add_layer(Trunk& trunk, std::vector<std::shared_ptr<CausalModule>>& layers, TrunkLayer::Forward forward,
               Reach reach, bool end) {
  layers.push_back(std::make_shared<TrunkLayer>(std::move(forward), reach, end));
  trunk.add(layers.back().get());
}

TrunkLayer::Forward forward_of(const std::shared_ptr<LTX2Module>& block) {
  return
      [block](const torch::Tensor& x, CausalCache& cache, bool end) { return block->forward(x, cache, end); };
}

// The input a run that has ended reads (no frames, the shape of the first layer's input), or undefined when
// the cache has seen nothing. A look-ahead model's first layer keeps its last input frames in the first slot.
torch::Tensor nothing_more(const CausalCache& cache) {
  if (cache.size() == 0 || !cache.slots().front().history.defined()) return {};
  return cache.slots().front().history.narrow(2, 0, 0);
}

}  // namespace

LTX2Encoder::LTX2Encoder(const LTX2Config& config)
    : patch_size_(config.patch_size), latent_channels_(config.latent_channels) {
  const auto widths = config.encoder_widths();
  const bool reflect = config.encoder_padding == "reflect";
  const int64_t in = 3 * config.patch_size * config.patch_size;
  conv_in_ = register_module(
      "conv_in", std::make_shared<LTX2Conv>(in, widths.front(), LTX2Conv::Time::kCausal, reflect));
  auto down_blocks = register_module("down_blocks", std::make_shared<ModuleList>());
  for (size_t i = 0; i < config.encoder_blocks.size(); ++i) {
    const auto& b = config.encoder_blocks[i];
    std::shared_ptr<LTX2Module> block;
    if (b.is_res())
      block = std::make_shared<LTX2ResStage>(widths[i], b.layers, LTX2Conv::Time::kCausal, reflect);
    else
      block = std::make_shared<LTX2Downsampler>(widths[i], b.multiplier, b.stride());
    blocks_.push_back(down_blocks->add(static_cast<int64_t>(i), block));
  }
  conv_out_ =
      register_module("conv_out", std::make_shared<LTX2Conv>(widths.back(), config.latent_channels + 1,
                                                             LTX2Conv::Time::kCausal, reflect));
  // The trunk: conv_in and the blocks up to the last that halves space (Note [LTX-2 exact tiles]).
  for (size_t i = 0; i < config.encoder_blocks.size(); ++i)
    if (config.encoder_blocks[i].stride()[1] == 2) whole_from_ = i + 1;
  feature_channels_ = widths[whole_from_];
  if (whole_from_ == 0) return;  // nothing at a higher resolution to tile
  add_layer(
      trunk_, trunk_layers_,
      [conv = conv_in_](const torch::Tensor& x, CausalCache& cache, bool end) {
        return conv->forward(x, cache, end);
      },
      conv_in_->reach(), false);
  for (size_t i = 0; i < whole_from_; ++i)
    add_layer(trunk_, trunk_layers_, forward_of(blocks_[i]), blocks_[i]->reach(), false);
}

torch::Tensor LTX2Encoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = conv_in_->forward(ltx2_patchify(x, patch_size_), cache, false);
  for (size_t i = 0; i < whole_from_; ++i) h = blocks_[i]->forward(h, cache, false);
  return whole_frame(h, cache);
}

torch::Tensor LTX2Encoder::whole_frame(const torch::Tensor& features, CausalCache& cache) {
  torch::Tensor h = features;
  for (size_t i = whole_from_; i < blocks_.size(); ++i) h = blocks_[i]->forward(h, cache, false);
  h = conv_out_->forward_normed(h, cache, false);
  return h.narrow(1, 0, latent_channels_);  // the means; the last channel is the shared log-variance
}

LTX2Decoder::LTX2Decoder(const LTX2Config& config) : patch_size_(config.patch_size) {
  const auto widths = config.decoder_widths();
  const auto blocks = config.decoder_build_order();
  const bool reflect = config.decoder_padding == "reflect";
  const auto ahead = LTX2Conv::Time::kLookAhead;
  conv_in_ = register_module(
      "conv_in", std::make_shared<LTX2Conv>(config.latent_channels, widths.front(), ahead, reflect));
  auto up_blocks = register_module("up_blocks", std::make_shared<ModuleList>());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    std::shared_ptr<LTX2Module> block;
    if (b.is_res())
      block = std::make_shared<LTX2ResStage>(widths[i], b.layers, ahead, reflect);
    else
      block = std::make_shared<LTX2Upsampler>(widths[i], b.multiplier, b.stride(), b.residual, reflect);
    blocks_.push_back(up_blocks->add(static_cast<int64_t>(i), block));
  }
  const int64_t out = 3 * config.patch_size * config.patch_size;
  conv_out_ = register_module("conv_out", std::make_shared<LTX2Conv>(widths.back(), out, ahead, reflect));
  // The trunk: from the first block that doubles space to conv_out (Note [LTX-2 exact tiles]).
  trunk_from_ = blocks.size();
  for (size_t i = blocks.size(); i-- > 0;)
    if (blocks[i].stride()[1] == 2) trunk_from_ = i;
  feature_channels_ = widths[trunk_from_];
  if (trunk_from_ == blocks.size()) return;  // nothing at a higher resolution to tile
  for (const bool end : {false, true}) {
    Trunk& trunk = end ? end_trunk_ : trunk_;
    for (size_t i = trunk_from_; i < blocks_.size(); ++i)
      add_layer(trunk, trunk_layers_, forward_of(blocks_[i]), blocks_[i]->reach(), end);
    add_layer(
        trunk, trunk_layers_,
        [conv = conv_out_](const torch::Tensor& x, CausalCache& cache, bool end) {
          return conv->forward_normed(x, cache, end);
        },
        conv_out_->reach(), end);
  }
}

torch::Tensor LTX2Decoder::forward(const torch::Tensor& z, CausalCache& cache, bool end) {
  auto h = whole_frame(z, cache, end);
  for (size_t i = trunk_from_; i < blocks_.size(); ++i) h = blocks_[i]->forward(h, cache, end);
  h = conv_out_->forward_normed(h, cache, end);
  return ltx2_unpatchify(h, patch_size_);
}

torch::Tensor LTX2Decoder::whole_frame(const torch::Tensor& z, CausalCache& cache, bool end) {
  auto h = conv_in_->forward(z, cache, end);
  for (size_t i = 0; i < trunk_from_; ++i) h = blocks_[i]->forward(h, cache, end);
  return h;
}

ModelInfo LTX2Vae::describe(const LTX2Config& config) {
  ModelInfo info;
  info.family = kFamily;
  info.config = config.to_json();
  info.latent_channels = config.latent_channels;
  info.spatial_factor = config.spatial_factor();
  info.temporal_factor = config.temporal_factor();
  if (config.latents_mean && config.latents_std) {
    info.latent_mean = *config.latents_mean;
    info.latent_std = *config.latents_std;
  }
  info.decode_lag = config.decode_lag();
  return info;
}

LTX2Vae::LTX2Vae(const LTX2Config& config) : config_(config) {
  encoder_ = register_module("encoder", std::make_shared<LTX2Encoder>(config));
  decoder_ = register_module("decoder", std::make_shared<LTX2Decoder>(config));
  auto stats = register_module("per_channel_statistics", std::make_shared<torch::nn::Module>());
  mean_ = stats->register_parameter("mean-of-means", torch::zeros({config.latent_channels}), false);
  std_ = stats->register_parameter("std-of-means", torch::ones({config.latent_channels}), false);
  info_ = describe(config);
}

std::pair<torch::Tensor, torch::Tensor> LTX2Vae::statistics(const torch::Tensor& like) const {
  const auto options = like.options().memory_format(torch::MemoryFormat::Contiguous);
  auto as_column = [&](const std::optional<std::vector<float>>& values, const torch::Tensor& loaded) {
    const auto v = values ? torch::tensor(*values, options.dtype(torch::kFloat)) : loaded;
    return v.to(options).reshape({1, -1, 1, 1, 1});
  };
  return {as_column(config_.latents_mean, mean_), as_column(config_.latents_std, std_)};
}

torch::Tensor LTX2Vae::normalised(const torch::Tensor& mu) const {
  // Float32 latents (float64 for a float64 model).
  const auto out_type = mu.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto m = mu.to(out_type);
  const auto [mean, std] = statistics(m);
  return ((m - mean) / std).contiguous();
}

torch::Tensor LTX2Vae::raw(const torch::Tensor& z) const {
  const auto compute = z.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto zf = z.to(compute);
  const auto [mean, std] = statistics(zf);
  return (zf * std + mean).to(dtype());
}

torch::Tensor LTX2Vae::encode_chunk(const torch::Tensor& x, CausalCache& cache) {
  cache.rewind();
  return normalised(encoder_->forward(x.to(dtype()), cache));
}

torch::Tensor LTX2Vae::decode_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->forward(raw(z), cache, /*end=*/false);
}

torch::Tensor LTX2Vae::decode_end_chunk(CausalCache& cache) {
  // The decoder's first slot is conv_in's, whose history has the latents' batch, channels and size.
  const torch::Tensor none = nothing_more(cache);
  if (!none.defined()) return {};
  cache.rewind();
  return decoder_->forward(none, cache, /*end=*/true);
}

const Trunk* LTX2Vae::trunk(bool encode) const {
  const Trunk& t = encode ? encoder_->trunk() : decoder_->trunk(/*end=*/false);
  return t.scale() == 1 ? nullptr : &t;  // no resampler of space: nothing to tile
}

int64_t LTX2Vae::feature_channels(bool encode) const {
  return encode ? encoder_->feature_channels() : decoder_->feature_channels();
}

torch::Tensor LTX2Vae::decode_features_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->whole_frame(raw(z), cache, /*end=*/false);
}

torch::Tensor LTX2Vae::encode_features_chunk(const torch::Tensor& features, CausalCache& cache) {
  cache.rewind();
  return normalised(encoder_->whole_frame(features, cache));
}

torch::Tensor LTX2Vae::decode_features_end_chunk(CausalCache& cache) {
  const torch::Tensor none = nothing_more(cache);  // conv_in's first slot, as decode_end_chunk's
  if (!none.defined()) return {};
  cache.rewind();
  return decoder_->whole_frame(none, cache, /*end=*/true);
}

torch::Tensor LTX2Vae::decode_tile_end_chunk(CausalCache& cache, Area interior, int64_t latent_height,
                                             int64_t latent_width) {
  // The tile's first slot is its first upsampler's conv's, whose history has the tile's input area.
  const torch::Tensor none = nothing_more(cache);
  if (!none.defined()) return {};
  cache.rewind();
  const Trunk& t = decoder_->trunk(/*end=*/true);
  const int64_t s = t.scale();
  const Area out{{interior.rows.begin * s, interior.rows.end * s},
                 {interior.cols.begin * s, interior.cols.end * s}};
  return from_trunk_output(t.run(none, out, latent_height, latent_width, cache));
}

torch::Tensor LTX2Vae::to_trunk_input(const torch::Tensor& x) const {
  return ltx2_patchify(x, config_.patch_size);
}

torch::Tensor LTX2Vae::from_trunk_output(const torch::Tensor& y) const {
  return ltx2_unpatchify(y, config_.patch_size);
}

}  // namespace vaecodec::core
