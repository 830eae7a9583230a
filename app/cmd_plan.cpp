#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/batch.h"
#include "app/commands.h"
#include "app/device_batch.h"
#include "app/devices.h"
#include "app/memory_options.h"
#include "app/run_options.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "io/run_plan.h"

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
  int64_t frames = 81;  // the clip's length (exact tiles plan their windows by it)
  bool json = false;
  std::string devices;              // --devices: how a batch would be split over them
  std::vector<std::string> inputs;  // with --devices: the batch's inputs (files or folders)
  MemoryOptions memory;
};

// How a batch of `inputs` would be split over `devices` (Note [Batches over devices]): each device's inputs
// in the order it would take them, with their frames.
nlohmann::json split_json(const PlanOptions& o, const std::vector<torch::Device>& devices) {
  const RunCommand command = o.op == "decode" ? RunCommand::kDecode : RunCommand::kRoundtrip;
  std::vector<BatchItem> items;
  for (const std::string& input : o.inputs) {
    std::error_code error;
    if (!std::filesystem::exists(input, error))
      throw Error("cannot open input " + input + ": No such file or directory");
    if (std::filesystem::is_directory(input, error)) {
      for (const auto& file : folder_inputs(input, command)) items.push_back({file, {}, {}});
    } else {
      items.push_back({input, {}, {}});
    }
  }
  std::vector<io::InputLength> lengths;
  for (const BatchItem& item : items) lengths.push_back(io::probe_length(item.input));
  const std::vector<size_t> order = longest_first(items, lengths);
  const std::vector<size_t> device_of = predict_split(order, lengths, devices.size());
  nlohmann::json split = nlohmann::json::array();
  for (const torch::Device& device : devices)
    split.push_back({{"device", device.str()}, {"inputs", nlohmann::json::array()}, {"frames", 0}});
  for (const size_t i : order) {
    nlohmann::json& share = split[device_of[i]];
    share["inputs"].push_back({{"input", items[i].input.string()}, {"frames", lengths[i].frames}});
    share["frames"] = share["frames"].get<int64_t>() + lengths[i].frames;
  }
  return split;
}

// The model, uninitialised (only its shapes and structure are used), without the weights in memory.
std::shared_ptr<core::VaeModel> describe_model(const PlanOptions& o) {
  if (!o.weights.empty()) {
    const core::ModelInfo info = core::recognise_model(core::load_checkpoint(o.weights));
    return core::find_model_family(info.family).build(info.config);
  }
  const core::ModelFamily& family =
      o.model.empty() ? core::default_model_family() : core::find_model_family(o.model);
  return family.build(family.released_config);
}

void plan(const PlanOptions& o) {
  std::vector<torch::Device> devices;
  if (!o.devices.empty()) {
    const int64_t count = visible_cuda_devices();
    devices = parse_devices(o.devices, count);
    check_device_agrees(o.device, devices, count);
  } else if (!o.inputs.empty()) {
    throw UsageError("plan: inputs are for showing how --devices would split a batch; give --devices too");
  }
  const auto [width, height] = parse_frame_size(o.size);
  const std::shared_ptr<core::VaeModel> model = describe_model(o);
  const core::ModelInfo& info = model->info();
  const int64_t params = model->parameter_count();
  const int64_t f = info.spatial_factor;
  const int64_t padded_w = (width + f - 1) / f * f, padded_h = (height + f - 1) / f * f;
  const torch::Device device =
      o.device == "cpu" ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  const torch::ScalarType dtype = resolve_dtype(o.dtype, device);
  const int64_t latent_frames = 1 + (o.frames - 1 + info.temporal_factor - 1) / info.temporal_factor;
  // The weights stay as described, uninitialised: converting them to `dtype` only to read the dtype back
  // took most of the command's time (a second for SeedVR2) and its memory (0.9 GB).
  const core::PlanTarget target{core::parse_op(o.op), padded_w, padded_h, latent_frames, 1, dtype};
  core::PlannerOptions planner =
      device.is_cuda() ? core::with_host_budget(o.memory.planner) : o.memory.planner;
  // What a file run's reader and writer hold in host memory beside the run, as `decode`/`encode` count it.
  planner.host_reserved_bytes +=
      io::pipeline_host_bytes(target.op, io::Geometry::of(info, width, height), {.chunk = planner.chunk});
  const core::Plan p = core::plan_for(*model, target, planner);
  // One input across the devices (Note [Bands across devices]): each device planned for its band (in columns
  // where it does not fit whole).
  std::optional<core::Plan> band_plan;
  std::string band_refusal, band_rows_text;
  if (devices.size() > 1) {
    try {
      const auto rows = core::band_rows(padded_h / f, static_cast<int64_t>(devices.size()));
      band_rows_text = std::to_string(rows.back().count * f) + "-" + std::to_string(rows.front().count * f);
      core::PlanTarget bands = target;
      bands.devices = static_cast<int64_t>(devices.size());
      band_plan = core::plan_for(*model, bands, o.memory.planner);
    } catch (const Error& e) {
      band_refusal = e.what();
    }
  }
  if (o.json) {
    nlohmann::json j = {
        {"model", info.family},
        {"parameters", params},
        {"size", o.size},
        {"padded_size", std::to_string(padded_w) + "x" + std::to_string(padded_h)},
        {"dtype", dtype_name(dtype)},
        {"preset", o.memory.chosen ? nlohmann::json(o.memory.chosen->name) : nlohmann::json()},
        {"tile_overlap", planner.tile_overlap},
        {"norm_context", planner.norm_context},
        {"tile_norms", core::tile_norms_name(planner.tile_norms)},
        {"plan", p.to_json()}};
    if (!devices.empty()) {
      j["devices"] = nlohmann::json::array();
      for (const torch::Device& d : devices) j["devices"].push_back(d.str());
      if (!o.inputs.empty()) j["split"] = split_json(o, devices);
      if (devices.size() > 1)
        j["bands"] = band_plan ? nlohmann::json{{"rows", band_rows_text}, {"plan", band_plan->to_json()}}
                               : nlohmann::json{{"refused", band_refusal}};
    }
    std::cout << core::json_text(j) << "\n";
    return;
  }
  const core::MemoryEstimate& e = p.estimate;
  std::cout << p.summary() << "\n"
            << "  weights " << core::format_size(e.weights) << ", caches " << core::format_size(e.cache)
            << (e.host_cache > 0 ? " (+ " + core::format_size(e.host_cache) + " in host memory)" : "")
            << ", activations " << core::format_size(e.activations) << ", in/out and windows "
            << core::format_size(e.io) << "\n"
            << "  host memory " << core::format_size(e.host)
            << (p.host_budget_bytes > 0
                    ? " of " + core::format_size(p.host_budget_bytes) + " (" + p.host_budget_note + ")"
                    : std::string())
            << "; estimated time " << std::fixed << std::setprecision(2) << p.seconds << " s for " << o.frames
            << " frames (H100 rates)\n"
            << "  coefficients: " << p.calibration << "\n";
  if (devices.empty()) return;
  std::cout << "devices: a batch runs on " << device_list(devices)
            << ", one input per device at a time, longest first, each under this plan on its own device\n";
  if (devices.size() > 1) {
    if (band_plan && band_plan->tile_devices > 1)  // Note [Exact tiles across devices]
      std::cout << "one input is split across them: bands of " << band_rows_text << " rows would not fit, so "
                << band_plan->summary() << "\n";
    else if (band_plan)
      std::cout << "one input is split across them in " << devices.size() << " bands of " << band_rows_text
                << " rows, each device: " << band_plan->summary() << "\n";
    else
      std::cout << "one input cannot be split across them: " << band_refusal << "\n";
  }
  if (o.inputs.empty()) return;
  for (const nlohmann::json& share : split_json(o, devices)) {
    std::string inputs;
    for (const nlohmann::json& input : share["inputs"])
      inputs += (inputs.empty() ? "" : ", ") +
                std::filesystem::path(input["input"].get<std::string>()).filename().string() + " (" +
                std::to_string(input["frames"].get<int64_t>()) + ")";
    std::cout << "  " << share["device"].get<std::string>() << ": " << share["frames"].get<int64_t>()
              << " frames: " << (inputs.empty() ? "nothing" : inputs) << "\n";
  }
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
  cmd->add_option("--frames", o->frames, "Frames of the clip (exact tiles plan their windows by it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, core::kMaxChunk * 4));
  cmd->add_option("--device", o->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "Fixed latent frames per chunk (default: the planner's)")
      ->check(CLI::Range(int64_t{1}, core::kMaxChunk));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_option(
      "--devices", o->devices,
      "GPUs a batch or one input would be split over (all, 0,1 or cuda:0,cuda:2): shows the split");
  cmd->add_option(
      "inputs", o->inputs,
      "with --devices: a batch's inputs (files or folders), to show which device would take each");
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
