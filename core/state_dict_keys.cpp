#include "core/state_dict_keys.h"

#include "core/error.h"

namespace vaecodec::core {

std::vector<std::string> split_key(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const auto dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string join_key(const std::vector<std::string>& parts, size_t from) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) out += (i > from ? "." : "") + parts[i];
  return out;
}

std::optional<int> key_index(const std::string& part) {
  if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(part);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void rename_keys(StateDict& tensors, const std::function<std::string(const std::string&)>& rename) {
  StateDict renamed;
  for (auto& [name, tensor] : tensors) {
    auto new_name = rename(name);
    if (renamed.count(new_name) != 0)
      throw Error("two tensors map to the same name " + new_name + " (the second is " + name + ")");
    renamed.emplace(std::move(new_name), std::move(tensor));
  }
  tensors = std::move(renamed);
}

void strip_wrapper_prefixes(StateDict& tensors) {
  static constexpr std::string_view kPrefixes[] = {"first_stage_model.", "vae.", "model.", "module."};
  for (bool stripped = true; stripped && !tensors.empty();) {
    stripped = false;
    for (const auto prefix : kPrefixes) {
      bool all = true;
      for (const auto& item : tensors)
        all = all && starts_with(item.first, prefix) && item.first.size() > prefix.size();
      if (all) {
        rename_keys(tensors, [&](const std::string& name) { return name.substr(prefix.size()); });
        stripped = true;
        break;
      }
    }
  }
}

}  // namespace vaecodec::core
