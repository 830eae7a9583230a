#include "core/models/seedvr2/seedvr2_layouts.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/state_dict_keys.h"

namespace vaecodec::core {
namespace {

// `...attentions.N.query.weight` -> `...attentions.N.to_q.weight`, and so on; nullopt when nothing is
// renamed.
std::optional<std::string> modern_attention_name(const std::string& name) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {
      {"query", "to_q"}, {"key", "to_k"}, {"value", "to_v"}, {"proj_attn", "to_out.0"}};
  auto parts = split_key(name);
  for (size_t i = 0; i + 2 < parts.size(); ++i) {
    if (parts[i] != "attentions" || !key_index(parts[i + 1])) {
      continue;
    }
    for (const auto& [old_name, new_name] : kRenames) {
      if (parts[i + 2] == old_name) {
        parts[i + 2] = new_name;
        return join_key(parts);
      }
    }
  }
  return std::nullopt;
}

}  // namespace

WeightLayout seedvr2_legacy_attention_layout() {
  return {"seedvr2-legacy-attention",
          [](const StateDict& tensors) {
            for (const auto& item : tensors)
              if (modern_attention_name(item.first)) return true;
            return false;
          },
          [](StateDict& tensors) {
            rename_keys(tensors,
                        [](const std::string& name) { return modern_attention_name(name).value_or(name); });
          }};
}

}  // namespace vaecodec::core
