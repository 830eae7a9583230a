#include "core/presets.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/untrusted_json.h"

namespace vaecodec::core {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int64_t positive_int(const nlohmann::json& v, const std::string& key, const std::string& origin) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    throw Error(origin + ": \"" + key + "\" must be a positive integer, got " + v.dump());
  return v.get<int64_t>();
}

int64_t non_negative_int(const nlohmann::json& v, const std::string& key, const std::string& origin) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    throw Error(origin + ": \"" + key + "\" must be an integer of at least 0, got " + v.dump());
  return v.get<int64_t>();
}

std::string string_field(const nlohmann::json& v, const std::string& key, const std::string& origin) {
  if (!v.is_string()) throw Error(origin + ": \"" + key + "\" must be a string, got " + v.dump());
  return v.get<std::string>();
}

}  // namespace

Preset parse_preset(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": a preset is a JSON object");
  static const std::set<std::string> known = {"name",   "description", "gpu",   "device",
                                              "budget", "dtype",       "engine"};
  for (const auto& [key, value] : j.items())
    if (!known.count(key))
      throw Error(origin + ": unknown key \"" + key +
                  "\" (a preset has name, description, gpu, device, budget, dtype, engine)");
  Preset p;
  if (!j.contains("name")) throw Error(origin + ": the preset has no \"name\"");
  p.name = string_field(j.at("name"), "name", origin);
  if (p.name.empty() || p.name.find_first_of(" \t,/") != std::string::npos)
    throw Error(origin + ": \"name\" must be one word, got '" + p.name + "'");
  if (j.contains("description")) p.description = string_field(j.at("description"), "description", origin);
  if (j.contains("gpu")) p.gpu = string_field(j.at("gpu"), "gpu", origin);
  if (j.contains("device")) p.device = string_field(j.at("device"), "device", origin);
  if (p.device != "cuda" && p.device != "cpu")
    throw Error(origin + ": \"device\" must be cuda or cpu, got '" + p.device + "'");
  if (j.contains("dtype")) p.dtype = string_field(j.at("dtype"), "dtype", origin);
  if (p.dtype != "fp32" && p.dtype != "bf16" && p.dtype != "fp16")
    throw Error(origin + ": \"dtype\" must be fp32, bf16 or fp16, got '" + p.dtype + "'");
  if (!j.contains("budget")) throw Error(origin + ": the preset has no \"budget\" (a size, or \"none\")");
  const auto& budget = j.at("budget");
  if (budget.is_number_integer() && budget.get<int64_t>() >= 0) {
    p.planner.budget_bytes = budget.get<int64_t>();
  } else if (budget.is_string() && budget.get<std::string>() == "none") {
    p.planner.budget_bytes = 0;
  } else if (budget.is_string()) {
    try {
      p.planner.budget_bytes = parse_size(budget.get<std::string>());
    } catch (const Error& e) {
      throw Error(origin + ": \"budget\": " + e.what());
    }
  } else {
    throw Error(origin + ": \"budget\" must be a size like \"22.5GiB\", bytes or \"none\", got " +
                budget.dump());
  }
  if (j.contains("engine")) {
    const auto& engine = j.at("engine");
    if (!engine.is_object()) throw Error(origin + ": \"engine\" must be an object");
    for (const auto& [key, value] : engine.items()) {
      const std::string where = "engine." + key;
      if (key == "max_chunk") {
        p.planner.max_chunk = positive_int(value, where, origin);
      } else if (key == "tiling") {
        if (!value.is_boolean()) throw Error(origin + ": \"" + where + "\" must be true or false");
        p.planner.tiling = value.get<bool>();
      } else if (key == "tile_overlap") {
        p.planner.tile_overlap = positive_int(value, where, origin);
      } else if (key == "norm_context") {
        p.planner.norm_context = non_negative_int(value, where, origin);
      } else if (key == "min_tile") {
        p.planner.min_tile = positive_int(value, where, origin);
      } else if (key == "offload") {
        if (!value.is_boolean()) throw Error(origin + ": \"" + where + "\" must be true or false");
        p.planner.offload = value.get<bool>();
      } else if (key == "margin") {
        if (!value.is_number() || !(value.get<double>() >= 0 && value.get<double>() < 1))
          throw Error(origin + ": \"" + where + "\" must be a number from 0 to below 1, got " + value.dump());
        p.planner.margin = value.get<double>();
      } else {
        throw Error(origin + ": unknown engine option \"" + key +
                    "\" (max_chunk, tiling, tile_overlap, norm_context, min_tile, offload, margin)");
      }
    }
  }
  return p;
}

Preset load_preset_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open preset file " + path.string() + ": No such file or directory");
  // A preset is a few hundred bytes; a larger file is not one (and is not read into memory whole).
  constexpr std::streamsize kMaxPresetBytes = 1 << 20;
  std::string text(kMaxPresetBytes + 1, '\0');
  in.read(text.data(), kMaxPresetBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxPresetBytes)
    throw Error(path.string() + " is not a preset: larger than " + std::to_string(kMaxPresetBytes) +
                " bytes");
  nlohmann::json j;
  try {
    j = parse_untrusted_json(text);
  } catch (const Error& e) {
    throw Error(path.string() + " is not a preset: " + e.what());
  }
  Preset p = parse_preset(j, path.string());
  p.source = path.string();
  return p;
}

const std::vector<Preset>& builtin_presets() {
  static const std::vector<Preset> presets = [] {
    std::vector<Preset> out;
    for (const auto& [file, text] : builtin_preset_texts()) {
      Preset p = parse_preset(nlohmann::json::parse(text), "presets/" + file);
      if (p.name + ".json" != file)
        throw Error("presets/" + file + ": the preset is called '" + p.name + "'; its file must be " +
                    p.name + ".json");
      p.source = "built-in";
      out.push_back(std::move(p));
    }
    // cpu first, then by budget; file order within a budget.
    std::stable_sort(out.begin(), out.end(), [](const Preset& a, const Preset& b) {
      return a.planner.budget_bytes < b.planner.budget_bytes;
    });
    return out;
  }();
  return presets;
}

std::string preset_names() {
  std::string names;
  for (const auto& p : builtin_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

const Preset& find_preset(const std::string& name) {
  for (const auto& p : builtin_presets())
    if (p.name == name) return p;
  throw UsageError("unknown preset '" + name + "'; the presets are " + preset_names() +
                   " (or give a file with --preset-file)");
}

std::optional<std::string> suggest_preset(int64_t total_bytes, const std::string& device_name) {
  const Preset* best = nullptr;
  const std::string name = lower(device_name);
  for (const auto& p : builtin_presets()) {
    if (p.device != "cuda" || p.planner.budget_bytes <= 0 || p.planner.budget_bytes > total_bytes) continue;
    const bool named = !p.gpu.empty() && name.find(lower(p.gpu)) != std::string::npos;
    if (!best || p.planner.budget_bytes > best->planner.budget_bytes) {
      best = &p;
    } else if (p.planner.budget_bytes == best->planner.budget_bytes && named) {
      const bool best_named = !best->gpu.empty() && name.find(lower(best->gpu)) != std::string::npos;
      if (!best_named) best = &p;
    }
  }
  if (!best) return std::nullopt;
  return best->name;
}

}  // namespace vaecodec::core
