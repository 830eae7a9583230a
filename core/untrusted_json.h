#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace vaecodec::core {

// Note [Untrusted JSON]
// JSON read from files users download (safetensors headers, latent records, config in weights, preset files)
// is parsed with two limits nlohmann's parser lacks: nesting of at most kMaxJsonDepth arrays and objects
// (parsing is iterative, but copying, comparing and printing a value recurse, so 200 000 nested brackets
// would overflow the stack later), and no key twice in one object (the parser would keep the last one
// silently, so two tools could read two different files out of one).
constexpr int kMaxJsonDepth = 64;

// Parses `text` under those limits. Throws vaecodec::Error with the reason alone ("not valid JSON (parse
// error at byte 12)", "JSON nested deeper than 64 levels", "JSON key 'a' appears twice in one object");
// callers say which file and which part of it.
nlohmann::json parse_untrusted_json(std::string_view text);

// A JSON value printed for an error message: on one line and at most `max_chars` long.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace vaecodec::core
