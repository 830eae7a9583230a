#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/planner.h"
#include "core/run_choices.h"
#include "core/session.h"
#include "core/vae_model.h"

namespace vaecodec::python {

// How a model is loaded and run, as vaecodec.load() takes it (the CLI's --device, --dtype, --vram, --preset,
// --conv, --autotune, --chunk, --tile, --tile-overlap, --norm-context and --tile-norms). Strings as the CLI
// spells them.
struct LoadOptions {
  std::string device = "auto";  // "auto" (cuda when available), "cpu", "cuda", "cuda:N"
  std::string dtype = "auto";   // "auto" (bf16 on CUDA, fp32 on the CPU), "fp32", "bf16", "fp16", "fp8"
  std::string vram;             // a size ("8G") or bytes; empty: the preset's, else the free memory
  std::string preset;           // a built-in tier; empty: none
  std::string conv = "auto";    // "auto", "cudnn", "own" (Note [Own convolutions])
  bool autotune = false;        // cuDNN times its algorithms (Note [Autotuning] in core/run_choices.h)
  int64_t chunk = 0;            // fixed latent frames per model call; 0: the planner's
  std::string family;           // overrides detection; empty: detected from the tensors
  std::string tile;             // fixed tiles in latent pixels, "64" or "80x48"; empty: the planner's
  std::optional<int64_t> tile_overlap;  // latent pixels tiles share; none: the preset's, else 8
  std::optional<int64_t>
      norm_context;        // SeedVR2: latent pixels tiles' norms see around them; none: planner's
  std::string tile_norms;  // SeedVR2: "auto", "crop" or "frame"; empty: auto
};

// Note [Process-wide switches]
// A model's run choices (convolution backend, fp8, cuDNN's timing: Note [Run choices] in core/run_choices.h)
// are its own, but two of the switches they and the device set are LibTorch's, for the whole process:
// cuDNN's timing (a model call sets it from its choices) and TF32 (Device::prepare turns it off for float32
// models). The CLI owns its process; a Python process also runs the caller's own models. So loading and
// running a Model puts the caller's settings of those two back afterwards (SwitchGuard). Two models that
// differ in them and run at the same moment from two threads still see each other's.
class SwitchGuard {
 public:
  SwitchGuard();  // remembers the current switches
  ~SwitchGuard();
  SwitchGuard(const SwitchGuard&) = delete;
  SwitchGuard& operator=(const SwitchGuard&) = delete;

 private:
  bool benchmark_, tf32_cudnn_, tf32_cublas_;
};

// A loaded model and how it runs. Thread-safe: one run at a time per model; sessions' model calls take
// turns with it.
class Model {
 public:
  // From a weights file or folder (anything the CLI's --weights takes).
  static std::unique_ptr<Model> from_path(const std::string& path, const LoadOptions& options);
  // From tensors under a checkpoint's names (e.g. a diffusers model's state_dict) and, optionally, the JSON
  // of a diffusers config (its latent statistics apply).
  static std::unique_ptr<Model> from_tensors(std::map<std::string, torch::Tensor> tensors,
                                             const std::string& config_json, const LoadOptions& options);

  // Runs a whole clip (Note [Runs on whole tensors] in core/tensor_run.h); `input` already checked for its
  // dtype and device by the binding. The caller's current stream on the model's device is used.
  torch::Tensor encode(const torch::Tensor& video);
  torch::Tensor decode(const torch::Tensor& latents);
  // A streaming session of this model (Note [Streaming sessions] in core/session.h): `op` kEncode or kDecode,
  // at most `chunk` latent frames per model call (0: the load options' chunk, else a whole block). Its model
  // calls take turns with this model's other sessions and runs on the host.
  std::unique_ptr<class Stream> stream(core::Op op, int64_t chunk);
  // Runs `work` with the switches a call of this model wants (Note [Process-wide switches]): float32 on CUDA
  // without TF32; the caller's switches come back afterwards.
  template <typename Work>
  auto with_switches(Work&& work) const -> decltype(work()) {
    SwitchGuard guard;
    if (model_->device().is_cuda() && model_->dtype() == torch::kFloat) no_tf32();
    return work();
  }
  // The plan for an input of `shape` under `op` ("encode" or "decode"), as JSON.
  std::string plan(const std::vector<int64_t>& shape, const std::string& op);

  const core::ModelInfo& info() const { return model_->info(); }
  torch::Device device() const { return model_->device(); }
  torch::ScalarType dtype() const { return model_->dtype(); }
  bool fp8() const { return model_->choices().fp8; }
  int64_t budget_bytes() const { return planner_.budget_bytes; }

 private:
  Model() = default;
  static std::unique_ptr<Model> build(core::Checkpoint checkpoint, const LoadOptions& options);
  torch::Tensor run(core::Op op, const torch::Tensor& input);
  static void no_tf32();

  std::shared_ptr<core::VaeModel> model_;
  core::PlannerOptions planner_;
  int64_t chunk_ = 0;  // LoadOptions::chunk
  // One model call at a time on the host: a whole run holds it throughout, a session's push per model call.
  std::shared_ptr<std::mutex> calls_ = std::make_shared<std::mutex>();
};

// A streaming session of a Model (Note [Streaming sessions] in core/session.h) whose pushes run under the
// model's switches. The model must outlive it (the binding keeps it alive).
class Stream {
 public:
  Stream(Model& model, std::unique_ptr<core::Session> session)
      : model_(model), session_(std::move(session)) {}
  torch::Tensor push(const torch::Tensor& block);
  torch::Tensor finish();
  std::unique_ptr<Stream> clone() const { return std::make_unique<Stream>(model_, session_->clone()); }
  core::Session& session() { return *session_; }
  const Model& model() const { return model_; }

 private:
  Model& model_;
  std::unique_ptr<core::Session> session_;
};

}  // namespace vaecodec::python
