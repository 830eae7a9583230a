#pragma once

#include "core/models/model_family.h"

namespace vaecodec::core {

// SeedVR2 checkpoints written before diffusers renamed the attention projections: `attentions.N.query`,
// `key`, `value`, `proj_attn` for `to_q`, `to_k`, `to_v`, `to_out.0`.
WeightLayout seedvr2_legacy_attention_layout();

}  // namespace vaecodec::core
