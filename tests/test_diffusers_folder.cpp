// diffusers model folders as --weights: shards with their index, a pipeline's vae/ folder, the config's
// latent statistics used instead of the released ones, and the folders that hold no VAE or a damaged one.

#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/models/registry.h"
#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/diffusers_names.h"
#include "tests/video_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace vaecodec;
using namespace vaecodec::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

constexpr int64_t kChannels = 16;  // the tiny Wan2.1 model's latent channels

// Statistics unlike the released ones: what a fine-tuned VAE's config.json might hold.
std::vector<float> test_mean() {
  std::vector<float> v;
  for (int64_t c = 0; c < kChannels; ++c) v.push_back(0.25f * static_cast<float>(c) - 1.5f);
  return v;
}
std::vector<float> test_std() {
  std::vector<float> v;
  for (int64_t c = 0; c < kChannels; ++c) v.push_back(0.5f + 0.125f * static_cast<float>(c));
  return v;
}

void write_json(const fs::path& path, const nlohmann::json& json) {
  std::ofstream(path) << json.dump(2);
}

// diffusers' config.json of the tiny model, as AutoencoderKLWan writes it (the keys vaecodec reads and some
// it leaves to the tensors).
nlohmann::json tiny_config() {
  return {{"_class_name", "AutoencoderKLWan"},
          {"_diffusers_version", "0.35.0"},
          {"base_dim", 8},
          {"z_dim", kChannels},
          {"dim_mult", {1, 2, 4, 4}},
          {"num_res_blocks", 2},
          {"attn_scales", nlohmann::json::array()},
          {"temperal_downsample", {false, true, true}},
          {"dropout", 0.0},
          {"latents_mean", test_mean()},
          {"latents_std", test_std()}};
}

// A pipeline folder (model_index.json, vae/) holding the tiny Wan2.1 model under diffusers' names in two
// shards with their index, and `config` as vae/config.json. Returns the vae/ folder.
fs::path make_pipeline(const fs::path& root, const nlohmann::json& config) {
  const fs::path vae = root / "vae";
  fs::create_directories(vae);
  write_json(root / "model_index.json",
             {{"_class_name", "WanPipeline"}, {"vae", {"diffusers", "AutoencoderKLWan"}}});
  write_json(vae / "config.json", config);
  std::map<std::string, torch::Tensor> shards[2];
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const auto& [name, tensor] : read_tensors(tiny_weights())) {
    const std::string renamed = wan21_to_diffusers(name);
    const int shard = i++ % 2;
    shards[shard][renamed] = tensor;
    weight_map[renamed] =
        "diffusion_pytorch_model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
  }
  for (int shard = 0; shard < 2; ++shard)
    core::write_safetensors(
        vae / ("diffusion_pytorch_model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors"),
        shards[shard]);
  write_json(vae / "diffusion_pytorch_model.safetensors.index.json",
             {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});
  return vae;
}

std::string cpu_args() {
  return " --device cpu --dtype fp32 --quiet";
}

fs::path make_input(const TempDir& dir) {
  return make_clip(dir / "in.mp4",
                   "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 5 -pix_fmt yuv420p -c:v libx264");
}

// A video's frames as stored (every plane), through the ffmpeg program.
std::string raw_pixels(const fs::path& video) {
  const fs::path raw = video.string() + ".raw";
  if (shell("ffmpeg -nostdin -loglevel error -y -i " + quote(video) + " -f rawvideo " + quote(raw)) != 0)
    throw std::runtime_error("ffmpeg could not decode " + video.string());
  return read_text(raw);
}

// A refused run: `status`, one line on stderr that says `what`, and no output.
void check_refused(const CliResult& r, int status, const std::string& what, const fs::path& output) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK_THAT(r.err, StartsWith("vaecodec: error: ") && Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(output));
}

}  // namespace

TEST_CASE("a sharded diffusers pipeline folder loads as the single file, with its config",
          "[weights][diffusers]") {
  TempDir dir;
  const fs::path vae = make_pipeline(dir.path(), tiny_config());
  const auto original = read_tensors(tiny_weights());
  for (const fs::path& named : {dir.path(), vae}) {
    INFO(named);
    const core::Checkpoint checkpoint = core::load_checkpoint(named);
    CHECK(checkpoint.path == vae);
    CHECK(checkpoint.format == "diffusers");
    CHECK(checkpoint.layout == "diffusers");
    REQUIRE(checkpoint.tensors.size() == original.size());
    for (const auto& [name, tensor] : original) {
      INFO(name);
      REQUIRE(checkpoint.tensors.count(name) == 1);
      CHECK(torch::equal(checkpoint.tensors.at(name), tensor));
    }
    const core::ModelInfo info = core::recognise_model(checkpoint);
    CHECK(info.family == "wan2.1-vae");
    CHECK(info.latent_mean == test_mean());
    CHECK(info.latent_std == test_std());
    CHECK(info.config.at("latents_mean").get<std::vector<float>>() == test_mean());
  }
  // The single file keeps the released statistics and a config without them.
  const core::ModelInfo released = core::recognise_model(core::load_checkpoint(tiny_weights()));
  CHECK(released.latent_mean != test_mean());
  CHECK_FALSE(released.config.contains("latents_mean"));
}

TEST_CASE("encode normalizes with the folder's statistics and records them", "[cli][diffusers]") {
  TempDir dir;
  const fs::path pipeline = dir / "pipeline";
  make_pipeline(pipeline, tiny_config());
  const fs::path input = make_input(dir);
  const fs::path from_file = dir / "file.safetensors", from_folder = dir / "folder.safetensors";
  const auto a = run_cli("encode " + quote(input) + " -o " + quote(from_file) + " --weights " +
                         quote(tiny_weights()) + cpu_args());
  const auto b = run_cli("encode " + quote(input) + " -o " + quote(from_folder) + " --weights " +
                         quote(pipeline) + cpu_args());
  INFO(a.err << b.err);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);

  // The same raw latents, normalized with the released statistics in one file and the folder's in the other.
  const core::ModelInfo released = core::recognise_model(core::load_checkpoint(tiny_weights()));
  auto column = [](const std::vector<float>& v) {
    return torch::tensor(v, torch::kDouble).reshape({1, kChannels, 1, 1, 1});
  };
  const torch::Tensor z_file = io::read_latents(from_file).latents.to(torch::kDouble);
  const io::LatentFile folder = io::read_latents(from_folder);
  const torch::Tensor z_folder = folder.latents.to(torch::kDouble);
  const torch::Tensor raw = z_file * column(released.latent_std) + column(released.latent_mean);
  const torch::Tensor expected = (raw - column(test_mean())) / column(test_std());
  REQUIRE(z_folder.sizes() == expected.sizes());
  CHECK(relative_error(z_folder, expected) < 1e-5);
  CHECK(relative_error(z_folder, z_file) > 0.1);  // the statistics made a difference
  CHECK(folder.meta.model_config.at("latents_mean").get<std::vector<float>>() == test_mean());
  CHECK(folder.meta.model_config.at("latents_std").get<std::vector<float>>() == test_std());

  // decode with the folder undoes the folder's normalization: the same video as decoding the file's latents
  // with the file's weights.
  const fs::path video_file = dir / "file.mkv", video_folder = dir / "folder.mkv";
  REQUIRE(run_cli("decode " + quote(from_file) + " -o " + quote(video_file) + " --weights " +
                  quote(tiny_weights()) + " --codec ffv1" + cpu_args())
              .status == 0);
  REQUIRE(run_cli("decode " + quote(from_folder) + " -o " + quote(video_folder) + " --weights " +
                  quote(pipeline) + " --codec ffv1" + cpu_args())
              .status == 0);
  const std::string pixels_file = raw_pixels(video_file), pixels_folder = raw_pixels(video_folder);
  REQUIRE(pixels_file.size() == pixels_folder.size());
  REQUIRE_FALSE(pixels_file.empty());
  int max_difference = 0;
  for (size_t i = 0; i < pixels_file.size(); ++i)
    max_difference =
        std::max(max_difference, std::abs(static_cast<int>(static_cast<uint8_t>(pixels_file[i])) -
                                          static_cast<uint8_t>(pixels_folder[i])));
  CHECK(max_difference <= 1);  // float rounding of the two normalizations
}

TEST_CASE("a folder without a VAE or with a damaged one is refused in one line", "[cli][diffusers]") {
  TempDir dir;
  const fs::path input = make_input(dir);
  const fs::path output = dir / "out.safetensors";
  auto encode = [&](const fs::path& weights) {
    return run_cli("encode " + quote(input) + " -o " + quote(output) + " --weights " + quote(weights) +
                   cpu_args());
  };

  SECTION("an empty folder") {
    const fs::path empty = dir / "empty";
    fs::create_directories(empty);
    check_refused(encode(empty), 2, "not a diffusers VAE", output);
  }
  SECTION("weights without config.json") {
    const fs::path vae = make_pipeline(dir / "pipeline", tiny_config());
    ::unlink((vae / "config.json").c_str());
    check_refused(encode(dir / "pipeline"), 2, "without its config.json", output);
  }
  SECTION("config.json without weights") {
    const fs::path vae = dir / "vae";
    fs::create_directories(vae);
    write_json(vae / "config.json", tiny_config());
    check_refused(encode(vae), 2, "without weights", output);
  }
  SECTION("an index naming a missing shard") {
    const fs::path vae = make_pipeline(dir / "pipeline", tiny_config());
    ::unlink((vae / "diffusion_pytorch_model-00002-of-00002.safetensors").c_str());
    check_refused(encode(vae), 1, "names the shard diffusion_pytorch_model-00002-of-00002.safetensors",
                  output);
  }
  SECTION("statistics of the wrong length") {
    nlohmann::json config = tiny_config();
    config["latents_std"] = {1.0, 2.0, 3.0};
    make_pipeline(dir / "pipeline", config);
    check_refused(encode(dir / "pipeline"), 1,
                  "latents_std has 3 values, but the model has 16 latent channels", output);
  }
  SECTION("a zero std") {
    nlohmann::json config = tiny_config();
    config["latents_std"][4] = 0.0;
    make_pipeline(dir / "pipeline", config);
    check_refused(encode(dir / "pipeline"), 1, "not a finite positive number", output);
  }
}
