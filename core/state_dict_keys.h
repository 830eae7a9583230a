#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"

namespace vaecodec::core {

// Helpers for renaming tensors between weight-name layouts (WeightLayout in core/models/model_family.h).

// "encoder.downsamples.3.weight" -> {"encoder", "downsamples", "3", "weight"}, and back.
std::vector<std::string> split_key(const std::string& name);
std::string join_key(const std::vector<std::string>& parts, size_t from = 0);
// A module index as written in a key ("0", "12"), or nothing for anything else (absurdly long numbers too).
std::optional<int> key_index(const std::string& part);

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

// Renames every key with `rename`; two keys landing on one name is an error naming both.
void rename_keys(StateDict& tensors, const std::function<std::string(const std::string&)>& rename);

// Strips a wrapper prefix that every key carries ("first_stage_model.", "vae.", "model.", "module."), as
// often as one is found.
void strip_wrapper_prefixes(StateDict& tensors);

}  // namespace vaecodec::core
