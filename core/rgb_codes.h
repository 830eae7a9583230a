#pragma once

#include <torch/torch.h>

namespace vaecodec::core {

// RGB as the models see it ([-1, 1]) -> [0, 1] in float32, where it is.
inline torch::Tensor unit_rgb(const torch::Tensor& rgb) {
  return rgb.to(torch::kFloat).add(1.0).mul_(0.5);
}

// [0, 1] in float32 -> code values of `max` (255 for 8 bits) as `type`, clipped to the cube: what an RGB
// output writes (io/colour.cpp) and what a window held in 8 bits keeps (core/split/eight_bit_window.h), one
// function so that the two agree bit for bit.
inline torch::Tensor rgb_codes(const torch::Tensor& unit, double max, torch::ScalarType type) {
  return unit.clamp(0.0, 1.0).mul_(max).round_().to(type);
}

}  // namespace vaecodec::core
