#include "model.h"

#include <utility>

#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include "core/checkpoint.h"
#include "core/device/device.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/presets.h"
#include "core/sizes.h"
#include "core/tensor_run.h"
#include "core/untrusted_json.h"

namespace vaecodec::python {
namespace {

torch::Device resolve_device(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
  std::optional<torch::Device> parsed;
  try {
    parsed = torch::Device(name);
  } catch (const c10::Error&) {
    throw UsageError("device '" + name + "' is not a device (use cpu, cuda or cuda:N)");
  }
  if (parsed->is_cpu()) return *parsed;
  if (!parsed->is_cuda()) throw UsageError("device '" + name + "': vaecodec runs on cpu or cuda");
  if (!torch::cuda::is_available())
    throw UsageError("device '" + name + "': no CUDA device is available here");
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (parsed->has_index() && parsed->index() >= count)
    throw UsageError("device '" + name + "': there are only " + std::to_string(count) + " CUDA devices");
  return parsed->has_index() ? *parsed : torch::Device(torch::kCUDA, 0);
}

torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device) {
  if (dtype == "fp32") return torch::kFloat;
  if (dtype == "bf16" || dtype == "fp8") return torch::kBFloat16;
  if (dtype == "fp16") return torch::kHalf;
  if (dtype == "auto") return device.is_cuda() ? torch::kBFloat16 : torch::kFloat;
  throw UsageError("dtype '" + dtype + "' is not one of fp32, bf16, fp16, fp8");
}

// The planner's options from a preset and a budget, as the CLI resolves --preset and --vram.
core::PlannerOptions planner_options(const LoadOptions& options, std::string& device, std::string& dtype) {
  core::PlannerOptions planner;
  if (!options.preset.empty()) {
    std::optional<core::Preset> found;
    try {
      found = core::find_preset(options.preset);
    } catch (const Error& e) {  // a name the caller gave
      throw UsageError(e.what());
    }
    const core::Preset& preset = *found;
    planner = preset.planner;
    if (device == "auto") device = preset.device;
    if (dtype == "auto") dtype = preset.dtype;
  }
  if (!options.vram.empty()) {
    try {
      planner.budget_bytes = core::parse_size(options.vram);
    } catch (const Error& e) {
      throw UsageError(std::string("vram: ") + e.what());
    }
  }
  if (options.chunk < 0 || options.chunk > core::kMaxChunk)
    throw UsageError("chunk " + std::to_string(options.chunk) + ": at most " +
                     std::to_string(core::kMaxChunk) + " latent frames per call (0: the planner's choice)");
  if (options.chunk > 0) planner.chunk = options.chunk;
  if (!options.tile.empty()) {
    try {
      planner.tile = core::parse_tile(options.tile);
    } catch (const UsageError&) {
      throw UsageError("tile '" + options.tile +
                       "' is not a tile size: give 64, (80, 48) or '80x48' (width, height in latent pixels)");
    }
  }
  for (const auto& [name, value] :
       {std::pair{"tile_overlap", options.tile_overlap}, std::pair{"norm_context", options.norm_context}})
    if (value && (*value < 0 || *value > core::kMaxTileMargin))
      throw UsageError(std::string(name) + " " + std::to_string(*value) + ": from 0 to " +
                       std::to_string(core::kMaxTileMargin) + " latent pixels");
  if (options.tile_overlap) planner.tile_overlap = *options.tile_overlap;
  if (options.norm_context) {
    planner.norm_context = *options.norm_context;
    planner.norm_context_fixed = true;
  }
  return planner;
}

}  // namespace

SwitchGuard::SwitchGuard()
    : benchmark_(at::globalContext().benchmarkCuDNN()),
      tf32_cudnn_(at::globalContext().allowTF32CuDNN()),
      tf32_cublas_(at::globalContext().allowTF32CuBLAS()) {}

SwitchGuard::~SwitchGuard() {
  at::globalContext().setBenchmarkCuDNN(benchmark_);
  at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
  at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
}

std::unique_ptr<Model> Model::from_path(const std::string& path, const LoadOptions& options) {
  return build(core::load_checkpoint(path), options);
}

std::unique_ptr<Model> Model::from_tensors(std::map<std::string, torch::Tensor> tensors,
                                           const std::string& config_json, const LoadOptions& options) {
  core::Checkpoint checkpoint;
  checkpoint.path = "state dict";
  checkpoint.format = "tensors";
  checkpoint.tensors = std::move(tensors);
  if (!config_json.empty()) {
    checkpoint.config = core::parse_untrusted_json(config_json);
    if (!checkpoint.config.is_object()) throw UsageError("config: not a JSON object");
    // vaecodec's own config keys for what the tensors cannot tell (vaecodec.load's model_config): what a
    // file would carry in its metadata (Note [Config in the weights file] in core/models/registry.cpp).
    if (const auto it = checkpoint.config.find("vaecodec_config"); it != checkpoint.config.end()) {
      if (!it->is_object()) throw UsageError("model_config: not a JSON object");
      checkpoint.metadata["vaecodec_config"] = it->dump();
      checkpoint.config.erase(it);
    }
  }
  try {
    checkpoint.layout = core::normalize_layout(checkpoint.tensors);
  } catch (const Error& e) {
    throw Error(checkpoint.path.string() + ": " + e.what());
  }
  return build(std::move(checkpoint), options);
}

std::unique_ptr<Model> Model::build(core::Checkpoint checkpoint, const LoadOptions& options) {
  std::string device_name = options.device, dtype_name = options.dtype;
  std::unique_ptr<Model> m(new Model);
  m->planner_ = planner_options(options, device_name, dtype_name);
  const torch::Device device = resolve_device(device_name);
  const torch::ScalarType dtype = resolve_dtype(dtype_name, device);
  const auto conv = core::parse_conv_backend(options.conv);
  if (!conv) throw UsageError("conv '" + options.conv + "' is not one of auto, cudnn, own");
  SwitchGuard guard;  // prepare() sets the device's switches for the model: the caller's come back after
  core::ModelOptions model_options;
  model_options.family = options.family;
  model_options.device = device;
  model_options.dtype = dtype;
  model_options.choices.conv = *conv;
  model_options.choices.fp8 = dtype_name == "fp8";  // refused by place_model where it cannot run
  model_options.choices.autotune = options.autotune;
  m->model_ = core::build_model(checkpoint, model_options);
  m->chunk_ = options.chunk;
  return m;
}

void Model::no_tf32() {
  // float32 is the model's own arithmetic, as Device::prepare sets it for the CLI: no TF32 shortcuts.
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
}

std::unique_ptr<Stream> Model::stream(core::Op op, int64_t chunk) {
  if (chunk < 0 || chunk > core::kMaxChunk)
    throw UsageError("chunk " + std::to_string(chunk) + ": at most " + std::to_string(core::kMaxChunk) +
                     " latent frames per call (0: the load's chunk, else a whole block)");
  core::Session::Options options{chunk > 0 ? chunk : chunk_, calls_};
  return std::make_unique<Stream>(*this, std::make_unique<core::Session>(model_, op, std::move(options)));
}

torch::Tensor Stream::push(const torch::Tensor& block) {
  try {
    return model_.with_switches([&] { return session_->push(block); });
  } catch (const c10::OutOfMemoryError&) {
    core::Device::of(model_.device()).release_cached();  // what the failed push held goes back
    throw;
  }
}

torch::Tensor Model::run(core::Op op, const torch::Tensor& input) {
  std::lock_guard<std::mutex> lock(*calls_);
  c10::OptionalDeviceGuard device_guard;
  if (model_->device().is_cuda()) device_guard.reset_device(model_->device());
  core::Plan plan;
  try {
    plan = core::plan_tensor_run(*model_, op, input, planner_);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a budget that cannot be met is what was asked, not a failure of the run
    throw UsageError(e.what());
  }
  try {
    // The model call sets cuDNN's timing from its choices: the caller's comes back after.
    return with_switches([&] { return core::run_tensor(*model_, op, input, plan); });
  } catch (const c10::OutOfMemoryError&) {
    core::Device::of(model_->device()).release_cached();  // what the failed run held goes back
    throw;
  }
}

torch::Tensor Model::encode(const torch::Tensor& video) {
  return run(core::Op::kEncode, video);
}

torch::Tensor Model::decode(const torch::Tensor& latents) {
  return run(core::Op::kDecode, latents);
}

std::string Model::plan(const std::vector<int64_t>& shape, const std::string& op) {
  const core::Op parsed = op == "encode"   ? core::Op::kEncode
                          : op == "decode" ? core::Op::kDecode
                                           : throw UsageError("op '" + op + "' is not encode or decode");
  const torch::Tensor shaped = torch::empty(shape, torch::TensorOptions().device(torch::kMeta));
  std::lock_guard<std::mutex> lock(*calls_);
  core::Plan plan;
  try {
    plan = core::plan_tensor_run(*model_, parsed, shaped, planner_);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  nlohmann::json j = plan.to_json();
  j["summary"] = plan.summary();
  return j.dump();
}

}  // namespace vaecodec::python
