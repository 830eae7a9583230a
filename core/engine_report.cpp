#include "core/engine_report.h"

#include <cuda_runtime.h>

#include <cstdlib>

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "core/kernel_log.h"
#include "core/kernels/conv3d.h"
#include "core/sizes.h"
#include "core/vae_model.h"

namespace vaecodec::core {
namespace {

std::string on_off(bool on) {
  return on ? "on" : "off";
}

}  // namespace

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return "fp32";
    case torch::kBFloat16:
      return "bf16";
    case torch::kHalf:
      return "fp16";
    case torch::kDouble:
      return "fp64";
    case torch::kFloat8_e4m3fn:
      return "fp8";
    default:
      return c10::toString(dtype);
  }
}

std::vector<std::string> engine_setup_lines(const VaeModel& model) {
  const bool autotune = model.choices().autotune.value_or(false);
  std::vector<std::string> lines;
  const torch::Device device = model.device();
  const at::Context& context = at::globalContext();
  if (device.is_cuda()) {
    cudaDeviceProp props{};
    std::string name = device.str();
    if (cudaGetDeviceProperties(&props, device.index()) == cudaSuccess)
      name += " (" + std::string(props.name) + ", compute capability " + std::to_string(props.major) + "." +
              std::to_string(props.minor) + ", " + format_size(static_cast<int64_t>(props.totalGlobalMem)) +
              ", " + std::to_string(props.multiProcessorCount) + " SMs)";
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    lines.push_back("device: " + name + "; CUDA runtime " + std::to_string(runtime / 1000) + "." +
                    std::to_string(runtime % 1000 / 10) + ", driver " + std::to_string(driver / 1000) + "." +
                    std::to_string(driver % 1000 / 10));
  } else {
    lines.push_back("device: cpu (" + std::to_string(at::get_num_threads()) + " threads)");
  }
  const bool fp8 = model.choices().fp8 && model.dtype() == torch::kBFloat16 && device.is_cuda();
  lines.push_back("model: " + model.info().family + ", " + dtype_name(model.dtype()) +
                  (fp8 ? " with fp8 (e4m3) convolutions after each norm" : "") + ", " +
                  std::to_string(model.parameter_count()) + " parameters, layout " +
                  (model.channels_last() ? "channels-last (NDHWC)" : "contiguous (NCDHW)"));
  if (device.is_cuda()) {
    const char* mode_b = std::getenv("TORCH_CUDNN_USE_HEURISTIC_MODE_B");
    std::string conv =
        "convolutions: cuDNN " + std::to_string(at::detail::getCUDAHooks().versionCuDNN()) + ", " +
        (autotune ? "algorithms timed per shape (--autotune on)"
                  : std::string("algorithms from its heuristics, mode ") +
                        (mode_b && *mode_b && std::string(mode_b) != "0" ? "B" : "A") + " (no timing)") +
        ", TF32 " + on_off(context.allowTF32CuDNN()) + ", deterministic " +
        on_off(context.deterministicCuDNN());
    const auto backend = model.choices().conv;
    const auto* props = at::cuda::getDeviceProperties(device.index());
    const bool hopper = kernels::own_kernels_run_on(props->major, props->minor);
    conv += std::string("; own Hopper kernels: ") +
            (backend == kernels::ConvBackend::kCudnn ? "off (--conv cudnn)"
             : !hopper ? (kernels::conv3d_sm90_built() ? "none for this GPU" : "not built")
             : backend == kernels::ConvBackend::kOwn
                 ? "wherever a tile fits (--conv own)"
                 : "wherever a tile fits but where cuDNN measured faster (--conv auto)");
    lines.push_back(conv);
    lines.push_back("matrix products: cuBLAS, TF32 " + on_off(context.allowTF32CuBLAS()));
  } else {
    lines.push_back(std::string("convolutions: LibTorch's CPU kernels (oneDNN ") +
                    (context.userEnabledMkldnn() ? "enabled" : "disabled") + ")");
  }
  std::string attention = "attention: scaled_dot_product_attention, backends allowed:";
  if (context.userEnabledFlashSDP()) attention += " flash";
  if (context.userEnabledMemEfficientSDP()) attention += " memory-efficient";
  if (context.userEnabledCuDNNSDP()) attention += " cuDNN";
  if (context.userEnabledMathSDP()) attention += " math";
  lines.push_back(attention + " (the one used per call is counted at the end)");
  if (device.is_cuda()) {
    const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    lines.push_back(std::string("allocator: LibTorch's caching allocator, PYTORCH_CUDA_ALLOC_CONF=") +
                    (conf && *conf ? conf : "(unset)"));
  }
  return lines;
}

std::vector<std::string> kernel_lines() {
  std::vector<std::string> lines;
  for (const KernelLog::Entry& e : KernelLog::entries()) {
    bool found = false;
    for (std::string& line : lines)
      if (line.rfind(e.kernel + ":", 0) == 0) {
        line += ", " + e.path + " " + std::to_string(e.calls) + (e.calls == 1 ? " call" : " calls");
        found = true;
      }
    if (!found)
      lines.push_back(e.kernel + ": " + e.path + " " + std::to_string(e.calls) +
                      (e.calls == 1 ? " call" : " calls"));
  }
  return lines;
}

bool own_conv_kernels_built() {
  return kernels::conv3d_sm90_built();
}

bool own_conv_kernels_run_on(int major, int minor) {
  return kernels::own_kernels_run_on(major, minor);
}

}  // namespace vaecodec::core
