#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vaecodec::core {

// The JSON text of `value`. File names on Linux are bytes, not necessarily UTF-8; nlohmann::json throws on a
// string that is not valid UTF-8, so every dump of text that may hold one goes through here, which puts
// U+FFFD in place of each invalid byte sequence instead.
inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vaecodec::core
