#include <cuda_runtime.h>

#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
}

#include "app/commands.h"
#include "app/devices.h"
#include "app/run_options.h"
#include "core/checkpoint.h"
#include "core/device/device.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/models/registry.h"
#include "core/presets.h"
#include "core/vae_model.h"
#include "io/ffmpeg_common.h"
#include "io/video_writer.h"

namespace vaecodec::app {
namespace {

std::string version_string(int v) {
  // CUDA and cuDNN encode versions as major*1000 + minor*10 (CUDA) or major*10000 + minor*100 + patch (cuDNN
  // 9).
  std::ostringstream s;
  s << v / 1000 << "." << (v % 1000) / 10;
  return s.str();
}

std::string av_version(unsigned v) {
  std::ostringstream s;
  s << AV_VERSION_MAJOR(v) << "." << AV_VERSION_MINOR(v) << "." << AV_VERSION_MICRO(v);
  return s.str();
}

nlohmann::json collect_info() {
  nlohmann::json j;
  j["vaecodec"] = VAECODEC_VERSION;
  j["libtorch"] = TORCH_VERSION;
  int runtime = 0, driver = 0;
  j["cuda_build"] = version_string(CUDART_VERSION);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) j["cuda_runtime"] = version_string(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) j["cuda_driver"] = version_string(driver);
  const auto& hooks = at::detail::getCUDAHooks();
  if (hooks.hasCuDNN()) {
    const long v = hooks.versionCuDNN();
    j["cudnn"] =
        std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
  } else {
    j["cudnn"] = nullptr;
  }
  // Note [Own convolutions] (core/kernels/conv3d.h): whether this build holds the Hopper kernels; each GPU
  // says below whether it takes them.
  j["hopper_conv_kernels"] = core::own_conv_kernels_built();
  j["ffmpeg"] = av_version_info();
  j["libavformat"] = av_version(avformat_version());
  j["libavcodec"] = av_version(avcodec_version());
  j["libavutil"] = av_version(avutil_version());
  io::set_ffmpeg_log_level(AV_LOG_QUIET);  // an encoder that cannot open says why in the answer
  j["gpu_encoders"] = nlohmann::json::array();
  for (const auto& [name, why] : io::gpu_encoders())
    j["gpu_encoders"].push_back({{"encoder", name},
                                 {"works", why.empty()},
                                 {"why", why.empty() ? nlohmann::json() : nlohmann::json(why)}});
  j["gpus"] = nlohmann::json::array();
  // What --devices all takes: a batch is split over these (Note [Batches over devices]).
  j["batch_devices"] = nlohmann::json::array();
  for (int64_t i = 0; i < visible_cuda_devices(); ++i)
    j["batch_devices"].push_back("cuda:" + std::to_string(i));
  if (torch::cuda::is_available()) {
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
      const auto* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
      const core::Device& device =
          core::Device::of(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
      j["gpus"].push_back({{"index", i},
                           {"name", p->name},
                           {"memory_bytes", static_cast<int64_t>(p->totalGlobalMem)},
                           {"free_bytes", device.memory_info().free},
                           {"compute_capability", std::to_string(p->major) + "." + std::to_string(p->minor)},
                           {"own_conv_kernels", core::own_conv_kernels_run_on(p->major, p->minor)}});
      const auto preset = core::suggest_preset(static_cast<int64_t>(p->totalGlobalMem), p->name);
      j["gpus"].back()["suggested_preset"] = preset ? nlohmann::json(*preset) : nlohmann::json();
    }
  }
  return j;
}

void print_info(const nlohmann::json& j) {
  auto str = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("not available") : v.get<std::string>();
  };
  std::cout << "vaecodec    " << str(j["vaecodec"]) << "\n"
            << "LibTorch    " << str(j["libtorch"]) << "\n"
            << "CUDA        build " << str(j["cuda_build"]) << ", runtime "
            << str(j.value("cuda_runtime", nlohmann::json())) << ", driver "
            << str(j.value("cuda_driver", nlohmann::json())) << "\n"
            << "cuDNN       " << str(j["cudnn"]) << "\n"
            << "Own convs   Hopper implicit GEMM (sm_90a, --conv): "
            << (j["hopper_conv_kernels"].get<bool>() ? "built"
                                                     : "not built (no CUTLASS headers or no sm_90 target)")
            << "\n"
            << "FFmpeg      " << str(j["ffmpeg"]) << " (libavformat " << str(j["libavformat"])
            << ", libavcodec " << str(j["libavcodec"]) << ")\n";
  std::string encoders;
  for (const auto& e : j["gpu_encoders"])
    encoders +=
        (encoders.empty() ? "" : "; ") + e["encoder"].get<std::string>() +
        (e["works"].get<bool>() ? " works" : " cannot encode here (" + e["why"].get<std::string>() + ")");
  std::cout << "GPU encode  " << (encoders.empty() ? "none in this FFmpeg" : encoders)
            << " (--codec auto takes one that works, else libx264)\n";
  if (j["gpus"].empty()) {
    std::cout << "GPU         no CUDA device\n"
              << "Batches     on one device (--devices needs CUDA devices)\n";
    return;
  }
  for (const auto& g : j["gpus"]) {
    std::cout << "GPU " << g["index"].get<int64_t>() << "       " << g["name"].get<std::string>() << ", "
              << std::fixed << std::setprecision(1) << g["memory_bytes"].get<int64_t>() / double(1ull << 30)
              << " GiB, compute " << g["compute_capability"].get<std::string>();
    if (g["suggested_preset"].is_string())
      std::cout << ", preset " << g["suggested_preset"].get<std::string>();
    if (g["own_conv_kernels"].get<bool>()) std::cout << ", own convolutions";
    std::cout << "\n";
  }
  std::string all;
  for (const auto& d : j["batch_devices"]) all += (all.empty() ? "" : ", ") + d.get<std::string>();
  std::cout << "Batches     --devices all: " << all
            << ", one input per device at a time, longest first; one input is split across them in bands\n";
}

nlohmann::json inspect(const std::string& path) {
  const auto checkpoint = core::load_checkpoint(path);
  const auto info = core::recognise_model(checkpoint);
  std::map<std::string, int64_t> dtypes;
  int64_t params = 0;
  for (const auto& [name, t] : checkpoint.tensors) {
    dtypes[dtype_name(t.scalar_type())] += 1;
    params += t.numel();
  }
  nlohmann::json j;
  j["file"] = path;
  j["format"] = checkpoint.format;
  j["layout"] = checkpoint.layout;
  j["model"] = info.family;
  j["description"] = core::find_model_family(info.family).description;
  j["config"] = info.config;
  j["latent_channels"] = info.latent_channels;
  j["spatial_factor"] = info.spatial_factor;
  j["temporal_factor"] = info.temporal_factor;
  j["tensors"] = checkpoint.tensors.size();
  j["dtypes"] = dtypes;
  j["parameters"] = params;
  return j;
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Versions of vaecodec and its libraries, and the GPUs it can use");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object instead of text");
  cmd->callback([json] {
    const auto j = collect_info();
    if (*json)
      std::cout << core::json_text(j) << "\n";
    else
      print_info(j);
  });
}

void add_inspect_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("inspect", "Describe a weights file: layout, model family and config, dtype, size");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("weights", *path, "A .safetensors or .pth file, or a diffusers model folder")->required();
  cmd->add_flag("--json", *json, "Print one JSON object instead of text");
  cmd->callback([path, json] {
    const auto j = inspect(*path);
    if (*json) {
      std::cout << core::json_text(j) << "\n";
      return;
    }
    std::string dtypes;
    for (const auto& [k, v] : j["dtypes"].items())
      dtypes += (dtypes.empty() ? "" : ", ") + k + " x" + v.dump();
    std::cout << "file        " << j["file"].get<std::string>() << "\n"
              << "format      " << j["format"].get<std::string>() << " (" << j["layout"].get<std::string>()
              << " layout)\n"
              << "model       " << j["model"].get<std::string>() << ": "
              << j["description"].get<std::string>() << "\n"
              << "config      " << core::json_text(j["config"]) << "\n"
              << "latent      " << j["latent_channels"] << " channels, " << j["spatial_factor"] << "x space, "
              << j["temporal_factor"] << "x time\n"
              << "tensors     " << j["tensors"] << " (" << dtypes << ")\n"
              << "parameters  " << j["parameters"] << "\n";
  });
}

}  // namespace vaecodec::app
