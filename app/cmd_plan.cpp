#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/memory_options.h"
#include "app/run_options.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/models/registry.h"

namespace vaecodec::app {
namespace {

struct PlanOptions {
  std::string weights;  // optional: the model's family and size from a checkpoint
  std::string model;    // empty: the default family (core::default_model_family)
  std::string size = "1280x720";
  std::string op = "decode";
  std::string device = "cuda";
  std::string dtype = "bf16";
  int64_t chunk = 1;
  bool json = false;
  MemoryOptions memory;
};

// The model's description and parameter count, without weights in memory.
std::pair<core::ModelInfo, int64_t> describe_model(const PlanOptions& o) {
  if (!o.weights.empty()) {
    const core::Checkpoint checkpoint = core::load_checkpoint(o.weights);
    int64_t params = 0;
    for (const auto& [name, t] : checkpoint.tensors) params += t.numel();
    return {core::recognise_model(checkpoint), params};
  }
  const core::ModelFamily& family =
      o.model.empty() ? core::default_model_family() : core::find_model_family(o.model);
  const auto model = family.build(family.released_config);  // uninitialised: only the shapes are used
  return {family.describe(family.released_config), model->parameter_count()};
}

void plan(const PlanOptions& o) {
  const auto [width, height] = parse_frame_size(o.size);
  const auto [info, params] = describe_model(o);
  const int64_t f = info.spatial_factor;
  const int64_t padded_w = (width + f - 1) / f * f, padded_h = (height + f - 1) / f * f;
  const torch::Device device =
      o.device == "cpu" ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  const torch::ScalarType dtype = resolve_dtype(o.dtype, device);
  const core::PlanRequest request =
      core::PlanRequest::of(info, params, core::parse_op(o.op), padded_w, padded_h, dtype);
  const core::Plan p = core::plan_run(request, o.memory.planner);
  if (o.json) {
    nlohmann::json j = {
        {"model", info.family},
        {"parameters", params},
        {"size", o.size},
        {"padded_size", std::to_string(padded_w) + "x" + std::to_string(padded_h)},
        {"dtype", c10::toString(dtype)},
        {"preset", o.memory.chosen ? nlohmann::json(o.memory.chosen->name) : nlohmann::json()},
        {"plan", p.to_json()}};
    std::cout << core::json_text(j) << "\n";
    return;
  }
  const core::MemoryEstimate& e = p.estimate;
  std::cout << p.summary() << "\n"
            << "  weights " << core::format_size(e.weights) << ", caches " << core::format_size(e.cache)
            << (p.offload ? " (+ " + core::format_size(e.host_cache) + " in host memory)" : "")
            << ", activations " << core::format_size(e.activations) << ", chunk in/out "
            << core::format_size(e.io) << "\n"
            << "  coefficients: " << p.calibration << "\n";
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan",
                                 "Show the chunk and tile plan for a frame size and memory budget, without "
                                 "running anything");
  cmd->add_option("--weights", o->weights,
                  "Weights file: its model family and size (default: --model's released "
                  "architecture)");
  cmd->add_option("--model", o->model,
                  "Model family: " + core::model_family_names() +
                      " (default: " + core::default_model_family().name + ")");
  cmd->add_option("--size", o->size, "WIDTHxHEIGHT of the video")->capture_default_str();
  cmd->add_option("--op", o->op, "encode, decode or roundtrip")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "Fixed latent frames per chunk (default: the planner's)")
      ->check(CLI::Range(int64_t{1}, core::kMaxChunk));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  add_memory_options(*cmd, o->memory, o->device, o->dtype, o->chunk);
  cmd->callback([o] { plan(*o); });
}

void add_presets_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("presets", "List the built-in GPU-tier presets (budget, dtype, engine options)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print a JSON array");
  cmd->callback([json] { std::cout << describe_presets(*json); });
}

}  // namespace vaecodec::app
