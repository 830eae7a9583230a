#include "core/vae_model.h"

#include <cmath>
#include <cstdlib>
#include <functional>

#include <ATen/CPUGeneratorImpl.h>
#include <set>

#include "core/device/device.h"
#include "core/error.h"
#include "core/sizes.h"
#include "core/untrusted_json.h"

namespace vaecodec::core {
namespace {

// Puts the model's choices in force for one call (Note [Run choices]).
class ModelCall {
 public:
  explicit ModelCall(const VaeModel& model) : scope_(model.choices()) {
    const RunChoices& c = model.choices();
    if (c.autotune && model.device().is_cuda()) Device::set_autotune(*c.autotune);
  }

 private:
  ChoicesScope scope_;
};

}  // namespace

torch::Tensor VaeModel::encode(const torch::Tensor& x, CausalCache& cache) {
  ModelCall call(*this);
  return encode_chunk(x, cache);
}

torch::Tensor VaeModel::decode(const torch::Tensor& z, CausalCache& cache) {
  ModelCall call(*this);
  return decode_chunk(z, cache);
}

torch::Tensor VaeModel::decode_end(CausalCache& cache) {
  ModelCall call(*this);
  return decode_end_chunk(cache);
}

bool VaeModel::tiles_through_time() const {
  const Trunk* e = trunk(true);
  const Trunk* d = trunk(false);
  return e && d && e->local() && d->local();
}

bool VaeModel::exact_tiles() const {
  return tiles_through_time() && !trunk(true)->frame_norms() && !trunk(false)->frame_norms();
}

namespace {

// Scales an area by `k` (k > 0: times k; k < 0: divided by -k).
Area scaled(Area a, int64_t k) {
  auto s = [k](Span x) { return k > 0 ? Span{x.begin * k, x.end * k} : Span{x.begin / -k, x.end / -k}; };
  return {s(a.rows), s(a.cols)};
}

const Trunk& local_trunk(const VaeModel& model, const Trunk* trunk) {
  if (!trunk || !trunk->local())
    throw Error(model.info().family +
                ": this model cannot run tiles through time (its trunk looks at the whole frame)");
  return *trunk;
}

}  // namespace

// The trunk's ends against pixels and latent pixels: a decoder trunk multiplies by scale() > 0 (its input is
// at latent resolution), an encoder trunk divides by -scale() (its output is); the rest of the spatial factor
// is the family's folding of pixels into channels (to_trunk_input / from_trunk_output).
Area VaeModel::tile_input(bool encode, Area interior, int64_t latent_height, int64_t latent_width) const {
  const Trunk& t = local_trunk(*this, trunk(encode));
  const int64_t f = info().spatial_factor;
  if (!encode) return t.input_area(scaled(interior, t.scale()), latent_height, latent_width);
  const int64_t down = -t.scale(), fold = f / down;
  const Area in = t.input_area(interior, latent_height * down, latent_width * down);
  return scaled(in, fold);
}

double trunk_tile_work(const Trunk& t, bool encode, Area interior, int64_t latent_height,
                       int64_t latent_width) {
  const int64_t s = t.scale();
  const Area out = encode ? interior : scaled(interior, s);
  const int64_t h = encode ? latent_height * -s : latent_height,
                w = encode ? latent_width * -s : latent_width;
  const auto areas = t.areas(out, h, w);
  const auto extents = t.extents(h, w);
  double work = 0, base = 0;
  const double interior_area = static_cast<double>(interior.rows.size() * interior.cols.size());
  for (size_t i = 0; i + 1 < areas.size(); ++i) {
    // Pixels of block i's input per latent pixel, squared.
    const double density = static_cast<double>(extents[i].first) / static_cast<double>(latent_height);
    work += static_cast<double>(areas[i].rows.size() * areas[i].cols.size());
    base += interior_area * density * density;
  }
  return base > 0 ? work / base : 1.0;
}

double VaeModel::tile_work(bool encode, Area interior, int64_t latent_height, int64_t latent_width) const {
  return trunk_tile_work(local_trunk(*this, trunk(encode)), encode, interior, latent_height, latent_width);
}

torch::Tensor VaeModel::decode_features(const torch::Tensor& z, CausalCache& cache) {
  ModelCall call(*this);
  return decode_features_chunk(z, cache);
}

torch::Tensor VaeModel::encode_features(const torch::Tensor& features, CausalCache& cache) {
  ModelCall call(*this);
  return encode_features_chunk(features, cache);
}

torch::Tensor VaeModel::decode_tile(const torch::Tensor& features, CausalCache& cache, Area interior,
                                    int64_t latent_height, int64_t latent_width) {
  ModelCall call(*this);
  const Trunk& t = local_trunk(*this, trunk(false));
  cache.rewind();
  return from_trunk_output(t.run(features, scaled(interior, t.scale()), latent_height, latent_width, cache));
}

torch::Tensor VaeModel::encode_tile(const torch::Tensor& x, CausalCache& cache, Area interior,
                                    int64_t latent_height, int64_t latent_width) {
  ModelCall call(*this);
  const Trunk& t = local_trunk(*this, trunk(true));
  const int64_t down = -t.scale();
  cache.rewind();
  return t.run(to_trunk_input(x), interior, latent_height * down, latent_width * down, cache);
}

torch::Tensor VaeModel::decode_features_end(CausalCache& cache) {
  ModelCall call(*this);
  return decode_features_end_chunk(cache);
}

torch::Tensor VaeModel::decode_tile_end(CausalCache& cache, Area interior, int64_t latent_height,
                                        int64_t latent_width) {
  ModelCall call(*this);
  return decode_tile_end_chunk(cache, interior, latent_height, latent_width);
}

torch::Tensor VaeModel::decode_features_chunk(const torch::Tensor&, CausalCache&) {
  throw Error(info().family + ": this model has no whole-frame part for exact tiles");
}

torch::Tensor VaeModel::encode_features_chunk(const torch::Tensor&, CausalCache&) {
  throw Error(info().family + ": this model has no whole-frame part for exact tiles");
}

int64_t VaeModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

torch::ScalarType VaeModel::dtype() const {
  auto params = parameters();
  return params.empty() ? torch::kFloat : params.front().scalar_type();
}

torch::Device VaeModel::device() const {
  auto params = parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

std::vector<std::pair<std::string, std::vector<int64_t>>> VaeModel::expected_tensors() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& item : named_parameters()) out.emplace_back(item.key(), item.value().sizes().vec());
  return out;
}

void VaeModel::load(const Checkpoint& checkpoint) {
  const std::string file = checkpoint.path.string();
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : named_parameters()) {
    const auto it = checkpoint.tensors.find(item.key());
    if (it == checkpoint.tensors.end())
      throw Error(file + ": missing tensor '" + item.key() + "' (" + info().family + " expects " +
                  shape_string(item.value().sizes()) + ")");
    if (it->second.sizes() != item.value().sizes())
      throw Error(file + ": tensor '" + item.key() + "' has shape " + shape_string(it->second.sizes()) +
                  ", " + info().family + " expects " + shape_string(item.value().sizes()));
    item.value().copy_(it->second);
    used.insert(item.key());
  }
  for (const auto& [name, tensor] : checkpoint.tensors)
    if (!used.count(name))
      throw Error(file + ": unexpected tensor '" + name + "' " + shape_string(tensor.sizes()) + " for " +
                  info().family + " " + info().config.dump());
}

void VaeModel::set_channels_last(bool on) {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (p.dim() == 5)
      p.set_data(p.contiguous(on ? torch::MemoryFormat::ChannelsLast3d : torch::MemoryFormat::Contiguous));
    else if (p.dim() == 4)
      p.set_data(p.contiguous(on ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous));
  }
  channels_last_ = on;
}

void randomize_parameters(VaeModel& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    auto values = torch::empty(p.sizes(), torch::kFloat);
    const auto& name = item.key();
    if (p.dim() >= 2) {
      const double fan_in = static_cast<double>(p.numel() / p.size(0));
      values.normal_(0.0, 1.0 / std::sqrt(fan_in), generator);
    } else if (name.size() >= 5 && name.compare(name.size() - 5, 5, "gamma") == 0) {
      values.uniform_(0.8, 1.2, generator);
    } else if (name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0) {  // norm scales
      values.uniform_(0.8, 1.2, generator);
    } else if (name.find("std") != std::string::npos) {  // a latent scale (LTX-2's std-of-means): never ~0
      values.uniform_(0.8, 1.2, generator);
    } else {
      values.normal_(0.0, 0.02, generator);
    }
    p.copy_(values);
  }
}

}  // namespace vaecodec::core

namespace vaecodec::core {

std::optional<std::vector<float>> config_statistics(const nlohmann::json& config, const std::string& key,
                                                    int64_t channels, bool positive,
                                                    const std::string& family) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  const std::string what = family + " config: " + key;
  if (!it->is_array()) throw Error(what + " is not a list of numbers: " + json_excerpt(*it));
  if (static_cast<int64_t>(it->size()) != channels)
    throw Error(what + " has " + std::to_string(it->size()) + " values, but the model has " +
                std::to_string(channels) + " latent channels");
  std::vector<float> values;
  for (const auto& value : *it) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || (positive && value.get<double>() <= 0))
      throw Error(what + " holds " + json_excerpt(value) + ", not a finite" + (positive ? " positive" : "") +
                  " number");
    values.push_back(value.get<float>());
  }
  return values;
}

std::optional<double> config_factor(const nlohmann::json& config, const std::string& key,
                                    const std::string& family) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0)
    throw Error(family + " config: " + key + " is " + json_excerpt(*it) + ", not a finite positive number");
  return it->get<double>();
}

void refuse_config_key(const nlohmann::json& config, const std::string& key, const std::string& family,
                       const std::string& why) {
  const auto it = config.find(key);
  if (it != config.end() && !it->is_null())
    throw Error(family + " config: " + key + " " + json_excerpt(*it) + " cannot be used (" + why + ")");
}

}  // namespace vaecodec::core
