#pragma once

#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/models/model_family.h"
#include "core/run_choices.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The model families vaecodec knows (Note [Model families]): the built-in ones (core/models/families.h), most
// specific first since detection takes the first match, then any registered at run time.
const std::deque<ModelFamily>& model_families();
// Adds a family after the built-in ones. Throws Error, naming the family and what is missing, for a record
// without a name, detection, description or build, without a calibration of both encode and decode, or whose
// name is taken. Not thread-safe against concurrent lookups: register before running.
void register_model_family(ModelFamily family);
const ModelFamily& find_model_family(const std::string& name);  // throws listing the known names
std::string model_family_names();                               // "wan2.2-vae, wan2.1-vae, ..."
// The family `bench --random` and `plan` assume when none is named.
const ModelFamily& default_model_family();

// Reads a weights file (read_checkpoint) and renames its tensors to the original layout of the family whose
// layout they are written in (normalize_layout); Checkpoint::layout says which.
Checkpoint load_checkpoint(const std::filesystem::path& path);
// Strips wrapper prefixes and renames the tensors from the first family layout that matches; returns the
// layout's name, "original" when none does.
std::string normalize_layout(StateDict& tensors);

// The family and config a checkpoint holds (without building the model), or throws naming what does not fit
// any known family.
ModelInfo recognise_model(const Checkpoint& checkpoint);

// Options for building a model from a checkpoint.
struct ModelOptions {
  std::string family;  // empty: recognised from the checkpoint's tensors
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat;
  // Config keys set over the ones read off the tensors, for what the shapes cannot tell (SeedVR2's
  // norm_num_groups); null: the detected config, with the file's own keys (Note [Config in the weights file]
  // in registry.cpp).
  nlohmann::json config = nullptr;
  // Activation layout (Note [Channels-last]); unset: channels-last on CUDA and for float32 on the CPU (Note
  // [Channels-last on the CPU] in registry.cpp), the plain layout for the CPU's other dtypes.
  std::optional<bool> channels_last;
  // How its runs compute (Note [Run choices] in core/run_choices.h).
  RunChoices choices;
};

// Recognises the family and config from the checkpoint's tensors (or takes options.family), builds the model,
// loads the weights, and places it on the device in the dtype (place_model).
std::shared_ptr<VaeModel> build_model(const Checkpoint& checkpoint, const ModelOptions& options = {});
// Builds a model of a family from its config with uninitialised weights (tests, benchmarks with random
// weights).
std::shared_ptr<VaeModel> build_model(const std::string& family, const nlohmann::json& config);
// Moves a built model to options.device and options.dtype and sets the device up for it (Device::prepare:
// TF32, cuDNN's heuristics and timing), in the activation layout, with options.choices;
// build_model(checkpoint,
// ...) ends with it. Choices the family or the device cannot run are refused (UsageError) before anything
// moves (choices_refusal).
void place_model(VaeModel& model, const ModelOptions& options);
// Why a model of `family` on options.device in options.dtype cannot run with options.choices, as the one line
// place_model throws; empty when it can.
std::string choices_refusal(const std::string& family, const ModelOptions& options);

}  // namespace vaecodec::core
