#pragma once

#include <filesystem>

#include "core/checkpoint.h"

namespace vaecodec::core {

// Note [diffusers model folders]
// diffusers saves a model as a folder: `config.json` (the constructor's arguments) beside
// `diffusion_pytorch_model.safetensors`, or beside shards
// `diffusion_pytorch_model-0000K-of-0000N.safetensors` and the index
// `diffusion_pytorch_model.safetensors.index.json`, whose "weight_map" names each tensor's shard. A
// pipeline's folder holds its VAE in `vae/`. `--weights` may name either folder: the tensors of all shards
// make one checkpoint, under the names the shards give them (the families' layouts rename them), and
// config.json comes along (Checkpoint::config) for the latent statistics it may hold
// (Note [Latent statistics in the config] in core/vae_model.h).
//
// A folder holding no VAE (neither config.json with weights nor a vae/ folder with them) is the user's
// mistake and a UsageError; a VAE folder that is damaged (an index naming a shard that is not there or a
// tensor its shard lacks, a config that is not a JSON object) is an Error, as a damaged weights file is.

// Whether `path` is a folder (read_checkpoint then reads it as a diffusers model folder).
bool is_model_folder(const std::filesystem::path& path);

// Reads a diffusers model or pipeline folder into one checkpoint: path is the VAE's folder, format
// "diffusers", tensors from all shards, config the parsed config.json.
Checkpoint read_diffusers_folder(const std::filesystem::path& folder);

// A weights file (read_checkpoint_file, core/checkpoint.h) or a diffusers model or pipeline folder.
Checkpoint read_checkpoint(const std::filesystem::path& path);

}  // namespace vaecodec::core
