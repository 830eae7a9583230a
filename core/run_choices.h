#pragma once

#include <optional>
#include <string>

namespace vaecodec::core {

// Which convolution kernels a run takes on a GPU that has both (Note [Own convolutions] in
// core/kernels/conv3d.h).
enum class ConvBackend {
  kAuto,   // the measured choice per shape
  kCudnn,  // cuDNN everywhere
  kOwn,    // the own kernel wherever a tile takes the shape
};
// "auto", "cudnn", "own"; std::nullopt for anything else.
std::optional<ConvBackend> parse_conv_backend(const std::string& name);

// Note [Run choices]
// How a model's runs compute, beyond its dtype and layout: the convolution backend, the fp8 convolutions
// (Note [FP8 convolutions] in core/kernels/conv3d.cpp) and cuDNN's algorithm timing (Note [Autotuning]). They
// belong to the model: set where it is placed (ModelOptions::choices, place_model, which refuses what the
// family or the device cannot do) and changed only through the model (set_choices), so two models of one
// process may run with different choices. The kernels read them from the calling thread: VaeModel::encode and
// decode put the model's choices in force for the call (ChoicesScope), on whatever thread runs it (the
// engine's, a band's). A kernel called outside any model call (tests, the micro-benchmark) sees the defaults,
// or the choices of a scope its caller opens. cuDNN's timing is a LibTorch switch of the whole process: a
// model call that chose it sets it on entry, so models that differ in it must not run at once.
struct RunChoices {
  ConvBackend conv = ConvBackend::kAuto;
  bool fp8 = false;  // e4m3 convolutions after each norm; bf16 models on Hopper only
  // cuDNN times its algorithms per shape (on) or takes its heuristics' first (off); unset: left as it is.
  std::optional<bool> autotune;
};

// The choices in force on this thread: the innermost ChoicesScope's, else the defaults.
const RunChoices& current_choices();

// Note [Autotuning]
// cuDNN can time its algorithms for every new convolution shape and keep the fastest. It costs about 2 s at
// the start of a run (7.7-8.3 s for an 81-frame 720p round trip against 5.5-5.7 s, whatever the number of
// candidates timed per shape). Without it LibTorch takes the first kernel cuDNN's heuristics offer; in mode B
// (Note [Heuristics] in core/device/device.cpp) those were as fast as timing's for Wan2.1 on an H100 (bench
// round trip 720p 2.90 s untimed, 2.91 s timed) and 3-13% slower for SeedVR2 and Wan2.2 (decode 3.99 / 2.47 s
// against 3.81 / 2.35 s, Wan2.2 encode 0.85 against 0.75 s): timing pays only on long clips of those models,
// so it is off unless asked for (docs/benchmarks.md, "Start-up").

// Puts `choices` in force on the calling thread until destroyed.
class ChoicesScope {
 public:
  explicit ChoicesScope(const RunChoices& choices);
  ~ChoicesScope();
  ChoicesScope(const ChoicesScope&) = delete;
  ChoicesScope& operator=(const ChoicesScope&) = delete;

 private:
  RunChoices choices_;
  const RunChoices* previous_;
};

}  // namespace vaecodec::core
