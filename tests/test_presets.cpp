// GPU-tier presets: the files in presets/, what the binary carries of them, sizes, the suggestion per GPU,
// and the commands that list and use them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/presets.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

constexpr int64_t kGiB = int64_t{1} << 30;

std::filesystem::path presets_dir() {
  return data_dir().parent_path().parent_path() / "presets";
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the binary carries exactly the files in presets/", "[presets]") {
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(presets_dir()))
    if (entry.path().extension() == ".json") on_disk.insert(entry.path().filename());
  std::set<std::string> embedded;
  for (const auto& [file, text] : core::builtin_preset_texts()) {
    embedded.insert(file);
    INFO(file);
    CHECK(nlohmann::json::parse(text) == read_json(presets_dir() / file));
  }
  CHECK(embedded == on_disk);
}

TEST_CASE("built-in presets: every tier of the issue, budgets below the card", "[presets]") {
  // name -> the card's memory in GiB (as the driver reports it, about), 0 for the CPU
  const std::map<std::string, double> tiers = {{"cpu", 0},
                                               {"rtx4060-8g", 7.99},
                                               {"rtx3060-12g", 11.75},
                                               {"rtx4070-12g", 11.99},
                                               {"rtx4080-16g", 15.25},
                                               {"rtx5070ti-16g", 15.47},
                                               {"rtx5080-16g", 15.47},
                                               {"rtx4090-24g", 23.64},
                                               {"rtx5090-32g", 31.84},
                                               {"l40s-48g", 44.42},
                                               {"a100-80g", 79.14},
                                               {"h100-80g", 79.19},
                                               {"h200-141g", 139.8}};
  const auto& presets = core::builtin_presets();
  CHECK(presets.size() == tiers.size());
  int64_t previous = -1;
  for (const auto& p : presets) {
    INFO(p.name);
    REQUIRE(tiers.count(p.name) == 1);
    CHECK_FALSE(p.description.empty());
    CHECK(p.source == "built-in");
    CHECK(p.planner.budget_bytes >= previous);  // listed in budget order
    previous = p.planner.budget_bytes;
    CHECK(p.planner.max_chunk >= 1);
    if (p.name == "cpu") {
      CHECK(p.device == "cpu");
      CHECK(p.dtype == "fp32");
      CHECK(p.planner.budget_bytes == 0);
      continue;
    }
    CHECK(p.device == "cuda");
    CHECK(p.dtype == "bf16");
    CHECK(p.planner.tiling);
    // Headroom for the CUDA context and cuDNN: at least 0.5 GiB below what the card reports, at most 4 GiB.
    const double card = tiers.at(p.name) * static_cast<double>(kGiB);
    CHECK(static_cast<double>(p.planner.budget_bytes) <= card - 0.5 * kGiB);
    CHECK(static_cast<double>(p.planner.budget_bytes) >= card - 4.0 * kGiB);
  }
  CHECK(core::find_preset("h100-80g").planner.budget_bytes == 77 * kGiB);
  REQUIRE_THROWS_WITH(core::find_preset("rtx9090"), Contains("unknown preset 'rtx9090'") &&
                                                        Contains("cpu, rtx4060-8g") && Contains("h200-141g"));
}

TEST_CASE("sizes: G/GiB/M/MiB binary, GB/MB decimal, decimals, bytes", "[presets]") {
  CHECK(core::parse_size("8G") == 8 * kGiB);
  CHECK(core::parse_size("8GiB") == 8 * kGiB);
  CHECK(core::parse_size("8gib") == 8 * kGiB);
  CHECK(core::parse_size("7.5G") == 7 * kGiB + kGiB / 2);
  CHECK(core::parse_size("512M") == 512 * 1024 * 1024);
  CHECK(core::parse_size("512MiB") == 512 * 1024 * 1024);
  CHECK(core::parse_size("12GB") == 12000000000);
  CHECK(core::parse_size("1073741824") == kGiB);
  CHECK(core::parse_size(" 1.25 GiB ") == kGiB + kGiB / 4);
  for (const std::string bad : {"", "G", "abc", "8X", "-1G", "0", "8 G B", "nan", "1e30G"}) {
    INFO(bad);
    CHECK_THROWS_WITH(core::parse_size(bad), Contains("is not a memory size"));
  }
  CHECK(core::format_size(22 * kGiB + kGiB / 2) == "22.5 GiB");
  CHECK(core::format_size(512 * 1024 * 1024) == "512 MiB");
}

TEST_CASE("preset files: the format, and every error names the file and the key", "[presets]") {
  TempDir dir;
  const auto path = dir / "mine.json";
  write(path, R"({"name": "mine", "description": "a 10 GB card", "budget": "9.5G", "dtype": "fp16",
                  "engine": {"max_chunk": 3, "tiling": false, "tile_overlap": 4, "norm_context": 0, "min_tile": 24, "offload": false,
                             "margin": 0.05}})");
  const core::Preset p = core::load_preset_file(path);
  CHECK(p.name == "mine");
  CHECK(p.source == path.string());
  CHECK(p.device == "cuda");
  CHECK(p.dtype == "fp16");
  CHECK(p.planner.budget_bytes == 9 * kGiB + kGiB / 2);
  CHECK(p.planner.max_chunk == 3);
  CHECK_FALSE(p.planner.tiling);
  CHECK(p.planner.tile_overlap == 4);
  CHECK(p.planner.norm_context == 0);
  CHECK_FALSE(p.planner.norm_context_fixed);  // the planner's to take or leave
  CHECK(p.planner.min_tile == 24);
  CHECK_FALSE(p.planner.offload);
  CHECK(p.planner.margin == 0.05);

  CHECK(core::parse_preset(nlohmann::json::parse(R"({"name": "b", "budget": 1000})"), "x")
            .planner.budget_bytes == 1000);
  CHECK(core::parse_preset(nlohmann::json::parse(R"({"name": "b", "budget": "none"})"), "x")
            .planner.budget_bytes == 0);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"name": "a", "budget": "8G", "vram": "8G"})", "unknown key \"vram\""},
      {R"({"budget": "8G"})", "has no \"name\""},
      {R"({"name": "a b", "budget": "8G"})", "must be one word"},
      {R"({"name": "a"})", "has no \"budget\""},
      {R"({"name": "a", "budget": "8 bananas"})", "\"budget\": '8 bananas' is not a memory size"},
      {R"({"name": "a", "budget": true})", "\"budget\" must be a size"},
      {R"({"name": "a", "budget": "8G", "dtype": "int8"})", "\"dtype\" must be fp32, bf16 or fp16"},
      {R"({"name": "a", "budget": "8G", "device": "tpu"})", "\"device\" must be cuda or cpu"},
      {R"({"name": "a", "budget": "8G", "engine": {"chunk": 2}})", "unknown engine option \"chunk\""},
      {R"({"name": "a", "budget": "8G", "engine": {"max_chunk": 0}})",
       "\"engine.max_chunk\" must be a positive"},
      {R"({"name": "a", "budget": "8G", "engine": {"margin": 1.5}})",
       "\"engine.margin\" must be a number from 0"},
      {R"({"name": "a", "budget": "8G", "engine": {"norm_context": -1}})",
       "\"engine.norm_context\" must be an integer of at least 0"},
      {R"({"name": "a", "budget": "8G", "engine": {"tiling": "yes"}})",
       "\"engine.tiling\" must be true or false"},
      {R"([1, 2])", "a preset is a JSON object"},
  };
  for (const auto& [text, what] : bad) {
    INFO(text);
    write(path, text);
    CHECK_THROWS_WITH(core::load_preset_file(path), StartsWith(path.string()) && Contains(what));
  }
  write(path, "{not json");
  CHECK_THROWS_WITH(core::load_preset_file(path), Contains("is not a preset: not valid JSON"));
  CHECK_THROWS_WITH(core::load_preset_file(dir / "none.json"), Contains("cannot open preset file"));
}

TEST_CASE("info's suggestion: the largest tier whose budget fits the GPU", "[presets]") {
  struct Gpu {
    const char* name;
    int64_t bytes;  // totalGlobalMem as the driver reports it
    const char* preset;
  };
  const std::vector<Gpu> gpus = {
      {"NVIDIA H100 80GB HBM3", 85029158912, "h100-80g"},
      {"NVIDIA A100-SXM4-80GB", 84974239744, "a100-80g"},
      {"NVIDIA H200", 150110011392, "h200-141g"},
      {"NVIDIA L40S", 47697362944, "l40s-48g"},
      {"NVIDIA GeForce RTX 5090", 34190458880, "rtx5090-32g"},
      {"NVIDIA GeForce RTX 4090", 25386352640, "rtx4090-24g"},
      {"NVIDIA GeForce RTX 3090", 25447170048, "rtx4090-24g"},
      {"NVIDIA GeForce RTX 5080", 16605577216, "rtx5080-16g"},
      {"NVIDIA GeForce RTX 5070 Ti", 16605577216, "rtx5070ti-16g"},
      {"NVIDIA GeForce RTX 4080", 16375808000, "rtx4080-16g"},
      {"NVIDIA GeForce RTX 4070 Ti", 12878086144, "rtx4070-12g"},
      {"NVIDIA GeForce RTX 3060", 12622168064, "rtx3060-12g"},
      {"Tesla T4", 15835660288, "rtx4080-16g"},  // 14.7 GiB: no tier named after it, the 16 GB tier's first
      {"NVIDIA GeForce RTX 4060", 8585216000, "rtx4060-8g"},
  };
  for (const auto& g : gpus) {
    INFO(g.name);
    CHECK(core::suggest_preset(g.bytes, g.name) == std::optional<std::string>(g.preset));
  }
  CHECK_FALSE(core::suggest_preset(4 * kGiB, "NVIDIA GeForce GTX 1650").has_value());
}

TEST_CASE("cli: presets lists the tiers, bad names and files fail with one line", "[presets][cli]") {
  const CliResult list = run_cli("presets");
  REQUIRE(list.status == 0);
  for (const auto& p : core::builtin_presets()) CHECK_THAT(list.out, Contains(p.name));
  CHECK_THAT(list.out, Contains("22.5 GiB") && Contains("bf16") && Contains("GeForce RTX 4090"));
  const auto j = nlohmann::json::parse(run_cli("presets --json").out);
  REQUIRE(j.size() == core::builtin_presets().size());
  CHECK(j.at(0).at("name") == "cpu");
  CHECK(j.back().at("budget_bytes") == core::find_preset("h200-141g").planner.budget_bytes);

  check_one_line(run_cli("plan --preset rtx9090"), 2, "unknown preset 'rtx9090'; the presets are cpu, ");
  check_one_line(run_cli("bench --random --preset rtx9090"), 2, "unknown preset 'rtx9090'");
  check_one_line(run_cli("plan --preset-file /nonexistent/p.json"), 1, "cannot open preset file");
  check_one_line(run_cli("plan --vram 8X"), 2, "--vram: '8X' is not a memory size");
  check_one_line(run_cli("plan --preset cpu --preset-file x.json"), 2, "give one");
  check_one_line(run_cli("plan --tile 0"), 2, "is not a tile size");
  check_one_line(run_cli("plan --size 1280by720"), 2, "--size: expected WIDTHxHEIGHT, got '1280by720'");
  check_one_line(run_cli("bench --random --size 1280x"), 2, "--size: expected WIDTHxHEIGHT, got '1280x'");
  TempDir dir;
  write(dir / "bad.json", R"({"name": "bad", "budget": "8G", "dtype": "int4"})");
  check_one_line(run_cli("plan --preset-file " + quote(dir / "bad.json")), 1, "\"dtype\" must be");
}

TEST_CASE("cli: plan shows the chunk, the tiles and the estimate for a budget", "[presets][cli]") {
  const CliResult r = run_cli("plan --size 1280x720 --op decode --preset h100-80g");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, StartsWith("plan: decode chunk ") && Contains("untiled 160x90 latent px") &&
                        Contains("of 77 GiB budget") && Contains("coefficients: H100"));

  const auto j = nlohmann::json::parse(run_cli("plan --size 1920x1080 --op decode --vram 8G --json").out);
  CHECK(j.at("model") == "wan2.1-vae");
  CHECK(j.at("padded_size") == "1920x1080");
  const auto& plan = j.at("plan");
  CHECK(plan.at("tiled") == true);
  CHECK(plan.at("estimate_bytes").get<int64_t>() <= 8 * kGiB);
  CHECK(plan.at("budget_bytes") == 8 * kGiB);

  // The preset's dtype unless --dtype says otherwise; the cpu preset has no budget.
  const auto cpu = nlohmann::json::parse(run_cli("plan --preset cpu --json").out);
  CHECK(cpu.at("dtype") == "fp32");
  CHECK(cpu.at("plan").at("budget_bytes") == 0);
  const auto fp16 = nlohmann::json::parse(run_cli("plan --preset rtx4090-24g --dtype fp16 --json").out);
  CHECK(fp16.at("dtype") == "fp16");
  CHECK(fp16.at("preset") == "rtx4090-24g");

  // The margin: 720p decode needs about 8.1 GiB untiled; 9.5 GiB holds it with no margin, not with half kept
  // free.
  const auto tight =
      nlohmann::json::parse(run_cli("plan --size 1280x720 --vram 9.5G --vram-margin 0 --json").out);
  CHECK(tight.at("plan").at("tiled") == false);
  CHECK(tight.at("plan").at("relative_time") == 1.0);
  const auto wide =
      nlohmann::json::parse(run_cli("plan --size 1280x720 --vram 9.5G --vram-margin 0.5 --json").out);
  CHECK(wide.at("plan").at("tiled") == true);
  CHECK(wide.at("plan").at("relative_time").get<double>() > 1.0);
  CHECK(wide.at("plan").at("estimate_bytes").get<double>() <= 0.5 * 9.5 * kGiB);
  check_one_line(run_cli("plan --size 1280x720 --vram-margin 1.5"), 2, "--vram-margin");

  check_one_line(run_cli("plan --size 1280x720 --vram 256M"), 1, "does not fit in 256 MiB");
  check_one_line(run_cli("plan --size 1280x720 --vram 256M"), 1, "give --vram ");
}

}  // namespace vaecodec::test
