#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace vaecodec::core {

// What the engine set up and ran, for --verbose (Note [What the engine applied] in core/kernel_log.h).

class VaeModel;

// A dtype as the command line and the JSON name it: "fp32", "bf16", "fp16", "fp64", "fp8"; LibTorch's name
// for any other.
std::string dtype_name(torch::ScalarType dtype);
// The set-up lines of Note [What the engine applied] for `model` (on its device, with its run choices):
// "device: ...", "model: ...", "convolutions: ...", "attention: ...", "allocator: ...".
std::vector<std::string> engine_setup_lines(const VaeModel& model);
// Whether this build holds the own Hopper convolution kernels (Note [Own convolutions] in
// core/kernels/conv3d.h), and whether a GPU of compute capability major.minor runs them.
bool own_conv_kernels_built();
bool own_conv_kernels_run_on(int major, int minor);
// The kernels counted since the last reset, as lines "kernel: path N calls, path M calls".
std::vector<std::string> kernel_lines();

}  // namespace vaecodec::core
