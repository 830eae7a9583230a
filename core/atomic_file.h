#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace vaecodec::core {

// Note [Atomic outputs]
// An output appears complete or not at all. It is written under a hidden temporary name in its own
// directory (same file system, so the final rename is atomic) and renamed when everything succeeded; any
// failure or interrupt unwinds through ~AtomicFile, which removes the temporary file. The temporary file
// is created at once, so an unwritable directory fails before any work is done. Every writer of a file the
// user named goes through AtomicFile: videos (io/pipeline.cpp), latents and safetensors, metrics.
//
// Unwinding does not happen when a signal ends the process (a second Ctrl-C, a hang-up, SIGQUIT), so every
// temporary file is also entered in a process-wide table while it exists, and the signal handler removes
// what the table lists (remove_temporary_files) before the process dies (Note [Interrupts] in
// io/interrupt.h). The table is fixed-size static memory read without locks, as a handler must.
//
// The temporary name is ".<stem>.tmp-<pid>-<n><ext>": the extension stays last (libavformat and the latent
// writer look at it), and the stem is shortened so that the name fits NAME_MAX even when the final name
// itself is up to NAME_MAX bytes long.

// A path entered in the table of temporary files for as long as this object lives; the destructor removes
// the file unless it was released.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::filesystem::path path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The file is no longer temporary (it was renamed into place): neither listed nor removed any more.
  void release();

 private:
  std::filesystem::path path_;
  int slot_ = -1;  // its entry in the table; -1: none (the table was full or the path too long)
  bool released_ = false;
};

// The temporary file beside `final_path` that becomes it on commit() (Note [Atomic outputs]).
class AtomicFile {
 public:
  // Creates the temporary file (empty); throws vaecodec::Error naming the final path when it cannot.
  explicit AtomicFile(const std::filesystem::path& final_path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& path() const { return temp_->path(); }  // where to write
  const std::filesystem::path& final_path() const { return final_; }
  // Renames the temporary file to the final name, replacing an older file there.
  void commit();

 private:
  std::filesystem::path final_;
  std::optional<TemporaryFile> temp_;
};

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// The temporary name for a file named `final_name` (a file name, no directory): ".<stem>.tmp-<tag><ext>"
// within NAME_MAX bytes, the stem cut short (at a UTF-8 character boundary) where needed.
std::string temporary_name(const std::string& final_name, const std::string& tag);

// Removes every file in the table. Async-signal-safe: for signal handlers, which call it just before the
// process ends.
void remove_temporary_files() noexcept;

// How many files the table lists now (for tests).
int temporary_file_count();

}  // namespace vaecodec::core
