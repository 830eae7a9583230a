#pragma once

#include "core/models/model_family.h"

namespace vaecodec::core {

// Note [LTX-2 weight layouts]
// - "original" (no renaming): a VAE-only file (ComfyUI's split, tests/data/ltx2-tiny), encoder.*, decoder.*,
//   per_channel_statistics.mean-of-means / std-of-means.
// - "ltx2-checkpoint": the same names as the original single-file checkpoints carry them: the VAE under
//   `vae.` beside the diffusion model, the audio VAE and the vocoder in the full model file (only `vae.*` is
//   kept), and the statistics the VAE does not use (per_channel_statistics.channel, mean-of-stds,
//   mean-of-stds_over_std-of-means), which are dropped.
// - "ltx2-diffusers": diffusers' AutoencoderKLLTX2Video, whose blocks group the original's flat lists
//   (docs/ltx2-vae.md, "Checkpoint layouts"); recognised by `.conv.weight` leaves under mid_block (Wan's
//   diffusers convolutions have no inner `conv`) and its latents_mean / latents_std tensors.
WeightLayout ltx2_original_layout();
WeightLayout ltx2_diffusers_layout();

}  // namespace vaecodec::core
