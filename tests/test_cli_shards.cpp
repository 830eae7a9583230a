// Batches split over a job array's tasks (Note [Shards] in app/shard.h): --shard K/N and auto,
// --skip-existing,
// --manifest, and their usage errors. The real binary on clips made at test time, with the tiny Wan2.1
// weights. The same against a real Slurm: tests/test_slurm_array.sh.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// No array task's variables from the environment the tests run in (CI may itself be a Slurm job).
const std::string kNoTaskEnv =
    "env -u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_COUNT -u SLURM_ARRAY_TASK_MIN -u SLURM_ARRAY_TASK_MAX "
    "-u SLURM_ARRAY_TASK_STEP -u JOB_COMPLETION_INDEX";

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> records;
  for (const std::string& line : lines_of(text)) records.push_back(nlohmann::json::parse(line));
  return records;
}

// Tiny clips a0..a(n-1) of 1 to 3 frames in `folder`.
void make_clips(const std::filesystem::path& folder, int n) {
  std::filesystem::create_directories(folder);
  for (int i = 0; i < n; ++i)
    make_clip(folder / ("a" + std::to_string(i) + ".mp4"),
              "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v " + std::to_string(1 + i % 3) +
                  " -c:v libx264 -pix_fmt yuv420p");
}

std::string stem_of(const nlohmann::json& record) {
  return std::filesystem::path(record.at("input").get<std::string>()).stem().string();
}

// A file's identity and age: unchanged when nothing wrote it again.
std::pair<ino_t, int64_t> stamp(const std::filesystem::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {st.st_ino, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace

TEST_CASE("cli --shard: three tasks sharing a manifest run every input exactly once", "[cli][shard]") {
  ScratchDir dir;
  make_clips(dir / "in", 7);
  const auto out = dir / "out", manifest = dir / "manifest.jsonl";
  const std::string run = quote(VAECODEC_BINARY) + " encode " + quote(dir / "in") + " -o " + quote(out) +
                          weights_arg() + " --manifest " + quote(manifest);
  // Three ways to say which shard, run at once, appending to one manifest: K/N, a Slurm array task (ids
  // 10-12) and a Kubernetes Indexed Job's index.
  const std::string tasks[] = {
      kNoTaskEnv + " " + run + " --shard 0/3",
      kNoTaskEnv +
          " SLURM_ARRAY_TASK_ID=11 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_MAX=12 "
          "SLURM_ARRAY_TASK_STEP=1 SLURM_ARRAY_TASK_COUNT=3 " +
          run + " --shard auto",
      kNoTaskEnv + " JOB_COMPLETION_INDEX=2 " + run + " --shard auto --shard-count 3"};
  std::string all;
  for (int k = 0; k < 3; ++k)
    all += "(" + tasks[k] + " 2>" + quote(dir / ("err" + std::to_string(k))) + "; echo $? >" +
           quote(dir / ("status" + std::to_string(k))) + ") & ";
  REQUIRE(shell(all + "wait") == 0);
  for (int k = 0; k < 3; ++k) {
    INFO("task " << k << ": " << read_text(dir / ("err" + std::to_string(k))));
    CHECK(read_text(dir / ("status" + std::to_string(k))) == "0\n");
  }

  CHECK(list_dir(out) == std::vector<std::string>{"a0.safetensors", "a1.safetensors", "a2.safetensors",
                                                  "a3.safetensors", "a4.safetensors", "a5.safetensors",
                                                  "a6.safetensors"});
  // One whole line per input; input i (in sorted order) fell to shard i mod 3.
  const std::vector<nlohmann::json> records = json_lines(read_text(manifest));
  REQUIRE(records.size() == 7);
  std::set<std::string> seen;
  for (const nlohmann::json& r : records) {
    INFO(r.dump());
    const std::string stem = stem_of(r);
    CHECK(seen.insert(stem).second);
    const int i = std::stoi(stem.substr(1));
    CHECK(r.at("shard") == std::to_string(i % 3) + "/3");
    CHECK(r.at("status") == "ok");
    CHECK(r.at("frames") == 1 + i % 3);
    CHECK(r.at("device") == "cpu");
    CHECK(r.at("error").is_null());
    CHECK(r.at("output") == (out / (stem + ".safetensors")).string());
    CHECK(r.at("seconds").get<double>() > 0);
    CHECK(!r.at("host").get<std::string>().empty());
    CHECK(r.at("command") == "encode");
  }
  CHECK(seen.size() == 7);

  SECTION("the inputs named in another order: the same shards") {
    std::filesystem::create_directories(dir / "in2");
    std::filesystem::rename(dir / "in" / "a5.mp4", dir / "in2" / "a5.mp4");
    std::filesystem::rename(dir / "in" / "a6.mp4", dir / "in2" / "a6.mp4");
    // Sorted by path, in/a0..a4 come before in2/a5, a6 whichever folder is named first.
    const CliResult r = run_cli("encode " + quote(dir / "in2") + " " + quote(dir / "in") + " -o " +
                                    quote(dir / "again") + weights_arg() + " --shard 2/3 --json",
                                kNoTaskEnv);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(list_dir(dir / "again") == std::vector<std::string>{"a2.safetensors", "a5.safetensors"});
  }
  SECTION("more tasks than inputs: an empty shard says so and succeeds") {
    const CliResult r = run_cli(
        "encode " + quote(dir / "in") + " -o " + quote(dir / "empty") + weights_arg() + " --shard 7/8",
        kNoTaskEnv);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.err == "vaecodec: shard 7/8 holds none of the 7 inputs; nothing to do\n");
    CHECK(!std::filesystem::exists(dir / "empty"));
  }
}

TEST_CASE("cli --skip-existing: finished outputs are skipped and reported, failures recorded",
          "[cli][shard]") {
  ScratchDir dir;
  make_clips(dir / "in", 3);
  std::ofstream(dir / "in" / "broken.mp4") << "not a video\n";
  const auto out = dir / "out", manifest = dir / "m.jsonl";
  std::filesystem::create_directories(out);
  REQUIRE(run_cli("encode " + quote(dir / "in" / "a1.mp4") + " -o " + quote(out) + weights_arg()).status ==
          0);
  const auto before = stamp(out / "a1.safetensors");

  const CliResult r = run_cli("encode " + quote(dir / "in") + " -o " + quote(out) + weights_arg() +
                              " --skip-existing --json --manifest " + quote(manifest));
  INFO(r.err);
  CHECK(r.status == 1);  // broken.mp4
  const std::vector<std::string> err = lines_of(r.err);
  REQUIRE(err.size() == 3);
  CHECK(err[0] == "vaecodec: skipped " + (dir / "in" / "a1.mp4").string() + ": " +
                      (out / "a1.safetensors").string() + " exists");
  CHECK_THAT(err[1], StartsWith("vaecodec: error: ") && Contains("broken.mp4"));
  CHECK(err[2] == "vaecodec: error: 1 of 3 inputs failed; the others were written to " + out.string());
  CHECK(stamp(out / "a1.safetensors") == before);
  CHECK(list_dir(out) == std::vector<std::string>{"a0.safetensors", "a1.safetensors", "a2.safetensors"});

  // --json's lines and the manifest's carry the same record, the JSON lines with the run's summary.
  const std::vector<nlohmann::json> printed = json_lines(r.out), recorded = json_lines(read_text(manifest));
  REQUIRE(printed.size() == 4);
  REQUIRE(recorded.size() == 4);
  std::map<std::string, std::string> status;
  for (size_t i = 0; i < 4; ++i) {
    INFO(printed[i].dump() << "\n" << recorded[i].dump());
    for (const char* field : {"input", "output", "status", "frames", "host", "device", "error", "seconds"})
      CHECK(printed[i].at(field) == recorded[i].at(field));
    status[stem_of(recorded[i])] = recorded[i].at("status");
  }
  CHECK(status == std::map<std::string, std::string>{
                      {"a0", "ok"}, {"a1", "skipped"}, {"a2", "ok"}, {"broken", "failed"}});
  CHECK(printed[0].at("device").is_null());    // skipped before any model ran
  CHECK(printed[1].contains("latent_shape"));  // an ok line has the summary too
  for (const nlohmann::json& line : recorded)
    if (line.at("status") == "failed")
      CHECK_THAT(line.at("error").get<std::string>(), Contains("broken.mp4"));

  SECTION("every output there: nothing runs, no model is loaded, success") {
    std::filesystem::remove(dir / "in" / "broken.mp4");
    const CliResult again = run_cli("encode " + quote(dir / "in") + " -o " + quote(out) + " --weights " +
                                    quote(dir / "no-such-weights.pth") + " --skip-existing");
    INFO(again.err);
    CHECK(again.status == 0);
    CHECK(lines_of(again.err).size() == 3);
    CHECK(stamp(out / "a1.safetensors") == before);
  }
}

TEST_CASE("cli --shard and --skip-existing: what cannot run is one line, exit 2, nothing written",
          "[cli][shard]") {
  ScratchDir dir;
  make_clips(dir / "in", 2);
  std::ofstream(dir / "done.mp4") << "an earlier output\n";
  const std::string batch = "roundtrip " + quote(dir / "in") + " -o " + quote(dir / "out") + weights_arg() +
                            " --manifest " + quote(dir / "m.jsonl") + " ";
  auto refused = [&](const std::string& args, const std::string& env, const std::string& message) {
    const CliResult r = run_cli(args, kNoTaskEnv + " " + env);
    INFO(args << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, StartsWith("vaecodec: error: " + message));
    CHECK(lines_of(r.err).size() == 1);
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"done.mp4", "in"});
  };
  refused(batch + "--shard 3/2", "",
          "--shard 3/2: shard 3 does not exist among 2 (shards are numbered 0 to 1)");
  refused(batch + "--shard 0/0", "", "--shard 0/0: the number of shards must be at least 1");
  refused(batch + "--shard 1", "", "--shard 1: expected K/N");
  refused(batch + "--shard auto", "",
          "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm array task) nor JOB_COMPLETION_INDEX");
  refused(batch + "--shard auto",
          "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=9 "
          "SLURM_ARRAY_TASK_COUNT=3",
          "--shard auto (SLURM_ARRAY_TASK_ID=5): the array's 3 task ids are not");
  refused(batch + "--shard auto", "JOB_COMPLETION_INDEX=1",
          "--shard auto: JOB_COMPLETION_INDEX=1 needs --shard-count");
  refused(batch + "--shard 0/2 --shard-count 2", "", "--shard-count goes with --shard auto");
  refused("roundtrip " + quote(dir / "in" / "a0.mp4") + " -o " + quote(dir / "done.mp4") + weights_arg() +
              " --skip-existing",
          "", "--skip-existing skips a batch's finished outputs, but " + (dir / "done.mp4").string());
  refused("roundtrip " + quote(dir / "in" / "a0.mp4") + " -o " + quote(dir / "new.mp4") + weights_arg() +
              " --shard 0/2",
          "", "--shard splits a batch");
}

}  // namespace vaecodec::test
