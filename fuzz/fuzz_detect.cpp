// Config detection from tensor shapes: the input is a JSON object {tensor name: shape} (the layout of
// tests/data/*-released-keys.json); the tensors are made on the meta device (no memory), renamed to the
// original layout as the loader does, and recognised through the registry: every family's detect, then the
// found family's description of that config. Any failure other than a vaecodec::Error is a finding.

#include <string_view>

#include "core/error.h"
#include "core/models/registry.h"
#include "core/untrusted_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json shapes;
  try {
    shapes =
        vaecodec::core::parse_untrusted_json(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const vaecodec::Error&) {
    return 0;
  }
  if (!shapes.is_object()) return 0;
  vaecodec::core::Checkpoint checkpoint;
  checkpoint.path = "fuzz.safetensors";
  for (const auto& [name, shape] : shapes.items()) {
    if (!shape.is_array() || shape.size() > 8) return 0;
    std::vector<int64_t> sizes;
    for (const auto& size : shape) {
      if (!size.is_number_integer() || size.get<int64_t>() < 0) return 0;
      sizes.push_back(size.get<int64_t>());
    }
    try {
      checkpoint.tensors.emplace(name, torch::empty(sizes, torch::TensorOptions().device(torch::kMeta)));
    } catch (const c10::Error&) {
      return 0;  // sizes whose product overflows: no file can hold such a tensor
    }
  }
  try {
    checkpoint.layout = vaecodec::core::normalize_layout(checkpoint.tensors);
    const auto info = vaecodec::core::recognise_model(checkpoint);
    if (info.family.empty()) std::abort();
  } catch (const vaecodec::Error&) {
  }
  for (const auto& family : vaecodec::core::model_families()) {
    try {
      if (const auto config = family.detect(checkpoint.tensors)) {
        if (!config->is_object()) std::abort();
      }
    } catch (const vaecodec::Error&) {
    }
  }
  return 0;
}
