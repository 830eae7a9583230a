// encode --dataset-config (Note [musubi-tuner's dataset rules], Note [Dataset batches]): a musubi-tuner
// dataset config with every frame extraction mode, buckets on and off, several target lengths, a source
// frame rate, JSONL and folder datasets, image datasets and control clips and images, run on the CPU with the
// tiny Wan2.1 weights. tests/musubi_dataset_check.py derives the files the trainer's caching would make from
// the config and what the test generated (its own code, from the trainer's rules) and checks each file's
// tensors, shapes, dtype and metadata.

#include <fstream>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "io/latent_file.h"
#include "io/musubi_dataset.h"
#include "tests/video_test_support.h"

namespace vaecodec::io {
// For Catch's messages (found by argument-dependent lookup).
inline std::ostream& operator<<(std::ostream& out, const FrameSize& size) {
  return out << size.width << "x" << size.height;
}
}  // namespace vaecodec::io

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A clip of `frames` frames of FFmpeg's test picture, and its caption (the trainer reads one per input).
void clip(const std::filesystem::path& path, int width, int height, int rate, int frames, const char* codec) {
  make_clip(path, kTestsrc + std::to_string(width) + "x" + std::to_string(height) +
                      ":rate=" + std::to_string(rate) + " -frames:v " + std::to_string(frames) +
                      " -pix_fmt yuv420p -c:v " + codec);
  write_file(path.parent_path() / (path.stem().string() + ".txt"), "a test picture");
}

void image(const std::filesystem::path& path, int width, int height) {
  make_clip(path, kTestsrc + std::to_string(width) + "x" + std::to_string(height) + " -frames:v 1");
}

// The generated dataset: its config, and what the checker needs to know about each input.
struct Dataset {
  ScratchDir root;
  std::filesystem::path config;
  nlohmann::json facts;

  std::filesystem::path operator/(const std::string& name) const { return root / name; }
  void fact(const std::filesystem::path& path, int frames, int width, int height) {
    facts[path.string()] = {{"frames", frames}, {"width", width}, {"height", height}};
  }
};

void make_dataset(Dataset& d) {
  for (const char* dir : {"clips1", "ctrl1", "clips3", "imgs", "ctrlimg"})
    std::filesystem::create_directories(d / dir);
  clip(d / "clips1" / "walk.mp4", 80, 48, 24, 20, "libx264");  // bucket 64x48, centre crop
  clip(d / "clips1" / "turn.mkv", 40, 60, 16, 11, "ffv1");     // bucket 48x64, Lanczos up, crop
  make_clip(d / "ctrl1" / "walk.mp4",
            kTestsrc + "80x48:rate=24 -frames:v 20 -vf negate -pix_fmt yuv420p -c:v libx264");
  // A control clip shorter than its clip: padded with its last frame.
  make_clip(d / "ctrl1" / "turn.mov",
            kTestsrc + "40x60:rate=16 -frames:v 6 -vf hflip -pix_fmt yuv420p -c:v libx264");
  d.fact(d / "clips1" / "walk.mp4", 20, 80, 48);
  d.fact(d / "clips1" / "turn.mkv", 11, 40, 60);

  clip(d / "pan.mp4", 64, 48, 30, 30, "libx264");  // 30 fps in, 16 frames at Wan's 16 fps
  d.fact(d / "pan.mp4", 30, 64, 48);
  write_file(d / "pan.jsonl",
             nlohmann::json({{"video_path", (d / "pan.mp4").string()}, {"caption", "x"}}).dump() + "\n");

  clip(d / "clips3" / "a.mp4", 48, 64, 24, 19, "libx264");
  d.fact(d / "clips3" / "a.mp4", 19, 48, 64);
  write_file(d / "clips3" / "broken.mp4", "this is not a video");
  write_file(d / "clips3" / "broken.txt", "a caption");
  d.facts[(d / "clips3" / "broken.mp4").string()] = {{"broken", true}};

  image(d / "imgs" / "big.png", 100, 60);   // above the bucket area: by aspect ratio, 64x48
  image(d / "imgs" / "small.png", 40, 30);  // below it, no upscale: 32x16
  image(d / "imgs" / "nocap.png", 40, 30);  // no caption: not in the trainer's dataset
  write_file(d / "imgs" / "big.txt", "a test picture");
  write_file(d / "imgs" / "small.txt", "a test picture");
  d.fact(d / "imgs" / "big.png", 1, 100, 60);
  d.fact(d / "imgs" / "small.png", 1, 40, 30);
  image(d / "ctrlimg" / "big.png", 100, 60);
  image(d / "ctrlimg" / "big_2.png", 20, 20);  // the image without a suffix is taken first
  image(d / "ctrlimg" / "small_1.png", 40, 30);

  const auto at = [&](const std::string& name) { return "'" + (d / name).string() + "'"; };
  d.config = d / "dataset.toml";
  write_file(d.config,
             "[general]\nresolution = [64, 48]\ncaption_extension = \".txt\"\nenable_bucket = true\n"
             "batch_size = 2\n\n"
             // head, two lengths and one rounded down (15 -> 13), control clips
             "[[datasets]]\nvideo_directory = " +
                 at("clips1") + "\ncontrol_directory = " + at("ctrl1") +
                 "\ncache_directory = " + at("cache1") +
                 "\ntarget_frames = [1, 9, 15]\n"
                 "frame_extraction = \"head\"\n\n"
                 // chunk from a JSONL file, a source frame rate, buckets off
                 "[[datasets]]\nvideo_jsonl_file = " +
                 at("pan.jsonl") + "\ncache_directory = " + at("cache2") +
                 "\nenable_bucket = false\ntarget_frames = [5, 9]\nframe_extraction = \"chunk\"\n"
                 "source_fps = 30.0\n\n"
                 "[[datasets]]\nvideo_directory = " +
                 at("clips3") + "\ncache_directory = " + at("cache3s") +
                 "\ntarget_frames = [9]\nframe_extraction = \"slide\"\nframe_stride = 5\n\n"
                 "[[datasets]]\nvideo_directory = " +
                 at("clips3") + "\ncache_directory = " + at("cache3u") +
                 "\ntarget_frames = [5]\nframe_extraction = \"uniform\"\nframe_sample = 3\nfoo = 1\n\n"
                 "[[datasets]]\nvideo_directory = " +
                 at("clips3") + "\ncache_directory = " + at("cache3f") +
                 "\nframe_extraction = \"full\"\nmax_frames = 11\nfoo = 2\n\n"
                 // images: buckets with no upscale, and buckets off with control images
                 "[[datasets]]\nimage_directory = " +
                 at("imgs") + "\ncache_directory = " + at("cache4") +
                 "\nbucket_no_upscale = true\n\n"
                 "[[datasets]]\nimage_directory = " +
                 at("imgs") + "\ncache_directory = " + at("cache5") +
                 "\nenable_bucket = false\nresolution = 32\ncontrol_directory = " + at("ctrlimg") +
                 "\n\n"
                 // what vaecodec cannot make: left out with one line
                 "[[datasets]]\nimage_directory = " +
                 at("imgs") + "\ncache_directory = " + at("cache6") + "\nmultiple_target = true\n");
  write_file(d / "facts.json", d.facts.dump());
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  for (const std::string& line : lines_of(text)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The cache files under the dataset's folders, as "cacheN/name".
std::set<std::string> written(const Dataset& d) {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(d.root.path()))
    if (entry.path().string().ends_with("_wan.safetensors"))
      files.insert(entry.path().parent_path().filename().string() + "/" + entry.path().filename().string());
  return files;
}

}  // namespace

TEST_CASE("musubi dataset rules: buckets, resize filters, frame-rate drops, windows", "[musubi]") {
  const io::MusubiBuckets buckets({64, 48}, /*enable_bucket=*/true, /*no_upscale=*/false);
  const std::vector<io::FrameSize> expected = {{16, 192}, {32, 96}, {48, 64}, {64, 48}, {96, 32}, {192, 16}};
  CHECK(buckets.candidates() == expected);
  CHECK(buckets.select({1280, 720}) == io::FrameSize{64, 48});
  CHECK(buckets.select({720, 1280}) == io::FrameSize{48, 64});
  CHECK(io::MusubiBuckets({64, 48}, true, true).select({40, 30}) == io::FrameSize{32, 16});
  CHECK(io::MusubiBuckets({64, 48}, false, true).select({40, 30}) == io::FrameSize{64, 48});
  CHECK(io::musubi_resize_filter({80, 48}, {64, 48}) == "crop=64:48:8:0:exact=1");
  CHECK(io::musubi_resize_filter({40, 60}, {48, 64}) == "scale=48:72:flags=lanczos,crop=48:64:0:4:exact=1");
  CHECK(io::musubi_resize_filter({1280, 720}, {960, 544}) ==
        "scale=967:544:flags=area,crop=960:544:3:0:exact=1");
  CHECK(io::musubi_resize_filter({64, 48}, {64, 48}).empty());
  CHECK(io::musubi_target_frames({15, 1, 9, 10}) == std::vector<int64_t>{1, 9, 13});
  // 16 / 30: 30 frames keep 16, in a 5 s clip 80; 10 fps (each index skips ahead) keeps all.
  CHECK(io::musubi_converted_frames(30, 30.0, std::nullopt) == 16);
  CHECK(io::musubi_converted_frames(150, 30.0, std::nullopt) == 80);
  CHECK(io::musubi_converted_frames(150, 30.0, 45) == 45);
  CHECK(io::musubi_converted_frames(100, 10.0, std::nullopt) == 100);
  CHECK(io::musubi_converted_frames(100, 10.0, 81) == 51);
  io::MusubiDataset d;
  d.target_frames = {5};
  d.frame_extraction = "uniform";
  d.frame_sample = 3;
  CHECK(io::musubi_windows(d, 19).size() == 3);
  CHECK(io::musubi_windows(d, 19)[1].start == 7);
  d.frame_sample = 1;  // uniform with one sample is head
  CHECK(io::musubi_extraction(d) == "head");
}

TEST_CASE(
    "cli encode --dataset-config: every cache musubi-tuner's caching makes, and a broken clip fails alone",
    "[cli][musubi]") {
  Dataset d;
  make_dataset(d);
  const std::string config = " --dataset-config " + quote(d.config);

  // --dry-run: the files, without a model.
  const CliResult dry = run_cli("encode" + config + " --dry-run --json");
  INFO(dry.err);
  CHECK(dry.status == 1);  // the broken clip cannot be cached
  std::set<std::string> planned;
  int failing = 0;
  for (const nlohmann::json& j : json_lines(dry.out)) {
    if (j.contains("error")) {
      CHECK_THAT(j["error"].get<std::string>(), Contains("broken.mp4"));
      ++failing;
      continue;
    }
    const std::filesystem::path file = j["cache_file"].get<std::string>();
    planned.insert(file.parent_path().filename().string() + "/" + file.filename().string());
    if (file.filename() == "walk_00000-009_0064x0048_wan.safetensors") {
      CHECK(j["item_key"] == "walk_00000-009");
      CHECK(j["bucket"] == std::vector<int>{64, 48});
      CHECK(j["frames"] == 9);
      CHECK(j["vf"] == "trim=start_frame=0:end_frame=9,crop=64:48:8:0:exact=1");
      CHECK(j["control"] == (d / "ctrl1" / "walk.mp4").string());
    }
  }
  CHECK(failing == 3);  // in each of the three datasets that read clips3/
  CHECK(planned.size() == 20);
  // Unknown keys once each, the dataset asking for what vaecodec cannot make in one line.
  CHECK(std::count(dry.err.begin(), dry.err.end(), '\n') == 4);
  CHECK_THAT(dry.err,
             Contains("[[datasets]] 3 has the key 'foo', which musubi-tuner's dataset config does not know"));
  CHECK_THAT(dry.err, Contains("[[datasets]] 7 is left out: multiple_target"));
  CHECK_THAT(dry.err, Contains("20 cache files from 6 inputs, 0 of them present; nothing was run"));
  CHECK(written(d).empty());

  // The shards of an array together list every file once.
  std::set<std::string> sharded;
  size_t lines = 0;
  for (const char* shard : {"0/3", "1/3", "2/3"})
    for (const nlohmann::json& j :
         json_lines(run_cli("encode" + config + " --dry-run --json --shard " + shard).out))
      if (j.contains("cache_file")) {
        const std::filesystem::path file = j["cache_file"].get<std::string>();
        sharded.insert(file.parent_path().filename().string() + "/" + file.filename().string());
        ++lines;
      }
  CHECK(sharded == planned);
  CHECK(lines == planned.size());

  // The run: every file planned, the broken clip's three items reported and the rest written.
  const auto manifest = d / "manifest.jsonl";
  const CliResult r = run_cli("encode" + config + " --manifest " + quote(manifest) + weights_arg());
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2 + 3 + 1);  // config warnings, errors, summary
  CHECK_THAT(r.err,
             Contains("vaecodec: error: cannot open " + (d / "clips3" / "broken.mp4").string() + ": "));
  CHECK_THAT(r.err,
             Contains("3 of 23 inputs failed; the others were written to the datasets' cache directories"));
  CHECK(written(d) == planned);
  int failed = 0, ok = 0;
  for (const nlohmann::json& j : json_lines(read_text(manifest))) {
    failed += j["status"] == "failed";
    ok += j["status"] == "ok";
  }
  CHECK(failed == 3);
  CHECK(ok == 20);

  const ScratchDir logs;
  const std::string script = (data_dir().parent_path() / "musubi_dataset_check.py").string();
  const int check = shell(quote(VAECODEC_PYTHON) + " " + quote(script) + " " + quote(d.config) + " " +
                          quote(d / "facts.json") + " >" + quote(logs / "out") + " 2>" + quote(logs / "err"));
  INFO("checker: " << read_text(logs / "err"));
  REQUIRE(check == 0);
  CHECK(lines_of(read_text(logs / "out")).size() == 20);

  // A window's latents are vaecodec's own of the same frames, found here by hand: pan.mp4's frames at
  // 16 fps are those where int(i * 16/30), summed up, moves on; the chunk from 5 takes the 6th to 10th.
  std::vector<int> kept;
  double sum = 0;
  for (int i = 0, previous = -1; i < 30; ++i, sum += 16.0 / 30.0)
    if (static_cast<int>(sum) != previous) previous = static_cast<int>(sum), kept.push_back(i);
  std::string pick;
  for (int k = 5; k < 10; ++k) pick += (pick.empty() ? "" : "+") + ("eq(n," + std::to_string(kept[k]) + ")");
  const auto own = d / "own.safetensors";
  const CliResult mine = run_cli("encode " + quote(d / "pan.mp4") + " -o " + quote(own) + " --vf \"select='" +
                                 pick + "'\"" + weights_arg());
  INFO(mine.err);
  REQUIRE(mine.status == 0);
  const torch::Tensor cached = core::SafetensorsFile(d / "cache2" / "pan_00005-005_0064x0048_wan.safetensors")
                                   .load("latents_2x6x8_bfloat16");
  CHECK(torch::equal(cached, io::read_latents(own).latents[0].to(torch::kBFloat16)));

  // The padded control: turn.mov's 6 frames and its last one 3 times more, flipped back, scaled and cropped.
  const CliResult control = run_cli(
      "encode " + quote(d / "ctrl1" / "turn.mov") + " -o " + quote(own) + " -y" +
      " --vf tpad=stop_mode=clone:stop=3,scale=48:72:flags=lanczos,crop=48:64:0:4:exact=1" + weights_arg());
  REQUIRE(control.status == 0);
  const core::SafetensorsFile turn(d / "cache1" / "turn_00000-009_0048x0064_wan.safetensors");
  CHECK(torch::equal(turn.load("latents_control_3x8x6_bfloat16"),
                     io::read_latents(own).latents[0].to(torch::kBFloat16)));
  CHECK(!torch::equal(turn.load("latents_control_3x8x6_bfloat16"), turn.load("latents_3x8x6_bfloat16")));

  // Again with --skip-existing: every file is skipped, none is run.
  const CliResult again = run_cli("encode" + config + " --skip-existing --json" + weights_arg());
  int skipped = 0;
  for (const nlohmann::json& j : json_lines(again.out)) skipped += j.value("status", "") == "skipped";
  CHECK(skipped == 20);
}

TEST_CASE("cli encode --dataset-config: configs that cannot be used are one line", "[cli][musubi]") {
  ScratchDir dir;
  const auto config = dir / "dataset.toml";
  const auto refused = [&](const std::string& toml, const std::string& extra, const std::string& what) {
    write_file(config, toml);
    check_one_line(run_cli("encode --dataset-config " + quote(config) + extra + weights_arg()), 2, what);
  };
  refused("[general\n", "", "dataset.toml:1: ");
  refused("[[datasets]]\nvideo_directory = 'a'\ntarget_frames = 9\n", "",
          "target_frames must be a list of integers");
  refused("[[datasets]]\nvideo_directory = 'a'\n[[datasets]]\nvideo_directory = 'b'\ncache_directory = 'a'\n",
          "", "[[datasets]] 0 and 1 share the cache_directory a");
  refused("[[datasets]]\nvideo_jsonl_file = 'a.jsonl'\n", "", "needs a cache_directory");
  refused("[[datasets]]\nvideo_directory = 'a'\nframe_extraction = 'tail'\n", "",
          "frame_extraction \"tail\"");
  refused("[[datasets]]\nvideo_directory = 'a'\n", " --vf scale=64:48",
          "--vf does not go with --dataset-config");
  check_one_line(run_cli("encode " + quote(config) + " -o x --dry-run" + weights_arg()), 2,
                 "--dry-run: lists the caches of a --dataset-config");
}

}  // namespace vaecodec::test
