#include "core/untrusted_json.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace vaecodec::core {

namespace {

// A key as shown in a message: printable and short, whatever the file holds.
std::string shown_key(const std::string& key) {
  constexpr size_t kMaxShown = 60;
  std::string out;
  for (size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  return "'" + out + (key.size() > kMaxShown ? "...'" : "'");
}

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text) {
  // One set of keys per object being read, innermost last.
  std::vector<std::unordered_set<std::string>> keys;
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= kMaxJsonDepth) {
        throw Error("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
      if (event == Event::object_start) keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key && !keys.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second) {
        throw Error("JSON key " + shown_key(key) + " appears twice in one object");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("not valid JSON (parse error at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::out_of_range&) {
    // A number beyond double's range (1e999): the parser throws out_of_range, not parse_error.
    throw Error("not valid JSON (a number out of range)");
  }
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace vaecodec::core
