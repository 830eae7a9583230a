#pragma once

#include <filesystem>
#include <vector>

namespace vaecodec::io {

// Note [Atomic outputs]
// An output appears complete or not at all. It is written under a hidden temporary name in its own
// directory (same file system, so the final rename is atomic) and renamed when everything succeeded; any
// failure or interrupt unwinds through ~TempOutput, which removes the temporary file. The temporary file
// is created at once, so an unwritable directory fails before any frame is decoded.
class TempOutput {
 public:
  explicit TempOutput(const std::filesystem::path& final_path);
  ~TempOutput();
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;

  const std::filesystem::path& path() const { return temp_; }  // where to write
  const std::filesystem::path& final_path() const { return final_; }
  // Renames the temporary file to the final name (replacing an older file there).
  void commit();

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  bool committed_ = false;
};

// Throws vaecodec::Error when `output` names one of `inputs` (also through links or other spellings), is a
// directory, or has no file name.
void check_output_path(const std::filesystem::path& output, const std::vector<std::filesystem::path>& inputs);

}  // namespace vaecodec::io
