#include "app/dataset_config.h"

#include <map>
#include <optional>
#include <set>
#include <string>

#include <toml++/toml.h>

#include "core/error.h"
#include "io/log.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

// The keys of musubi-tuner's config schema (config_utils.py, ConfigSanitizer) that vaecodec reads.
const std::set<std::string> kGeneralKeys = {"caption_extension", "batch_size",    "num_repeats",
                                            "resolution",        "enable_bucket", "bucket_no_upscale"};
const std::set<std::string> kVideoKeys = {"video_directory", "video_jsonl_file",     "control_directory",
                                          "target_frames",   "frame_extraction",     "frame_stride",
                                          "frame_sample",    "max_frames",           "cache_directory",
                                          "source_fps",      "fp_latent_window_size"};
const std::set<std::string> kImageKeys = {
    "image_directory", "image_jsonl_file",      "cache_directory",     "control_directory",
    "multiple_target", "fp_latent_window_size", "fp_1f_clean_indices", "fp_1f_target_index",
    "fp_1f_no_post",   "no_resize_control",     "control_resolution"};

// One table of the config, read key by key with the place named in every message.
class Section {
 public:
  Section(const toml::table& table, std::string where, const fs::path& file)
      : table_(table), where_(std::move(where)), file_(file) {}

  const toml::node* find(const std::string& key) const { return table_.get(key); }

  [[noreturn]] void bad(const std::string& key, const std::string& expected) const {
    const toml::node* node = find(key);
    const auto line = node ? node->source().begin.line : 0;
    throw UsageError(file_.string() + (line ? ":" + std::to_string(line) : "") + ": " + where_ + " " + key +
                     " must be " + expected);
  }
  std::optional<std::string> text(const std::string& key) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    if (const auto v = node->value<std::string>(); v && node->is_string()) return *v;
    bad(key, "a string");
  }
  std::optional<bool> flag(const std::string& key) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    if (node->is_boolean()) return *node->value<bool>();
    bad(key, "true or false");
  }
  std::optional<int64_t> integer(const std::string& key, int64_t minimum) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    if (node->is_integer() && *node->value<int64_t>() >= minimum) return *node->value<int64_t>();
    bad(key, "an integer of " + std::to_string(minimum) + " or more");
  }
  std::optional<double> number(const std::string& key) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    if ((node->is_floating_point() || node->is_integer()) && *node->value<double>() > 0)
      return *node->value<double>();
    bad(key, "a positive number");
  }
  std::optional<std::vector<int64_t>> integers(const std::string& key, int64_t minimum) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    std::vector<int64_t> values;
    if (const toml::array* array = node->as_array()) {
      for (const toml::node& item : *array) {
        if (!item.is_integer() || *item.value<int64_t>() < minimum) bad(key, "a list of integers");
        values.push_back(*item.value<int64_t>());
      }
      if (!values.empty()) return values;
    }
    bad(key, "a list of integers of " + std::to_string(minimum) + " or more");
  }
  // An integer N (N x N) or [width, height].
  std::optional<io::FrameSize> size(const std::string& key) const {
    const toml::node* node = find(key);
    if (!node) return std::nullopt;
    if (node->is_integer() && *node->value<int64_t>() > 0)
      return io::FrameSize{*node->value<int64_t>(), *node->value<int64_t>()};
    if (const auto values = node->is_array() ? integers(key, 1) : std::nullopt; values && values->size() == 2)
      return io::FrameSize{(*values)[0], (*values)[1]};
    bad(key, "a size: N or [width, height]");
  }

 private:
  const toml::table& table_;
  std::string where_;
  const fs::path& file_;
};

// [general] first, the dataset's own value over it.
void read_common(const Section& s, io::MusubiDataset& d) {
  if (auto v = s.size("resolution")) d.resolution = *v;
  if (auto v = s.flag("enable_bucket")) d.enable_bucket = *v;
  if (auto v = s.flag("bucket_no_upscale")) d.bucket_no_upscale = *v;
  if (auto v = s.text("caption_extension")) d.caption_extension = *v;
  s.integer("batch_size", 1);  // checked, no effect on the caches
  s.integer("num_repeats", 1);
}

}  // namespace

std::vector<io::MusubiDataset> read_dataset_config(const fs::path& file) {
  toml::table config;
  try {
    config = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw UsageError("--dataset-config " + file.string() + ":" + std::to_string(e.source().begin.line) +
                     ": " + std::string(e.description()));
  }
  std::set<std::string> reported;  // each unknown key once
  auto unknown = [&](const std::string& key, const std::string& where) {
    if (reported.insert(key).second)
      io::warn(file.string() + ": " + where + " has the key '" + key +
               "', which musubi-tuner's dataset config does not know; ignored");
  };
  for (const auto& [key, node] : config)
    if (key.str() != "general" && key.str() != "datasets") unknown(std::string(key.str()), "the config");

  const toml::table empty;
  const toml::table* general = &empty;
  if (const toml::node* node = config.get("general")) {
    general = node->as_table();
    if (!general) throw UsageError(file.string() + ": [general] must be a table");
  }
  for (const auto& [key, node] : *general)
    if (!kGeneralKeys.count(std::string(key.str()))) unknown(std::string(key.str()), "[general]");
  const toml::array* entries = config.get("datasets") ? config.get("datasets")->as_array() : nullptr;
  if (!entries || entries->empty())
    throw UsageError(file.string() + ": no [[datasets]]: the config names nothing to cache");

  std::vector<io::MusubiDataset> datasets;
  std::map<fs::path, int> cache_owner;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = "[[datasets]] " + std::to_string(i);
    const toml::table* table = (*entries)[i].as_table();
    if (!table) throw UsageError(file.string() + ": " + where + " must be a table");
    const Section s(*table, where, file), g(*general, "[general]", file);
    io::MusubiDataset d;
    d.index = static_cast<int>(i);
    d.image = !table->contains("video_directory") && !table->contains("video_jsonl_file");
    const std::set<std::string>& own = d.image ? kImageKeys : kVideoKeys;
    std::string refused;  // what vaecodec cannot make for this dataset
    for (const auto& [k, node] : *table) {
      const std::string key(k.str());
      if (key == "architecture") {
        if (s.text(key) != "wan")
          refused = "architecture \"" + *s.text(key) + "\": vaecodec writes Wan caches only";
      } else if (!kGeneralKeys.count(key) && !own.count(key)) {
        unknown(key, where);
      }
    }
    read_common(g, d);
    read_common(s, d);
    const char* dir_key = d.image ? "image_directory" : "video_directory";
    const char* jsonl_key = d.image ? "image_jsonl_file" : "video_jsonl_file";
    if (auto v = s.text(dir_key)) d.directory = *v;
    if (auto v = s.text(jsonl_key)) d.jsonl_file = *v;
    if (d.directory.empty() && d.jsonl_file.empty())
      throw UsageError(file.string() + ": " + where + " names no inputs: give video_directory, " +
                       "video_jsonl_file, image_directory or image_jsonl_file");
    if (auto v = s.text("control_directory")) d.control_directory = *v;
    if (auto v = s.text("cache_directory")) d.cache_directory = *v;
    if (d.cache_directory.empty()) d.cache_directory = d.directory;  // the trainer's default
    if (d.cache_directory.empty())
      throw UsageError(file.string() + ": " + where + " needs a cache_directory (a JSONL dataset has no " +
                       "folder to default to)");
    if (d.image) {
      if (s.flag("multiple_target").value_or(false))
        refused = "multiple_target (several target images per item): vaecodec does not make these caches";
      if (s.flag("no_resize_control").value_or(false))
        refused = "no_resize_control (control images at their own size): vaecodec does not make these caches";
      if (s.find("control_resolution"))
        refused = "control_resolution (control images at another size): vaecodec does not make these caches";
      s.integers("fp_1f_clean_indices", 0);
      s.integer("fp_1f_target_index", 0);
      s.flag("fp_1f_no_post");
    } else {
      if (auto v = s.integers("target_frames", 1)) d.target_frames = *v;
      if (auto v = s.text("frame_extraction")) d.frame_extraction = *v;
      if (auto v = s.integer("frame_stride", 1)) d.frame_stride = *v;
      if (auto v = s.integer("frame_sample", 1)) d.frame_sample = *v;
      if (auto v = s.integer("max_frames", 1)) d.max_frames = *v;
      if (auto v = s.number("source_fps")) d.source_fps = *v;
      static const std::set<std::string> kModes = {"head", "chunk", "slide", "uniform", "full"};
      if (!kModes.count(d.frame_extraction))
        throw UsageError(file.string() + ": " + where + " frame_extraction \"" + d.frame_extraction +
                         "\" is not one of musubi-tuner's: head, chunk, slide, uniform, full");
    }
    s.integer("fp_latent_window_size", 1);
    if (!refused.empty()) {
      io::warn(file.string() + ": " + where + " is left out: " + refused);
      continue;
    }
    if (const auto [it, inserted] = cache_owner.emplace(d.cache_directory.lexically_normal(), d.index);
        !inserted)
      throw UsageError(file.string() + ": [[datasets]] " + std::to_string(it->second) + " and " +
                       std::to_string(d.index) + " share the cache_directory " + d.cache_directory.string() +
                       " (musubi-tuner needs one per dataset)");
    datasets.push_back(std::move(d));
  }
  return datasets;
}

}  // namespace vaecodec::app
