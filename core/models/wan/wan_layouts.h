#pragma once

#include "core/models/model_family.h"

namespace vaecodec::core {

// diffusers' AutoencoderKLWan names, for Wan2.1 and Wan2.2 (Note [Wan weight layouts]).
WeightLayout wan_diffusers_layout();

}  // namespace vaecodec::core
