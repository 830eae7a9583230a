#include "model.h"

#include <utility>

#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include "core/checkpoint.h"
#include "core/device/device.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/resolve_options.h"
#include "core/tensor_run.h"
#include "core/untrusted_json.h"

namespace vaecodec::python {
namespace {

// The planner's options, device and dtype of vaecodec.load()'s keywords, resolved as the CLI resolves its
// flags (Note [One resolver for every front end] in core/resolve_options.h); "auto" is a keyword not given.
core::ResolvedOptions resolve_load_options(const LoadOptions& options) {
  core::GivenOptions given;
  if (options.device != "auto") given.device = options.device;
  if (options.dtype != "auto") given.dtype = options.dtype;
  given.preset = options.preset;
  given.vram = options.vram;
  given.bare_sizes_are_bytes = true;  // vram=8 << 30
  given.chunk = options.chunk;
  given.tile = options.tile;
  given.tile_overlap = options.tile_overlap;
  given.norm_context = options.norm_context;
  given.tile_norms = options.tile_norms;
  return core::resolve_options(given, core::OptionSpelling::python());
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
  std::unique_ptr<Model> m(new Model);
  const core::ResolvedOptions resolved = resolve_load_options(options);
  m->planner_ = resolved.planner;
  const std::string dtype_name = resolved.dtype.value_or("auto");
  const core::OptionSpelling& spelling = core::OptionSpelling::python();
  const torch::Device device = core::resolve_device(resolved.device.value_or("auto"), spelling);
  const torch::ScalarType dtype = core::resolve_dtype(dtype_name, device, spelling);
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

torch::Tensor Stream::finish() {
  try {
    return model_.with_switches([&] { return session_->finish(); });
  } catch (const c10::OutOfMemoryError&) {
    core::Device::of(model_.device()).release_cached();  // what the failed finish held goes back
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
    // The model call sets cuDNN's timing from its choices: the caller's comes back after. The engine's
    // channels-last result (Note [Channels-last]) is handed back in the plain layout, as PyTorch's own
    // modules give theirs: callers view, flatten or save it (safetensors takes contiguous tensors only).
    return with_switches([&] { return core::run_tensor(*model_, op, input, plan).contiguous(); });
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
