#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

namespace vaecodec::core {

// Note [Regular inputs]
// Inputs (videos, weights, latents) must be regular files. A FIFO's open() waits for a writer, forever if
// none comes, and a device may never end; neither is refused by a check made after opening. Files vaecodec
// reads itself are opened with O_NONBLOCK (so the open returns at once for any file type), checked with
// fstat, and switched back to blocking reads; files a library opens by name (FFmpeg's demuxers, LibTorch's
// zip reader) are checked with stat first.

// Opens `path` read-only without blocking, fstat's it into `st` and, for a regular file, clears O_NONBLOCK.
// Returns the descriptor (the caller checks the type in `st` and closes it), or -1 with errno set.
int open_for_reading(const std::filesystem::path& path, struct stat& st);

// What a file type is called in messages: "a directory", "a FIFO", "a character device", ...
std::string file_type_name(mode_t mode);

// Throws vaecodec::Error "`path`: cannot open `what` (reason)" when `path` cannot be stat'ed, or
// "`path`: `what` is <its type>, not a regular file" when it is something else.
void check_regular_file(const std::filesystem::path& path, const std::string& what);

}  // namespace vaecodec::core
