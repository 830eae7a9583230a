#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <ftw.h>
#include <unistd.h>

#include <cstdio>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
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

// A scratch directory removed at the end of the scope.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("vaecodec-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  // POSIX removal, not std::filesystem::remove_all (Note [libstdc++ before libtorch] in CMakeLists.txt).
  ~TempDir() {
    nftw(
        path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

}  // namespace vaecodec::test
