#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/causal_cache.h"
#include "core/checkpoint.h"

namespace vaecodec::core {

// What the engine and the I/O need to know about a model, independent of its family.
struct ModelInfo {
  std::string family;     // "wan2.1-vae", "wan2.2-vae", "seedvr2-vae"
  nlohmann::json config;  // the family's own config (dim, z_dim, ...), as in the golden meta.json
  int64_t latent_channels = 16;
  int64_t spatial_factor = 8;   // pixels per latent pixel; input sizes must be multiples of it
  int64_t temporal_factor = 4;  // T = 1 + factor * k frames <-> 1 + k latent frames
  // Latents exchanged with the family's diffusion model are raw * scale (SeedVR2: 0.9152); Wan latents are
  // normalized inside the model and this is 1.
  double latent_scale = 1.0;
  // encode() returns (raw - mean) / std per channel (Wan); empty when it returns the raw latent (SeedVR2).
  std::vector<float> latent_mean, latent_std;
};

// A causal video VAE. encode() and decode() take one chunk of a sequence and continue the run whose history
// is in `cache`; a fresh cache starts a new sequence at frame 0.
//   encode: x [B, 3, t, H, W] in [-1, 1] -> latent [B, z, t', H/f, W/f]; the first chunk has 1 + 4k frames,
//           later ones multiples of 4 (t' = 1 + k, then t/4).
//   decode: latent [B, z, n, h, w] -> video [B, 3, t, h*f, w*f], unclamped; the first chunk gives 1 + 4(n-1)
//           frames, later ones 4n.
// The result does not depend on the chunking.
class VaeModel : public torch::nn::Module {
 public:
  virtual const ModelInfo& info() const = 0;
  virtual torch::Tensor encode(const torch::Tensor& x, CausalCache& cache) = 0;
  virtual torch::Tensor decode(const torch::Tensor& z, CausalCache& cache) = 0;

  int64_t parameter_count() const;
  torch::ScalarType dtype() const;
  torch::Device device() const;

  // Copies a checkpoint's tensors into the parameters (converting dtype). The state dict must hold exactly
  // the model's tensors with their shapes: the first missing, unexpected or misshapen one is an error that
  // names it and the file.
  void load(const Checkpoint& checkpoint);
  // Names and shapes the model expects, in registration order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors() const;

  // Note [Channels-last]
  // On the GPU, cuDNN's fastest convolutions read and write channels-last tensors (NDHWC in memory). With
  // this on, the convolution weights are stored channels-last and the runs hand the model channels-last
  // activations; every layer keeps that layout, so no convolution pays for a transpose. The function computed
  // is the same either way.
  void set_channels_last(bool on);
  bool channels_last() const { return channels_last_; }
  torch::MemoryFormat memory_format() const {
    return channels_last_ ? torch::MemoryFormat::ChannelsLast3d : torch::MemoryFormat::Contiguous;
  }

 private:
  bool channels_last_ = false;
};

// Options for building a model from a checkpoint.
struct ModelOptions {
  std::string family;  // empty: recognised from the checkpoint's tensors
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat;
  // Config keys set over the ones read off the tensors, for what the shapes cannot tell (SeedVR2's
  // norm_num_groups); null: the detected config, with the file's own keys (Note [Config in the weights file]
  // in vae_model.cpp).
  nlohmann::json config = nullptr;
  // Activation layout (Note [Channels-last]); unset: channels-last on CUDA, the plain layout elsewhere.
  std::optional<bool> channels_last;
};

// Fills the parameters with deterministic random values of a sensible scale (unit-variance activations): for
// benchmarks and tests of models whose released weights are not at hand.
void randomize_parameters(VaeModel& model, uint64_t seed = 0);

// Recognises the family and config from the checkpoint's tensors (or takes options.family), builds the model,
// loads the weights, and moves it to the device and dtype.
std::shared_ptr<VaeModel> build_model(const Checkpoint& checkpoint, const ModelOptions& options = {});
// Builds a model of a family from its config with uninitialised weights (tests, benchmarks with random
// weights).
std::shared_ptr<VaeModel> build_model(const std::string& family, const nlohmann::json& config);
// Moves a built model to options.device and options.dtype and sets it up for runs there (layout, no TF32 in
// float32, cuDNN autotuning, and mode-B heuristics unless TORCH_CUDNN_USE_HEURISTIC_MODE_B is set: LibTorch
// reads that once, at its first convolution, so place the model before running any); build_model(checkpoint,
// ...) ends with it.
void place_model(VaeModel& model, const ModelOptions& options);

// Lets cuDNN time its algorithms for each new convolution shape, or not (Note [Autotuning] in io/pipeline.h:
// the file pipeline's --autotune). VAECODEC_AUTOTUNE_CANDIDATES=N sets how many candidates it times per shape
// (LibTorch's default 10; 0: all), a knob for measuring the start-up; anything but a count is refused.
void set_cudnn_autotune(bool on);
// The family and config a checkpoint holds, or throws naming what does not fit any known family.
ModelInfo recognise_model(const Checkpoint& checkpoint);

}  // namespace vaecodec::core
