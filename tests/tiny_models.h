#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/models/registry.h"
#include "tests/test_support.h"

namespace vaecodec::test {

// A registered family's tiny random-weight model and golden cases (tests/data/NAME-tiny: weights.safetensors,
// meta.json naming the family and its config, cases.safetensors; only folders named *-tiny are read).
struct TinyModel {
  std::string family;  // ModelFamily::name
  std::filesystem::path folder;
  int64_t spatial_factor = 8;  // pixels per latent row and column
};

// Whether a family's decoder looks ahead in time (Note [Decoders that look ahead] in core/vae_model.h). Such
// a family (LTX-2: two tiny configs, weights-20 and weights-23) is left out of tiny_models(), whose tests
// load one weights.safetensors each and expect a decode to give every chunk's frames as it comes; its
// golden, chunk, session, band, blended-tile and exact-tile tests are its own (tests/test_ltx2.cpp,
// tests/test_session_lookahead.cpp, tests/test_bands.cpp, tests/test_ltx2_tiles.cpp).
inline bool decoder_looks_ahead(const core::ModelFamily& family) {
  return family.describe(family.released_config).decode_lag > 0;
}

// One tiny model for every family registered, in the registry's order (but decoder_looks_ahead ones). A
// family without one is a test failure: every family ships its tiny model (docs/architecture.md, "Adding a
// model family").
inline std::vector<TinyModel> tiny_models() {
  std::vector<TinyModel> out;
  for (const core::ModelFamily& family : core::model_families()) {
    if (decoder_looks_ahead(family)) continue;
    std::filesystem::path found;
    for (const auto& entry : std::filesystem::directory_iterator(data_dir())) {
      // Only the tiny random-weight models: trained ones (NAME-trained) have no golden cases.
      const std::string name = entry.path().filename().string();
      if (name.size() < 5 || name.compare(name.size() - 5, 5, "-tiny") != 0) continue;
      const auto meta = entry.path() / "meta.json";
      if (std::filesystem::exists(meta) && read_json(meta).value("model", "") == family.name)
        found = entry.path();
    }
    if (found.empty()) throw std::runtime_error("no tiny model in tests/data for the family " + family.name);
    const auto config = read_json(found / "meta.json").at("config");
    out.push_back({family.name, found, family.describe(config).spatial_factor});
  }
  return out;
}

// The tiny model as the golden tests build it (its config from meta.json: some, such as SeedVR2's norm
// groups, cannot be read off the tensors), on `device` in `dtype`.
inline std::shared_ptr<core::VaeModel> load_tiny(const TinyModel& tiny, torch::Device device = torch::kCPU,
                                                 torch::ScalarType dtype = torch::kFloat) {
  core::ModelOptions options;
  options.device = device;
  options.dtype = dtype;
  options.config = read_json(tiny.folder / "meta.json").at("config");
  return core::build_model(core::load_checkpoint(tiny.folder / "weights.safetensors"), options);
}

// The tiny model of the family `name`.
inline TinyModel tiny_model(const std::string& name) {
  for (const TinyModel& t : tiny_models())
    if (t.family == name) return t;
  throw std::runtime_error("no tiny model of " + name);
}

}  // namespace vaecodec::test
