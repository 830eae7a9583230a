#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <ftw.h>
#include <unistd.h>

#include <cstdio>

#include <torch/torch.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/models/registry.h"
#include "core/safetensors.h"

namespace vaecodec::test {

inline std::filesystem::path data_dir() {
  return VAECODEC_TEST_DATA;
}

// ||out - ref|| / ||ref||, in float64.
inline double relative_error(const torch::Tensor& out, const torch::Tensor& ref) {
  auto o = out.to(torch::kCPU, torch::kDouble);
  auto r = ref.to(torch::kCPU, torch::kDouble);
  return (o - r).norm().item<double>() / r.norm().item<double>();
}

// A clip whose halves differ (a bright smooth left, a dark textured right), moving: a tile sees other
// statistics than the frame, as in natural video, which a stationary pattern would hide. rows x cols latent
// pixels of 8 x 8, float32 in [-1, 1], [1, 3, frames, rows * 8, cols * 8].
inline torch::Tensor halves_video(int64_t rows, int64_t cols, int64_t frames) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t h = rows * 8, w = cols * 8;
  auto t = torch::arange(frames, opts).view({1, 1, frames, 1, 1});
  auto y = torch::linspace(0, 1, h, opts).view({1, 1, 1, h, 1});
  auto x = torch::linspace(0, 1, w, opts).view({1, 1, 1, 1, w});
  auto phase = torch::tensor({0.0, 2.0, 4.0}, opts).view({1, 3, 1, 1, 1});
  auto smooth = torch::sin(3.0 * x + 0.2 * t + phase) * torch::cos(2.0 * y) * 0.3 + 0.4;
  auto texture = torch::sin(40.0 * x + 0.5 * t + phase) * torch::cos(30.0 * y - 0.3 * t) * 0.6 - 0.3;
  auto right = torch::sigmoid((x - 0.55) * 30.0);
  return (smooth * (1 - right) + texture * right).clamp(-1, 1).to(torch::kFloat).contiguous();
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::map<std::string, torch::Tensor> read_tensors(const std::filesystem::path& path) {
  core::SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : file.entries()) out[name] = file.load(name);
  return out;
}

// The released model of `family` (its released config), after checking that it expects exactly the tensors
// listed in data/`manifest` (name -> shape), `count` of them.
inline std::shared_ptr<core::VaeModel> released_model_matching(const std::string& family,
                                                               const std::string& manifest, size_t count) {
  const auto keys = read_json(data_dir() / manifest);
  auto model = core::build_model(family, core::find_model_family(family).released_config);
  const auto expected = model->expected_tensors();
  REQUIRE(keys.size() == count);
  REQUIRE(expected.size() == count);
  for (const auto& [name, shape] : expected) {
    INFO(name);
    REQUIRE(keys.contains(name));
    CHECK(keys.at(name).get<std::vector<int64_t>>() == shape);
  }
  return model;
}

// Note [std::filesystem and libtorch]
// The PyPI libtorch.so exports its own build of some std::filesystem operations (remove_all,
// create_directory, is_empty, ...); when it precedes libstdc++ in the link, calls bind to those and
// remove_all crashes. Test helpers that make and remove files stick to POSIX calls and directory_iterator,
// which stay in libstdc++ (Note [libstdc++ before libtorch] in CMakeLists.txt).

// A fresh directory under the system's temporary directory ($TMPDIR), removed with everything in it at the
// end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vaecodec-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error(std::string("cannot create a temporary directory: ") + std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    nftw(
        path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  size_t file_count() const {
    return static_cast<size_t>(
        std::distance(std::filesystem::directory_iterator(path_), std::filesystem::directory_iterator()));
  }

 private:
  std::filesystem::path path_;
};

}  // namespace vaecodec::test
