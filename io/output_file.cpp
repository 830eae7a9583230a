#include "io/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.h"

namespace vaecodec::io {
namespace fs = std::filesystem;

namespace {
std::atomic<int> g_counter{0};
}

TempOutput::TempOutput(const fs::path& final_path) : final_(final_path) {
  const fs::path dir = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
  // The extension stays last: libavformat and the latent writer look at it.
  const std::string name = "." + final_.stem().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(g_counter++) + final_.extension().string();
  temp_ = dir / name;
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot write output " + final_.string() + ": " + std::strerror(errno) + " (in " +
                dir.string() + ")");
  ::close(fd);
}

TempOutput::~TempOutput() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove(temp_, ignored);
}

void TempOutput::commit() {
  std::error_code error;
  fs::rename(temp_, final_, error);
  if (error)
    throw Error("cannot rename " + temp_.string() + " to " + final_.string() + ": " + error.message());
  committed_ = true;
}

void check_output_path(const fs::path& output, const std::vector<fs::path>& inputs) {
  if (output.empty() || !output.has_filename())
    throw Error("output path '" + output.string() + "' names no file");
  std::error_code error;
  if (fs::is_directory(output, error))
    throw Error("output " + output.string() + " is a directory; give a file name");
  for (const fs::path& input : inputs) {
    std::error_code out_error, in_error, same_error;
    const fs::path out_canonical = fs::weakly_canonical(output, out_error);
    const fs::path in_canonical = fs::weakly_canonical(input, in_error);
    const bool same_name = !out_error && !in_error && out_canonical == in_canonical;
    const bool same_file = fs::exists(output, error) && fs::equivalent(output, input, same_error);
    if (same_name || (same_file && !same_error))
      throw Error("output " + output.string() + " is the input file " + input.string() +
                  "; write to another file");
  }
}

}  // namespace vaecodec::io
