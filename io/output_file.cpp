#include "io/output_file.h"

#include <sys/stat.h>

#include "core/error.h"

namespace vaecodec::io {
namespace fs = std::filesystem;

void check_output_path(const fs::path& output, const std::vector<fs::path>& inputs, const std::string& what) {
  if (output.empty() || !output.has_filename())
    throw UsageError("output path '" + output.string() + "' names no file");
  // stat follows links, so a symbolic link to an input, a hard link to it and the same name spelt another
  // way all come out as the same device and inode. An output that does not exist yet is no input.
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0) return;
  if (S_ISDIR(out.st_mode))
    throw UsageError("output " + output.string() + " is a directory; give a file name");
  for (const fs::path& input : inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw UsageError("output " + output.string() + " is the " + what + " " + input.string() +
                       "; write to another file");
  }
}

}  // namespace vaecodec::io
