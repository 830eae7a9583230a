#pragma once

#include <filesystem>
#include <vector>

#include "io/musubi_dataset.h"

namespace vaecodec::app {

// Reads musubi-tuner's dataset config (TOML: [general] and [[datasets]], Note [musubi-tuner's dataset
// rules] in io/musubi_dataset.h) into one entry per dataset, [general]'s values and the trainer's defaults
// filled in. Paths are taken as written (relative ones from the working directory, as the trainer does).
// - A key the trainer does not know is reported by name once (a warning) and ignored.
// - Keys that do not change the latent caches (batch_size, num_repeats, fp_latent_window_size, the
//   fp_1f_* keys of one-frame training) are read and have no effect.
// - A dataset asking for what vaecodec cannot make (an architecture other than "wan"; multiple_target,
//   no_resize_control or control_resolution) gets one line saying so and is left out; the others go on.
// Throws UsageError for a config that cannot be used: a file that does not parse (with the line), a value
// of the wrong type, a dataset without inputs or without a cache_directory, two datasets sharing one.
std::vector<io::MusubiDataset> read_dataset_config(const std::filesystem::path& file);

}  // namespace vaecodec::app
