#include "core/vae_model.h"

#include <cmath>
#include <cstdlib>
#include <functional>

#include <ATen/CPUGeneratorImpl.h>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/model_registry.h"

namespace vaecodec::core {
namespace {

std::string shape_str(c10::IntArrayRef shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

// Note [Config in the weights file]
// What the tensor shapes cannot tell (SeedVR2's norm_num_groups) may be written into a safetensors file's
// __metadata__ under "vaecodec_config", a JSON object of config keys (the CLI tests give the tiny SeedVR2
// model its 8 norm groups that way). Released files have none and get the released values.
constexpr const char* kConfigMetadataKey = "vaecodec_config";

nlohmann::json file_config(const Checkpoint& checkpoint) {
  const auto it = checkpoint.metadata.find(kConfigMetadataKey);
  if (it == checkpoint.metadata.end()) return nullptr;
  nlohmann::json config = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object())
    throw Error(checkpoint.path.string() + ": __metadata__[\"" + kConfigMetadataKey +
                "\"] is not a JSON object: " + it->second);
  return config;
}

// The detected config, then the file's own keys, then the caller's.
nlohmann::json with_overrides(nlohmann::json detected, const Checkpoint& checkpoint,
                              const ModelOptions& options = {}) {
  const nlohmann::json from_file = file_config(checkpoint);
  if (from_file.is_object()) detected.update(from_file);
  if (options.config.is_object()) detected.update(options.config);
  return detected;
}

}  // namespace

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
                  shape_str(item.value().sizes()) + ")");
    if (it->second.sizes() != item.value().sizes())
      throw Error(file + ": tensor '" + item.key() + "' has shape " + shape_str(it->second.sizes()) + ", " +
                  info().family + " expects " + shape_str(item.value().sizes()));
    item.value().copy_(it->second);
    used.insert(item.key());
  }
  for (const auto& [name, tensor] : checkpoint.tensors)
    if (!used.count(name))
      throw Error(file + ": unexpected tensor '" + name + "' " + shape_str(tensor.sizes()) + " for " +
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
    } else {
      values.normal_(0.0, 0.02, generator);
    }
    p.copy_(values);
  }
}

ModelInfo recognise_model(const Checkpoint& checkpoint) {
  for (const auto& family : model_families()) {
    if (auto config = family.detect(checkpoint.tensors))
      return family.build(with_overrides(*config, checkpoint))->info();
  }
  throw Error(checkpoint.path.string() + ": not a known VAE (" + std::to_string(checkpoint.tensors.size()) +
              " tensors match none of: " + model_family_names() + ")");
}

std::shared_ptr<VaeModel> build_model(const std::string& family, const nlohmann::json& config) {
  return find_model_family(family).build(config);
}

std::shared_ptr<VaeModel> build_model(const Checkpoint& checkpoint, const ModelOptions& options) {
  std::shared_ptr<VaeModel> model;
  if (!options.family.empty()) {
    const auto& family = find_model_family(options.family);
    auto config = family.detect(checkpoint.tensors);
    if (!config)
      throw Error(checkpoint.path.string() + ": the tensors do not form a " + options.family + " checkpoint");
    model = family.build(with_overrides(*config, checkpoint, options));
  } else {
    for (const auto& family : model_families()) {
      if (auto config = family.detect(checkpoint.tensors)) {
        model = family.build(with_overrides(*config, checkpoint, options));
        break;
      }
    }
    if (!model) recognise_model(checkpoint);  // throws the explanation
  }
  model->load(checkpoint);
  place_model(*model, options);
  return model;
}

namespace {

// Note [Heuristics]
// Without timing, LibTorch takes the first kernel that cuDNN's heuristics offer for a convolution. Its
// default, mode A ("instant"), answers quickly but picked kernels 22% slower than timing finds for the Wan2.1
// encoder and decoder on an H100 (bench round trip 720p x81: 3.55 s against 2.91 s); mode B, a slower query,
// picked kernels as fast as timing's (2.90 s), without timing's ~2 s at the start of a run. Its first calls
// cost about what mode A's do (a cold round trip 4.1-4.45 s against 4.41 s), once per shape and thread.
// docs/benchmarks.md, "Start-up: cuDNN's heuristics instead of its timing".
void use_cudnn_heuristics_b() {
  setenv("TORCH_CUDNN_USE_HEURISTIC_MODE_B", "1", /*overwrite=*/0);
}

}  // namespace

void place_model(VaeModel& model, const ModelOptions& options) {
  if (options.device.is_cuda() && options.dtype == torch::kFloat) {
    // float32 means the model's own arithmetic: no TF32 shortcuts in cuDNN convolutions or cuBLAS products.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  // Timing on unless the caller decides (bench and the file pipeline do: off for files unless asked, Note
  // [Autotuning] in io/pipeline.h); mode-B heuristics for when it is off (Note [Heuristics]).
  if (options.device.is_cuda()) {
    use_cudnn_heuristics_b();
    set_cudnn_autotune(true);
  }
  model.to(options.device, options.dtype);
  model.set_channels_last(options.channels_last.value_or(options.device.is_cuda()));
  model.eval();
}

void set_cudnn_autotune(bool on) {
  at::globalContext().setBenchmarkCuDNN(on);
  if (const char* limit = std::getenv("VAECODEC_AUTOTUNE_CANDIDATES")) {
    char* end = nullptr;
    const long n = std::strtol(limit, &end, 10);
    if (end == limit || *end != '\0' || n < 0 || n > 1000)
      throw Error(
          std::string("VAECODEC_AUTOTUNE_CANDIDATES: expected a count of candidates (0: all), got '") +
          limit + "'");
    at::globalContext().setBenchmarkLimitCuDNN(static_cast<int>(n));
  }
}

}  // namespace vaecodec::core
