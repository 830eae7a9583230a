// Hostile use of the command line, as an audit tried it: outputs over the weights, signals, FIFOs, absurd
// sizes, odd file names, playlists posing as videos. The real binary on clips made at test time.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/host_memory.h"
#include "core/planner.h"
#include "core/sizes.h"
#include "io/latent_file.h"
#include "tests/video_test_support.h"

extern char** environ;

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The binary started in the background with `args`, stderr to `err`, core dumps off (SIGQUIT's default
// action dumps one).
pid_t spawn_cli(const std::vector<std::string>& args, const std::string& err) {
  std::string command = "ulimit -c 0; exec " + quote(VAECODEC_BINARY);
  for (const std::string& a : args) command += " " + quote(a);
  const std::vector<std::string> sh = {"/bin/sh", "-c", command};
  std::vector<char*> argv;
  for (const std::string& a : sh) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  return pid;
}

// Waits until `dir` holds `count` entries (the run's temporary file has appeared); false after a minute.
bool wait_for_entries(const std::filesystem::path& dir, size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (list_dir(dir).size() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A clip long enough on the CPU for signals to arrive mid-run.
std::filesystem::path long_clip(const ScratchDir& dir, const std::string& name) {
  return make_clip(dir / name, kTestsrc + "128x96:rate=24 -frames:v 400 -c:v ffv1");
}

}  // namespace

TEST_CASE("cli: an output that is the weights file is refused, also through links", "[cli][reliability]") {
  ScratchDir dir;
  const auto clip = make_clip(dir / "in.mp4", kTestsrc + "64x48:rate=24 -frames:v 3 -c:v libx264");
  const auto weights = dir / "w.safetensors";
  REQUIRE(shell("cp " + quote(tiny_weights()) + " " + quote(weights)) == 0);
  const std::string before = read_text(weights);
  REQUIRE(::symlink(weights.c_str(), (dir / "link.safetensors").c_str()) == 0);
  REQUIRE(::link(weights.c_str(), (dir / "hard.safetensors").c_str()) == 0);
  const std::vector<std::string> files = {"hard.safetensors", "in.mp4", "link.safetensors", "w.safetensors"};
  for (const std::string& name : {"w.safetensors", "link.safetensors", "hard.safetensors"}) {
    INFO(name);
    const CliResult r = run_cli("encode " + quote(clip) + " -o " + quote(dir / name) + " --weights " +
                                quote(weights) + " --quiet");
    check_one_line(r, 2, "is the weights file");
    CHECK(read_text(weights) == before);
    CHECK(list_dir(dir.path()) == files);
  }
  // The same weights named through the environment, and a --metrics file over them.
  check_one_line(run_cli("encode " + quote(clip) + " -o " + quote(weights) + " --quiet",
                         "VAECODEC_WEIGHTS=" + quote(weights)),
                 2, "is the weights file");
  check_one_line(run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out.mp4") + " --metrics " +
                         quote(dir / "link.safetensors") + " --weights " + quote(weights) + " --quiet"),
                 2, "is the weights file");
  CHECK(read_text(weights) == before);
  CHECK(list_dir(dir.path()) == files);
}

TEST_CASE("cli batch: an output that is another input of the batch is refused before anything runs",
          "[cli][reliability]") {
  ScratchDir dir;
  make_clip(dir / "a.mov", kTestsrc + "64x48:rate=24 -frames:v 2 -c:v libx264");
  make_clip(dir / "b.mp4", kTestsrc + "64x48:rate=24 -frames:v 2 -c:v libx264");
  const std::string before = read_text(dir / "b.mp4");
  // a.mov would write <dir>/a.mp4; b.mp4 writes <dir>/b.mp4, its own input.
  const CliResult r = run_cli("roundtrip " + quote(dir / "a.mov") + " " + quote(dir / "b.mp4") + " -o " +
                              quote(dir.path().string() + "/") + weights_arg());
  check_one_line(r, 2, "is the input file");
  CHECK(read_text(dir / "b.mp4") == before);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"a.mov", "b.mp4"});
}

TEST_CASE("cli: an interrupt names the output being written, in a batch too", "[cli][reliability]") {
  // The message used to read the batch's item after the batch was freed.
  ScratchDir in_dir, out_dir;
  long_clip(in_dir, "a.mkv");
  long_clip(in_dir, "b.mkv");
  const auto err = out_dir.path().string() + ".err";
  const pid_t pid = spawn_cli({"roundtrip", in_dir.path().string(), "-o", out_dir.path().string() + "/",
                               "--ext", ".mkv", "--weights", tiny_weights().string(), "--quiet"},
                              err);
  REQUIRE(wait_for_entries(out_dir.path(), 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const std::string text = read_text(err);
  CHECK(text == "vaecodec: roundtrip interrupted; " + (out_dir / "a.mkv").string() + " was not written\n");
  CHECK(list_dir(out_dir.path()).empty());
  ::unlink(err.c_str());
}

TEST_CASE("cli: a second signal, SIGHUP, SIGPIPE or SIGQUIT ends the run without its temporary file",
          "[cli][reliability]") {
  struct Case {
    const char* name;
    int signal;
    bool twice;
  };
  const Case cases[] = {{"second SIGINT", SIGINT, true}, {"second SIGTERM", SIGTERM, true},
                        {"second SIGHUP", SIGHUP, true}, {"second SIGPIPE", SIGPIPE, true},
                        {"one SIGHUP", SIGHUP, false},   {"one SIGQUIT", SIGQUIT, false}};
  for (const Case& c : cases) {
    SECTION(c.name) {
      ScratchDir dir;
      const auto in = long_clip(dir, "in.mkv");
      const auto err = dir.path().string() + ".err";
      const pid_t pid = spawn_cli({"roundtrip", in.string(), "-o", (dir / "out.mkv").string(), "--weights",
                                   tiny_weights().string(), "--quiet"},
                                  err);
      REQUIRE(wait_for_entries(dir.path(), 2));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      kill(pid, c.signal);
      if (c.twice) {
        // Apart, so that the two are not merged into one pending signal.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        kill(pid, c.signal);
      }
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      INFO("status " << status << ", stderr: " << read_text(err));
      // Killed by the signal (the handler's second time, or SIGQUIT), or stopped cleanly by the first one.
      const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == c.signal;
      const bool stopped = WIFEXITED(status) && WEXITSTATUS(status) == 128 + c.signal;
      CHECK((killed || stopped));
      if (c.signal == SIGQUIT) CHECK(killed);
      CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mkv"});
      ::unlink(err.c_str());
    }
  }
}

TEST_CASE("atomic file: the temporary file is listed for signal handlers and fits NAME_MAX",
          "[reliability]") {
  ScratchDir dir;
  const int before = core::temporary_file_count();
  {
    core::AtomicFile file(dir / "out.mp4");
    CHECK(core::temporary_file_count() == before + 1);
    CHECK(std::filesystem::exists(file.path()));
    CHECK(file.path().extension() == ".mp4");
    CHECK(file.path().filename().string().front() == '.');
    // What a signal handler does before the process dies.
    core::remove_temporary_files();
    CHECK_FALSE(std::filesystem::exists(file.path()));
  }
  CHECK(core::temporary_file_count() == before);
  {
    core::AtomicFile file(dir / "kept.txt");
    std::ofstream(file.path()) << "done";
    file.commit();
    CHECK(core::temporary_file_count() == before);
    core::remove_temporary_files();
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"kept.txt"});
  CHECK(read_text(dir / "kept.txt") == "done");

  // A 255-byte name (NAME_MAX) keeps its extension, and a name cut inside a UTF-8 character is cut before it.
  const std::string longest = std::string(251, 'a') + ".mp4";
  const std::string temp = core::temporary_name(longest, "123-4");
  CHECK(temp.size() <= NAME_MAX);
  CHECK(temp.ends_with(".tmp-123-4.mp4"));
  std::string accented = std::string(231, 'a');
  for (int i = 0; i < 10; ++i) accented += "\xc3\xa9";  // e acute, two bytes each
  accented += ".mkv";
  const std::string cut = core::temporary_name(accented, "1-1");
  CHECK(cut.size() <= NAME_MAX);
  REQUIRE(cut.ends_with(".tmp-1-1.mkv"));
  const std::string stem = cut.substr(1, cut.size() - 1 - std::string(".tmp-1-1.mkv").size());
  CHECK(stem.size() == 241);  // 242 bytes of room, cut back to the start of the sixth e
  CHECK(nlohmann::json::accept("\"" + stem + "\""));  // still valid UTF-8
}

TEST_CASE("cli: a FIFO as input, weights or latents is refused at once instead of waiting for a writer",
          "[cli][reliability]") {
  ScratchDir dir;
  const auto clip = make_clip(dir / "in.mp4", kTestsrc + "64x48:rate=24 -frames:v 3 -c:v libx264");
  for (const std::string name : {"fifo.mp4", "fifo.safetensors"})
    REQUIRE(::mkfifo((dir / name).c_str(), 0600) == 0);
  const std::string guard = "timeout -s KILL 60";  // a hang fails the test instead of stopping the suite
  SECTION("input video") {
    check_one_line(
        run_cli("roundtrip " + quote(dir / "fifo.mp4") + " -o " + quote(dir / "out.mp4") + weights_arg(),
                guard),
        1, "is a FIFO, not a regular file");
  }
  SECTION("weights") {
    check_one_line(run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out.mp4") + " --weights " +
                               quote(dir / "fifo.safetensors") + " --quiet",
                           guard),
                   1, "is a FIFO, not a regular file");
  }
  SECTION("latents") {
    check_one_line(
        run_cli("decode " + quote(dir / "fifo.safetensors") + " -o " + quote(dir / "out.mp4") + weights_arg(),
                guard),
        1, "is a FIFO, not a regular file");
  }
  SECTION("inspect") {
    check_one_line(run_cli("inspect " + quote(dir / "fifo.safetensors"), guard), 1, "is a FIFO");
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"fifo.mp4", "fifo.safetensors", "in.mp4"});
}

TEST_CASE("cli: absurd chunk lengths, frame sizes and run counts are refused up front",
          "[cli][reliability]") {
  ScratchDir dir;
  const std::string guard = "timeout -s KILL 60";
  const auto clip = make_clip(dir / "in.mp4", kTestsrc + "64x48:rate=24 -frames:v 3 -c:v libx264");
  SECTION("--chunk past the limit: a usage error") {
    for (const std::string chunk : {"9223372036854775807", "1025", "0"}) {
      const CliResult r = run_cli("encode " + quote(clip) + " -o " + quote(dir / "z.safetensors") +
                                      " --chunk " + chunk + weights_arg(),
                                  guard);
      check_one_line(r, 2, "--chunk");
    }
    check_one_line(run_cli("plan --chunk 9223372036854775807", guard), 2, "--chunk");
  }
  SECTION("plan --size past 16384 a side") {
    check_one_line(run_cli("plan --size 99999999x99999999", guard), 2, "at most 16384");
    check_one_line(run_cli("plan --size 16385x64", guard), 2, "at most 16384");
    CHECK(run_cli("plan --size 16384x64", guard).status == 0);
    // 16384 a side each way is a size the planner takes; a file run of it needs more host memory than a
    // 24 GiB machine has (its reader's and writer's frames, Note [A file run's host memory]), and says so.
    const CliResult square = run_cli("plan --size 16384x16384", guard);
    if (square.status != 0) check_one_line(square, 1, "of host memory");
  }
  SECTION("a preset file's max_chunk past the limit") {
    std::ofstream(dir / "p.json")
        << R"({"name": "huge", "budget": "8G", "engine": {"max_chunk": 9000000000000000000}})";
    check_one_line(run_cli("plan --preset-file " + quote(dir / "p.json"), guard), 1, "at most 1024");
    std::ofstream(dir / "p.json")
        << R"({"name": "wide", "budget": "8G", "engine": {"tile_overlap": 9000000000000000000}})";
    check_one_line(run_cli("plan --preset-file " + quote(dir / "p.json"), guard), 1, "tile overlap");
  }
  SECTION("bench --runs 0 and -1, --frames -3: usage errors") {
    for (const std::string runs : {"0", "-1"})
      check_one_line(run_cli("bench --random --device cpu --size 64x48 --frames 5 --runs " + runs, guard), 2,
                     "--runs");
    check_one_line(run_cli("bench --random --device cpu --size 64x48 --frames -3", guard), 2, "--frames");
  }
  const std::vector<std::string> left = list_dir(dir.path());
  CHECK((left == std::vector<std::string>{"in.mp4"} || left == std::vector<std::string>{"in.mp4", "p.json"}));
}

TEST_CASE("cli: a CPU run whose plan exceeds the host's memory is refused, naming both numbers",
          "[cli][reliability]") {
  ScratchDir dir;
  const std::string guard = "timeout -s KILL 120";
  const auto clip =
      make_clip(dir / "big.mkv", "-f lavfi -i color=c=gray:size=4096x4096:rate=24 -frames:v 1 -c:v ffv1");
  // The plan's own estimate for this frame, as the run makes it.
  const CliResult planned = run_cli(
      "plan --size 4096x4096 --op roundtrip --device cpu --dtype fp32 --json "
      "--weights " +
      quote(tiny_weights()));
  REQUIRE(planned.status == 0);
  const int64_t needed = nlohmann::json::parse(planned.out).at("plan").at("estimate_bytes").get<int64_t>();
  REQUIRE(needed > 0);
  const std::string run = "roundtrip " + quote(clip) + " -o " + quote(dir / "out.mkv") +
                          " --device cpu --dtype fp32" + weights_arg();
  // On every host: the host's memory stood in for by half of what the plan needs (VAECODEC_TEST_HOST_MEMORY,
  // core/host_memory.h).
  const int64_t small = needed / 2;
  const CliResult refused = run_cli(run, "VAECODEC_TEST_HOST_MEMORY=" + std::to_string(small) + " " + guard);
  check_one_line(refused, 1, "on the CPU needs about " + core::format_size(needed));
  CHECK_THAT(refused.err, Contains(core::format_size(small) + " of memory this host has"));
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"big.mkv"});
  // On this host as it is: refused where the plan exceeds its memory, run where the plan fits.
  const int64_t host = core::host_memory_bytes();
  INFO("plan " << needed << " bytes, host " << host << " bytes");
  const CliResult r = run_cli(run, guard);
  if (needed > host) {
    check_one_line(r, 1, "on the CPU needs about " + core::format_size(needed));
    CHECK_THAT(r.err, Contains(core::format_size(host) + " of memory this host has"));
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"big.mkv"});
  } else {
    CHECK(r.status == 0);
  }
}

TEST_CASE("cli: output names that are not UTF-8, and names of up to 255 bytes, are written",
          "[cli][reliability]") {
  ScratchDir dir;
  const std::string odd = "clip-\xff\xfe";
  const auto clip = make_clip(dir / (odd + ".mp4"), kTestsrc + "64x48:rate=24 -frames:v 5 -c:v libx264");
  const auto latents = dir / ("z-\xff.safetensors");
  const CliResult enc =
      run_cli("encode " + quote(clip) + " -o " + quote(latents) + weights_arg() + " --json");
  INFO("stderr: " << enc.err);
  REQUIRE(enc.status == 0);
  const auto summary = nlohmann::json::parse(enc.out);
  CHECK(summary.at("frames") == 5);
  CHECK(summary.at("output").get<std::string>().find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD
  const io::LatentFile file = io::read_latents(latents);
  CHECK(file.meta.source == "clip-\xef\xbf\xbd\xef\xbf\xbd.mp4");

  const auto video = dir / ("v-\xfe.mp4");
  const CliResult dec =
      run_cli("decode " + quote(latents) + " -o " + quote(video) + weights_arg() + " --json");
  INFO("stderr: " << dec.err);
  REQUIRE(dec.status == 0);
  CHECK(nlohmann::json::parse(dec.out).at("frames") == 5);
  CHECK(probe(video).frames() == 5);

  // A batch's failure line in JSON, for an input whose name is not UTF-8.
  std::ofstream(dir / "bad-\xff.mp4") << "not a video";
  const CliResult batch = run_cli("encode " + quote(dir / "bad-\xff.mp4") + " " + quote(clip) + " -o " +
                                  quote(dir / "out") + "/" + weights_arg() + " --json");
  CHECK(batch.status == 1);
  std::istringstream lines(batch.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) CHECK(nlohmann::json::accept(line));
  CHECK(count == 2);
  CHECK_THAT(batch.out, Contains("\"error\""));

  // The longest names a file system takes: 255 bytes.
  const std::string long_latents = std::string(255 - 12, 'l') + ".safetensors";
  const std::string long_video = std::string(255 - 4, 'v') + ".mp4";
  REQUIRE(run_cli("encode " + quote(clip) + " -o " + quote(dir / long_latents) + weights_arg()).status == 0);
  const CliResult rt = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / long_video) + weights_arg() +
                               " --metrics " + quote(dir / (std::string(255 - 5, 'm') + ".json")));
  INFO("stderr: " << rt.err);
  REQUIRE(rt.status == 0);
  CHECK(probe(dir / long_video).frames() == 5);
  for (const std::string& name : list_dir(dir.path())) CHECK(name.find(".tmp-") == std::string::npos);
}

TEST_CASE("cli: a playlist or file list posing as a video is refused, not followed", "[cli][reliability]") {
  ScratchDir dir;
  make_clip(dir / "secret.ts", kTestsrc + "64x48:rate=24 -frames:v 3 -c:v libx264");
  std::ofstream(dir / "playlist.mp4") << "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n"
                                         "#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:1.0,\nsecret.ts\n#EXT-X-ENDLIST\n";
  std::ofstream(dir / "list.mp4") << "ffconcat version 1.0\nfile secret.ts\n";
  for (const std::string name : {"playlist.mp4", "list.mp4"}) {
    INFO(name);
    // FFmpeg itself follows it: the file is a working exploit on this FFmpeg.
    REQUIRE(shell("ffprobe -v quiet -count_frames -show_entries stream=nb_read_frames " + quote(dir / name) +
                  " | grep -q nb_read_frames=3") == 0);
    const CliResult r =
        run_cli("roundtrip " + quote(dir / name) + " -o " + quote(dir / "out.mp4") + weights_arg());
    check_one_line(r, 1, "names other files to read");
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"list.mp4", "playlist.mp4", "secret.ts"});
}

}  // namespace vaecodec::test

namespace vaecodec::test {

TEST_CASE("cli decode: an inconsistent latent record is reported as the file's, not the encoder's",
          "[cli][reliability]") {
  ScratchDir dir;
  io::LatentMeta good;
  good.family = "wan2.1-vae";
  good.width = 64;
  good.height = 48;
  good.frames = 5;
  good.frame_rate = io::LatentMeta::Rational{24, 1};
  good.time_base = io::LatentMeta::Rational{1, 24};
  good.pts = {0, 1, 2, 3, 4};
  const torch::Tensor latents = torch::randn({1, 16, 2, 6, 8});
  struct Case {
    const char* name;
    std::function<void(io::LatentMeta&)> damage;
    const char* what;
  };
  const Case cases[] = {
      {"time base 0",
       [](io::LatentMeta& m) {
         m.time_base = io::LatentMeta::Rational{0, 1};
       },
       "time base 0/1"},
      {"negative time base",
       [](io::LatentMeta& m) {
         m.time_base = io::LatentMeta::Rational{-1, 24};
       },
       "time base -1/24"},
      {"negative frame rate",
       [](io::LatentMeta& m) {
         m.frame_rate = io::LatentMeta::Rational{-24, 1};
       },
       "frame rate -24/1"},
      {"pts going back",
       [](io::LatentMeta& m) {
         m.pts = {0, 1, 2, 2, 1};
       },
       "the pts of frame 3 (2)"},
      {"pts far out of range",
       [](io::LatentMeta& m) {
         m.pts = {std::numeric_limits<int64_t>::min() + 1, 0, 1, 2, std::numeric_limits<int64_t>::max()};
       },
       "the pts of frame 0"},
  };
  REQUIRE(run_cli("decode " + quote([&] {
                    io::write_latents(dir / "good.safetensors", latents, good);
                    return dir / "good.safetensors";
                  }()) +
                  " -o " + quote(dir / "good.mp4") + weights_arg())
              .status == 0);
  for (const Case& c : cases) {
    INFO(c.name);
    io::LatentMeta meta = good;
    c.damage(meta);
    io::write_latents(dir / "bad.safetensors", latents, meta);
    const CliResult r =
        run_cli("decode " + quote(dir / "bad.safetensors") + " -o " + quote(dir / "out.mp4") + weights_arg());
    check_one_line(r, 1, "bad.safetensors: the latent file's record is inconsistent: " + std::string(c.what));
    CHECK(r.err.find("encoder") == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "out.mp4"));
  }
}

}  // namespace vaecodec::test
