#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/test_support.h"

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using vaecodec::Error;
using vaecodec::core::SafetensorsFile;
using vaecodec::core::write_safetensors;
using vaecodec::io::check_latents_match;
using vaecodec::io::LatentMeta;
using vaecodec::io::LatentNormalization;
using vaecodec::io::read_latents;
using vaecodec::io::write_latents;

using vaecodec::test::TempDir;

// Every field set, to values that differ from the defaults.
LatentMeta full_meta() {
  LatentMeta meta;
  meta.family = "wan2.1-vae";
  meta.model_config = {{"dim", 96}, {"z_dim", 16}, {"dim_mult", {1, 2, 4, 4}}};
  meta.scale = 1.0;
  meta.width = 854;
  meta.height = 480;
  meta.padded_width = 856;
  meta.padded_height = 480;
  meta.frames = 7;
  meta.padded_frames = 9;
  meta.frame_rate = LatentMeta::Rational{30000, 1001};
  meta.time_base = LatentMeta::Rational{1, 90000};
  // Uneven steps: a variable frame rate, and a pts beyond 32 bits.
  meta.pts = {0, 3003, 6006, 12012, 15015, 4294967296LL + 18018, 4294967296LL + 21021};
  meta.colour_primaries = "bt709";
  meta.colour_transfer = "bt709";
  meta.colour_matrix = "bt709";
  meta.colour_range = "tv";
  meta.pixel_format = "yuv420p";
  meta.has_audio = true;
  meta.source = "clip one.mp4";
  meta.filter_graph = "scale=832:480,fps=16";
  meta.start_seconds = 1.5;
  meta.duration_seconds = 2.25;
  meta.max_frames = 7;
  return meta;
}

torch::Tensor random_latents(int64_t channels = 16) {
  torch::manual_seed(7);
  return torch::randn({1, channels, 3, 4, 6});
}

}  // namespace

TEST_CASE("latents round trip through .safetensors exactly, with every metadata field", "[latent]") {
  TempDir dir;
  const auto path = dir / "latents.safetensors";
  const torch::Tensor latents = random_latents();
  const LatentMeta meta = full_meta();
  write_latents(path, latents, meta);

  SafetensorsFile file(path);
  REQUIRE(file.entries().size() == 1);
  REQUIRE(file.entries().at("latents").dtype == torch::kFloat);
  REQUIRE(file.metadata().count("vaecodec") == 1);

  const vaecodec::io::LatentFile read = read_latents(path);
  CHECK(read.format == "safetensors");
  CHECK(read.has_meta);
  CHECK(read.latents.scalar_type() == torch::kFloat);
  CHECK(torch::equal(read.latents, latents));

  LatentMeta expected = meta;
  expected.latent_channels = 16;  // recorded from the tensor
  CHECK(read.meta == expected);
  CHECK(read.meta.pts == meta.pts);
  CHECK(read.meta.frame_rate == LatentMeta::Rational{30000, 1001});
  CHECK(read.meta.colour_range == "tv");
  CHECK(read.meta.model_config == meta.model_config);
  CHECK(read.meta.vaecodec_version == VAECODEC_VERSION);
}

TEST_CASE("latent files are told by their extension, in any case", "[latent]") {
  CHECK(vaecodec::io::is_latent_path("a/z.safetensors"));
  CHECK(vaecodec::io::is_latent_path("Z.LATENT"));
  CHECK_FALSE(vaecodec::io::is_latent_path("clip.mp4"));
  CHECK_FALSE(vaecodec::io::is_latent_path("safetensors"));
}

TEST_CASE("16-bit latents are stored in their own dtype", "[latent]") {
  TempDir dir;
  const auto path = dir / "latents.safetensors";
  const torch::Tensor latents = random_latents().to(torch::kBFloat16);
  write_latents(path, latents, full_meta());
  CHECK(SafetensorsFile(path).entries().at("latents").dtype == torch::kBFloat16);
  const auto read = read_latents(path);
  CHECK(read.latents.scalar_type() == torch::kFloat);
  CHECK(torch::equal(read.latents, latents.to(torch::kFloat)));

  REQUIRE_THROWS_WITH(write_latents(path, random_latents().to(torch::kDouble), full_meta()),
                      Contains("only float32, float16 and bfloat16 latents are written"));
}

TEST_CASE("latents round trip through ComfyUI's .latent", "[latent]") {
  TempDir dir;
  const auto path = dir / "clip.latent";
  const torch::Tensor latents = random_latents();
  const LatentMeta meta = full_meta();
  write_latents(path, latents, meta);

  SafetensorsFile file(path);
  REQUIRE(file.entries().at("latent_tensor").dtype == torch::kFloat);
  REQUIRE(file.entries().at("latent_tensor").shape == std::vector<int64_t>{1, 16, 3, 4, 6});
  // The marker that stops ComfyUI's LoadLatent from rescaling the file as an SD1 latent.
  REQUIRE(file.entries().at("latent_format_version_0").shape == std::vector<int64_t>{0});
  REQUIRE(file.metadata().count("vaecodec") == 1);

  const auto read = read_latents(path);
  CHECK(read.format == "latent");
  CHECK(read.has_meta);
  CHECK(torch::equal(read.latents, latents));
  LatentMeta expected = meta;
  expected.latent_channels = 16;
  CHECK(read.meta == expected);
}

TEST_CASE(".latent files hold raw latents: z * std + mean, normalized back on reading", "[latent]") {
  TempDir dir;
  const auto path = dir / "wan.latent";
  // z: [1, 2, 1, 1, 2]; channel 0 = {1, -2}, channel 1 = {0.5, 4}.
  const torch::Tensor z = torch::tensor({1.0f, -2.0f, 0.5f, 4.0f}).view({1, 2, 1, 1, 2});
  const LatentNormalization normalization{{0.5, -1.0}, {2.0, 0.25}};
  write_latents(path, z, full_meta(), normalization);

  // By hand: channel 0: 1 * 2 + 0.5 = 2.5, -2 * 2 + 0.5 = -3.5; channel 1: 0.5 * 0.25 - 1 = -0.875,
  // 4 * 0.25 - 1 = 0.
  const torch::Tensor stored = SafetensorsFile(path).load("latent_tensor");
  const torch::Tensor raw = torch::tensor({2.5f, -3.5f, -0.875f, 0.0f}).view({1, 2, 1, 1, 2});
  CHECK(torch::equal(stored, raw));

  CHECK(torch::equal(read_latents(path, normalization).latents, z));
  // Without the statistics, the raw latents come back as they are.
  CHECK(torch::equal(read_latents(path).latents, raw));

  // Realistic values round trip to float32 precision.
  const torch::Tensor latents = random_latents(2);
  write_latents(path, latents, full_meta(), normalization);
  CHECK(torch::allclose(read_latents(path, normalization).latents, latents, /*rtol=*/1e-6, /*atol=*/1e-6));
}

TEST_CASE("latents from ComfyUI and bare files are read without vaecodec's record", "[latent]") {
  TempDir dir;
  const torch::Tensor raw = torch::tensor({2.5f, -3.5f, -0.875f, 0.0f}).view({1, 2, 1, 1, 2});
  const LatentNormalization normalization{{0.5, -1.0}, {2.0, 0.25}};
  const torch::Tensor z = torch::tensor({1.0f, -2.0f, 0.5f, 4.0f}).view({1, 2, 1, 1, 2});

  SECTION("ComfyUI's Save Latent") {
    const auto path = dir / "ComfyUI_00001_.latent";
    write_safetensors(path, {{"latent_tensor", raw}, {"latent_format_version_0", torch::empty({0})}},
                      {{"prompt", "{}"}});
    const auto read = read_latents(path, normalization);
    CHECK(read.format == "latent");
    CHECK_FALSE(read.has_meta);
    CHECK(torch::equal(read.latents, z));
    CHECK(read.meta.family.empty());
    CHECK_FALSE(read.meta.frame_rate.has_value());
    CHECK(read.meta.latent_channels == 2);
  }
  SECTION("a .latent without the version marker is scaled as ComfyUI's LoadLatent does") {
    const auto path = dir / "old.latent";
    write_safetensors(path, {{"latent_tensor", raw}});
    const auto read = read_latents(path);
    CHECK(torch::allclose(read.latents, raw / 0.18215));
  }
  SECTION("a bare safetensors file with one 5-D tensor") {
    const auto path = dir / "pipeline_output.safetensors";
    const torch::Tensor latents = random_latents();
    write_safetensors(path, {{"samples", latents}, {"timesteps", torch::arange(4)}});
    const auto read = read_latents(path);
    CHECK(read.format == "bare");
    CHECK_FALSE(read.has_meta);
    CHECK(torch::equal(read.latents, latents));
    const LatentMeta& meta = read.meta;
    CHECK(meta.family.empty());
    CHECK(meta.latent_channels == 16);
    CHECK_FALSE(meta.frame_rate.has_value());
    CHECK_FALSE(meta.time_base.has_value());
    CHECK_FALSE(meta.frames.has_value());
    CHECK_FALSE(meta.width.has_value());
    CHECK_FALSE(meta.has_audio.has_value());
    CHECK(meta.pts.empty());
    CHECK(meta.vaecodec_version.empty());
    CHECK_FALSE(meta.scale_applied);
  }
}

TEST_CASE("SeedVR2 latents are written unscaled unless asked, and always read back raw", "[latent]") {
  TempDir dir;
  const auto path = dir / "seedvr2.safetensors";
  const torch::Tensor latents = random_latents();
  LatentMeta meta = full_meta();
  meta.family = "seedvr2-vae";
  meta.scale = 0.9152;

  SECTION("unscaled: stored as they are, the factor recorded") {
    write_latents(path, latents, meta);
    SafetensorsFile file(path);
    CHECK(torch::equal(file.load("latents"), latents));
    const auto record = nlohmann::json::parse(file.metadata().at("vaecodec"));
    CHECK(record["latent_scale"]["factor"] == 0.9152);
    CHECK(record["latent_scale"]["applied"] == false);
    const auto read = read_latents(path);
    CHECK(torch::equal(read.latents, latents));
    CHECK(read.meta.scale == 0.9152);
    CHECK_FALSE(read.meta.scale_applied);
  }
  SECTION("scaled: stored times the factor, divided on reading") {
    meta.scale_applied = true;
    write_latents(path, latents, meta);
    SafetensorsFile file(path);
    CHECK(torch::allclose(file.load("latents"), latents * 0.9152, /*rtol=*/1e-6, /*atol=*/1e-7));
    CHECK(nlohmann::json::parse(file.metadata().at("vaecodec"))["latent_scale"]["applied"] == true);
    const auto read = read_latents(path);
    CHECK(torch::allclose(read.latents, latents, /*rtol=*/1e-6, /*atol=*/1e-7));
    CHECK(read.meta.scale_applied);
  }
  SECTION("scaled .latent") {
    const auto latent_path = dir / "seedvr2.latent";
    meta.scale_applied = true;
    write_latents(latent_path, latents, meta);
    CHECK(torch::allclose(SafetensorsFile(latent_path).load("latent_tensor"), latents * 0.9152, 1e-6, 1e-7));
    CHECK(torch::allclose(read_latents(latent_path).latents, latents, /*rtol=*/1e-6, /*atol=*/1e-7));
  }
}

TEST_CASE("the metadata record survives JSON, unknowns as null", "[latent]") {
  const LatentMeta meta = full_meta();
  CHECK(vaecodec::io::latent_meta_from_json(vaecodec::io::to_json(meta)) == meta);

  LatentMeta unknown;
  unknown.vaecodec_version.clear();
  const nlohmann::json json = vaecodec::io::to_json(unknown);
  CHECK(json["frame_rate"].is_null());
  CHECK(json["pts"].is_null());
  CHECK(json["colour"]["range"].is_null());
  CHECK(json["has_audio"].is_null());
  CHECK(vaecodec::io::latent_meta_from_json(json) == unknown);
  // A minimal record: everything but the version may be missing.
  CHECK(vaecodec::io::parse_latent_meta(R"({"format_version": 1})").frames == std::nullopt);
}

TEST_CASE("latent file errors say what is wrong", "[latent]") {
  TempDir dir;
  const auto path = dir / "latents.safetensors";
  const std::string where = path.string();
  const torch::Tensor latents = random_latents();

  SECTION("no 5-D tensor") {
    write_safetensors(path, {{"weight", torch::zeros({3, 4})}});
    REQUIRE_THROWS_WITH(
        read_latents(path),
        Equals(where + ": no latent tensor: expected 'latents', 'latent_tensor' or one 5-D tensor, "
                       "found 'weight' [3, 4]"));
  }
  SECTION("more than one 5-D tensor and none named") {
    write_safetensors(path, {{"a", latents}, {"b", latents}});
    REQUIRE_THROWS_WITH(read_latents(path), Contains("more than one 5-D tensor to choose from ('a', 'b')"));
  }
  SECTION("wrong rank") {
    write_safetensors(path, {{"latents", torch::zeros({1, 16, 4, 4})}});
    REQUIRE_THROWS_WITH(
        read_latents(path),
        Equals(where + ": tensor 'latents' has shape [1, 16, 4, 4], but latents are [B, C, T, h, w]"));
    REQUIRE_THROWS_WITH(write_latents(path, torch::zeros({16, 4, 4}), full_meta()),
                        Equals(where + ": latents must be [B, C, T, h, w], not [16, 4, 4]"));
  }
  SECTION("integer tensor") {
    write_safetensors(path, {{"latents", torch::zeros({1, 16, 1, 2, 2}, torch::kLong)}});
    REQUIRE_THROWS_WITH(read_latents(path),
                        Contains("tensor 'latents' is Long; latents must be floating point"));
  }
  SECTION("NaN and Inf, on writing and on reading") {
    torch::Tensor bad = latents.clone();
    bad[0][3][1][2][2] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE_THROWS_WITH(write_latents(path, bad, full_meta()), Equals(where + ": latents contain NaN"));
    CHECK(::access(path.c_str(), F_OK) != 0);
    write_safetensors(path, {{"latents", bad}});
    REQUIRE_THROWS_WITH(read_latents(path), Equals(where + ": latents contain NaN"));

    bad[0][3][1][2][2] = -std::numeric_limits<float>::infinity();
    REQUIRE_THROWS_WITH(write_latents(path, bad, full_meta()), Equals(where + ": latents contain Inf"));
    write_safetensors(path, {{"latents", bad}});
    REQUIRE_THROWS_WITH(read_latents(path), Equals(where + ": latents contain Inf"));
  }
  SECTION("metadata that does not parse") {
    write_safetensors(path, {{"latents", latents}}, {{"vaecodec", "{\"format_version\": 1,"}});
    REQUIRE_THROWS_WITH(read_latents(path), Contains(where + ": latent metadata is not valid JSON"));
  }
  SECTION("metadata of the wrong type or version") {
    nlohmann::json record = vaecodec::io::to_json(full_meta());
    record["pts"] = "0,1,2";
    write_safetensors(path, {{"latents", latents}}, {{"vaecodec", record.dump()}});
    REQUIRE_THROWS_WITH(
        read_latents(path),
        Equals(where + ": latent metadata: 'pts' must be an array of integers, not \"0,1,2\""));

    record = vaecodec::io::to_json(full_meta());
    record["frame_rate"] = {{"num", 30}, {"den", 0}};
    REQUIRE_THROWS_WITH(vaecodec::io::latent_meta_from_json(record), Contains("'frame_rate' must be"));

    record = vaecodec::io::to_json(full_meta());
    record["format_version"] = 2;
    REQUIRE_THROWS_WITH(vaecodec::io::latent_meta_from_json(record),
                        Contains("format version 2 is newer than this vaecodec reads (1)"));
  }
  SECTION("a record that contradicts itself") {
    LatentMeta meta = full_meta();
    meta.frames = 8;
    REQUIRE_THROWS_WITH(write_latents(path, latents, meta),
                        Equals(where + ": latent metadata: 7 pts listed for 8 frames"));
  }
  SECTION("unknown extension") {
    const auto pt = dir / "latents.pt";
    REQUIRE_THROWS_WITH(
        write_latents(pt, latents, full_meta()),
        Equals(pt.string() + ": unknown latent file extension '.pt' (expected .safetensors or .latent)"));
  }
  SECTION("normalization that does not fit the channels") {
    const auto latent_path = dir / "latents.latent";
    const LatentNormalization three{{0, 0, 0}, {1, 1, 1}};
    REQUIRE_THROWS_WITH(
        write_latents(latent_path, latents, full_meta(), three),
        Equals(latent_path.string() +
               ": the latent normalization has 3 means and 3 stds, but the latents have 16 channels"));
    write_latents(latent_path, latents, full_meta());
    REQUIRE_THROWS_WITH(read_latents(latent_path, three), Contains("but the latents have 16 channels"));
  }
}

TEST_CASE("latents are checked against the weights that will decode them", "[latent]") {
  LatentMeta meta = full_meta();
  meta.family = "seedvr2-vae";
  meta.latent_channels = 16;
  REQUIRE_THROWS_WITH(
      check_latents_match(meta, "wan2.1-vae", 16, "latents.safetensors"),
      Equals("latents.safetensors: latents were made by seedvr2-vae, but the weights are wan2.1-vae"));

  meta.family = "wan2.1-vae";
  CHECK_NOTHROW(check_latents_match(meta, "wan2.1-vae", 16, "latents.safetensors"));
  REQUIRE_THROWS_WITH(
      check_latents_match(meta, "wan2.1-vae", 48, "latents.safetensors"),
      Equals("latents.safetensors: latents have 16 channels, but the wan2.1-vae weights expect 48"));

  // A bare file knows its channels only.
  LatentMeta bare;
  bare.latent_channels = 48;
  CHECK_NOTHROW(check_latents_match(bare, "wan2.2-vae", 48, "x.safetensors"));
  REQUIRE_THROWS_WITH(
      check_latents_match(bare, "wan2.1-vae", 16, "x.safetensors"),
      Equals("x.safetensors: latents have 48 channels, but the wan2.1-vae weights expect 16"));
}
