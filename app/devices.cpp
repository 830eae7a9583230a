#include "app/devices.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include <torch/cuda.h>

#include "core/error.h"

namespace vaecodec::app {
namespace {

// A decimal index without sign or spaces; -1 for anything else.
int64_t parse_index(const std::string& text) {
  if (text.empty() || text.size() > 6 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); }))
    return -1;
  return std::stoll(text);
}

}  // namespace

std::string devices_here(int64_t cuda_count) {
  if (cuda_count <= 0) return "there is no CUDA device here (only the CPU)";
  std::vector<torch::Device> all;
  for (int64_t i = 0; i < cuda_count; ++i) all.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
  return std::string(cuda_count == 1 ? "the CUDA device here is " : "the CUDA devices here are ") +
         device_list(all);
}

int64_t visible_cuda_devices() {
  return torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
}

std::string device_list(const std::vector<torch::Device>& devices) {
  std::string text;
  for (const torch::Device& d : devices) text += (text.empty() ? "" : ", ") + d.str();
  return text;
}

std::vector<torch::Device> parse_devices(const std::string& text, int64_t cuda_count) {
  const std::string option = "--devices " + text + ": ";
  const std::string here = devices_here(cuda_count);
  if (cuda_count <= 0)
    throw UsageError(option + "there are no GPUs to spread the work over: " + here +
                     "; run on the CPU with --device cpu");
  std::vector<torch::Device> devices;
  if (text == "all") {
    for (int64_t i = 0; i < cuda_count; ++i)
      devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
    return devices;
  }
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string item =
        text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (item == "cpu")
      throw UsageError(option + "the CPU is not a device to spread over (--device cpu runs on it); " + here);
    int64_t index = parse_index(item);
    if (index < 0 && item.starts_with("cuda:")) index = parse_index(item.substr(5));
    if (index < 0)
      throw UsageError(option + "'" + item + "' is not a device (write all, 0,1 or cuda:0,cuda:2); " + here);
    if (index >= cuda_count)
      throw UsageError(option + "cuda:" + std::to_string(index) + " does not exist; " + here);
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    if (std::find(devices.begin(), devices.end(), device) != devices.end())
      throw UsageError(option + device.str() + " is named twice (one model and one worker per device); " +
                       here);
    devices.push_back(device);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return devices;
}

void check_device_agrees(const std::string& device, const std::vector<torch::Device>& devices,
                         int64_t cuda_count) {
  if (device == "auto" || device == "cuda") return;
  std::optional<torch::Device> named;
  try {
    named = torch::Device(device);
  } catch (const c10::Error&) {
  }
  const bool agrees = named && named->is_cuda() && named->has_index() &&
                      std::find(devices.begin(), devices.end(), *named) != devices.end();
  if (!agrees)
    throw UsageError("--device " + device + " and --devices " + device_list(devices) +
                     " disagree: give one of them; " + devices_here(cuda_count));
}

}  // namespace vaecodec::app
