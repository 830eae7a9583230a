#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace vaecodec::io {

// Outputs are written through core::AtomicFile (Note [Atomic outputs] in core/atomic_file.h).

// Throws vaecodec::UsageError when `output` is one of `inputs` (by name, or as the same file through a
// symbolic or hard link), is a directory, or has no file name. `what` names the inputs in the message ("input
// file", "weights file"): an output written over its own input, or over the weights, would destroy it.
void check_output_path(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs,
                       const std::string& what = "input file");

}  // namespace vaecodec::io
