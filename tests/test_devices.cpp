// Batches over several devices (Note [Batches over devices] in app/device_batch.h) and --devices
// (Note [Several devices] in app/devices.h). The scheduler runs in this process on two workers that are both
// the CPU (the CLI refuses that), over clips made at test time, with the tiny Wan2.1 weights; the CLI's
// refusals are checked on the real binary.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/device_batch.h"
#include "app/devices.h"
#include "core/error.h"
#include "core/split/places.h"
#include "io/interrupt.h"
#include "io/probe.h"
#include "tests/gpu_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

std::string bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> records;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

// Clips of different lengths (two of the same length), and one that is not a video.
struct Clips {
  ScratchDir dir;
  std::vector<app::BatchItem> items(const std::filesystem::path& out, const std::string& ext) const {
    std::vector<app::BatchItem> result;
    for (const std::string& name : {"b.mp4", "broken.mp4", "c.mp4", "d.mp4", "e.mp4"})
      result.push_back({dir / name, out / (std::filesystem::path(name).stem().string() + ext)});
    return result;
  }
  Clips() {
    const std::pair<const char*, int> clips[] = {{"b.mp4", 3}, {"c.mp4", 9}, {"d.mp4", 5}, {"e.mp4", 9}};
    for (const auto& [name, frames] : clips)
      make_clip(dir / name, "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v " + std::to_string(frames) +
                                " -c:v libx264 -pix_fmt yuv420p");
    std::ofstream(dir / "broken.mp4") << "this is not a video";
  }
};

app::RunOptions batch_options(const std::filesystem::path& out) {
  app::RunOptions options;
  options.output = out.string();
  options.weights = tiny_weights().string();
  options.device = "cpu";
  options.quiet = true;
  options.json = true;
  return options;
}

// A batch run in this process on `devices`, its --json lines captured.
struct BatchRun {
  app::DeviceBatchResult result;
  std::vector<nlohmann::json> lines;     // --json, on stdout
  std::vector<nlohmann::json> manifest;  // --manifest
};

BatchRun run_batch(app::RunCommand command, const std::vector<app::BatchItem>& items,
                   const std::filesystem::path& out, const std::filesystem::path& manifest,
                   const std::vector<torch::Device>& devices) {
  const app::RunOptions options = batch_options(out);
  std::ostringstream captured;
  std::streambuf* const stdout_buffer = std::cout.rdbuf(captured.rdbuf());
  BatchRun run;
  try {
    app::RecordLog log({true, manifest.string(), "roundtrip", "", {"vaecodec", "test"}});
    run.result = app::run_on_devices(command, options, items, devices, log);
  } catch (...) {
    std::cout.rdbuf(stdout_buffer);
    throw;
  }
  std::cout.rdbuf(stdout_buffer);
  run.lines = json_lines(captured.str());
  run.manifest = json_lines(read_text(manifest));
  return run;
}

std::string stem(const nlohmann::json& record) {
  return std::filesystem::path(record.at("input").get<std::string>()).stem().string();
}

}  // namespace

TEST_CASE("devices: --devices is parsed against the devices that exist", "[devices]") {
  using app::parse_devices;
  auto cuda = [](int i) { return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)); };
  CHECK(parse_devices("all", 3) == std::vector<torch::Device>{cuda(0), cuda(1), cuda(2)});
  CHECK(parse_devices("1,0", 2) == std::vector<torch::Device>{cuda(1), cuda(0)});
  CHECK(parse_devices("cuda:0,cuda:2", 3) == std::vector<torch::Device>{cuda(0), cuda(2)});
  CHECK(parse_devices("2", 3) == std::vector<torch::Device>{cuda(2)});

  const std::string here = "the CUDA devices here are cuda:0, cuda:1";
  auto refused = [](const std::string& text, int64_t count) {
    try {
      parse_devices(text, count);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused("0,2", 2) == "--devices 0,2: cuda:2 does not exist; " + here);
  CHECK(refused("cuda:1,1", 2) ==
        "--devices cuda:1,1: cuda:1 is named twice (one model and one worker per device); " + here);
  CHECK_THAT(refused("cpu", 2), StartsWith("--devices cpu: the CPU is not a device to spread over"));
  CHECK_THAT(refused("0,", 2),
             StartsWith("--devices 0,: '' is not a device (write all, 0,1 or cuda:0,cuda:2)"));
  CHECK_THAT(refused("gpu0", 2), StartsWith("--devices gpu0: 'gpu0' is not a device"));
  CHECK_THAT(refused("-1", 2), Contains(here));
  CHECK(refused("all", 0) ==
        "--devices all: there are no GPUs to spread the work over: there is no CUDA device here (only the "
        "CPU); run on the CPU with --device cpu");
  CHECK(refused("0", 1) == "accepted");
  CHECK(refused("1", 1) == "--devices 1: cuda:1 does not exist; the CUDA device here is cuda:0");

  // --device agrees with --devices unless it names the CPU or a GPU outside the list.
  const std::vector<torch::Device> two{cuda(0), cuda(1)};
  CHECK_NOTHROW(app::check_device_agrees("auto", two, 2));
  CHECK_NOTHROW(app::check_device_agrees("cuda", two, 2));
  CHECK_NOTHROW(app::check_device_agrees("cuda:1", two, 2));
  CHECK_THROWS_AS(app::check_device_agrees("cpu", two, 3), UsageError);
  CHECK_THROWS_WITH(app::check_device_agrees("cuda:2", two, 3),
                    "--device cuda:2 and --devices cuda:0, cuda:1 disagree: give one of them; the CUDA "
                    "devices here are cuda:0, cuda:1, cuda:2");
}

TEST_CASE("devices: the queue takes the longest inputs first, ties in path order", "[devices]") {
  const std::vector<app::BatchItem> items{{"z.mp4", "o/z"}, {"a.mp4", "o/a"}, {"m.mp4", "o/m"},
                                          {"k.mp4", "o/k"}, {"b.mp4", "o/b"}, {"c.mp4", "o/c"}};
  const std::vector<io::InputLength> lengths{{10, 0.4}, {10, 0.4}, {81, 3.4}, {0, 0}, {10, 0.5}, {0, 2.0}};
  const std::vector<size_t> order = app::longest_first(items, lengths);
  // m (81 frames); b, then a and z (10 frames; b lasts longer; a before z by name); c (only seconds known),
  // k (nothing known).
  CHECK(order == std::vector<size_t>{2, 4, 1, 0, 5, 3});
}

TEST_CASE("devices: plan --devices predicts the split by frames", "[devices]") {
  // Inputs of 81, 41, 41, 17, 9 and an unknown length over two devices: 81 | 41, 41 | 17 (the device free
  // first), 9 | ..., the unknown one last.
  const std::vector<io::InputLength> lengths{{41, 0}, {9, 0}, {81, 0}, {0, 0}, {17, 0}, {41, 0}};
  const std::vector<size_t> order{2, 0, 5, 4, 1, 3};
  // 2 -> d0 (81); 0 -> d1 (41); 5 -> d1 (82); 4 -> d0 (98); 1 -> d1 (91); 3 -> d1 (92).
  CHECK(app::predict_split(order, lengths, 2) == std::vector<size_t>{1, 1, 0, 1, 0, 1});
  CHECK(app::predict_split(order, lengths, 1) == std::vector<size_t>(6, 0));
}

TEST_CASE("a batch over devices shares the host's cores among its runs' decoders", "[devices]") {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(app::host_threads(-1, 1) == 0);  // one device: the codecs' own choice, as a run without --devices
  CHECK(app::host_threads(-1, 4) == std::max(2, cores / 4));
  CHECK(app::host_threads(-1, 64 * std::max(cores, 1)) == 2);  // never fewer than two
  CHECK(app::host_threads(0, 4) == 0);                         // --threads 0: the codecs' own choice
  CHECK(app::host_threads(6, 4) == 6);                         // --threads 6
}

TEST_CASE("devices: the device workers run together, keep each failure and name its device", "[devices]") {
  // Note [Places]: two workers on the CPU; each waits until both run, so they overlap.
  const std::vector<torch::Device> devices = {torch::kCPU, torch::kCPU};
  std::atomic<int> started = 0;
  std::vector<int> ran(devices.size(), 0);
  core::Places places(devices);
  const auto errors = places.run_each([&](size_t slot) {
    ++started;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    ran[slot] = started;
    if (slot == 1) throw Error("slot 1 failed\nwith a second line");
  });
  CHECK(ran == std::vector<int>{2, 2});
  REQUIRE(errors.size() == 2);
  CHECK_FALSE(errors[0]);
  CHECK(errors[1]);
  CHECK_THROWS_WITH(core::rethrow_first(devices, errors), "cpu: slot 1 failed");
  CHECK_NOTHROW(core::rethrow_first(devices, {nullptr, nullptr}));
}

TEST_CASE("devices: places run on threads kept for the process, and a task rethrows what it threw",
          "[devices]") {
  // Note [Band threads]: a second set of places on the same devices gets the threads of the first.
  const std::vector<torch::Device> devices = {torch::kCPU, torch::kCPU};
  auto threads = [&] {
    std::vector<std::thread::id> ids(devices.size());
    core::Places places(devices);
    places.run([&](size_t slot) { ids[slot] = std::this_thread::get_id(); });
    return std::set<std::thread::id>(ids.begin(), ids.end());
  };
  const auto first = threads();
  CHECK(first.size() == 2);
  CHECK_FALSE(first.count(std::this_thread::get_id()));
  CHECK(threads() == first);
  core::Task fails(torch::kCPU, [] { throw Error("the task failed"); });
  CHECK_THROWS_WITH(fails.get(), "the task failed");
  int ran = 0;
  core::Task(torch::kCPU, [&] { ran = 1; }).get();
  CHECK(ran == 1);
}

TEST_CASE("devices: inputs are probed from their headers", "[devices]") {
  ScratchDir dir;
  make_clip(dir / "v.mkv",
            "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 7 -c:v libx264 -pix_fmt yuv420p");
  make_clip(dir / "v.mp4",
            "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 11 -c:v libx264 -pix_fmt yuv420p");
  std::ofstream(dir / "junk.mp4") << "not a video";
  CHECK(io::probe_length(dir / "v.mp4").frames == 11);
  CHECK(io::probe_length(dir / "v.mp4").seconds == Approx(11 / 24.0));
  CHECK(io::probe_length(dir / "v.mkv").frames == 7);
  CHECK(io::probe_length(dir / "junk.mp4").frames == 0);
  CHECK(io::probe_length(dir / "missing.mp4").frames == 0);
}

TEST_CASE("devices: a batch on two workers writes what one worker writes", "[devices][cli]") {
  Clips clips;
  const auto command = GENERATE(app::RunCommand::kRoundtrip, app::RunCommand::kEncode);
  const std::string ext = command == app::RunCommand::kEncode ? ".safetensors" : ".mp4";
  ScratchDir one_out, two_out, logs;
  const torch::Device cpu(torch::kCPU);
  const BatchRun one =
      run_batch(command, clips.items(one_out.path(), ext), one_out.path(), logs / "one.jsonl", {cpu});
  const BatchRun two =
      run_batch(command, clips.items(two_out.path(), ext), two_out.path(), logs / "two.jsonl", {cpu, cpu});

  for (const BatchRun* run : {&one, &two}) {
    // The broken clip failed alone; the others were written.
    CHECK(run->result.failed == 1);
    CHECK_FALSE(run->result.interrupted);
    // Taken longest first: c and e (9 frames; by name), d (5), b (3), the broken one (no length) last.
    std::vector<std::string> taken;
    for (const auto& t : run->result.taken) taken.push_back(t.input.stem().string());
    CHECK(taken == std::vector<std::string>{"c", "e", "d", "b", "broken"});
    // One JSON line and one manifest record per input, each naming its device.
    REQUIRE(run->lines.size() == 5);
    REQUIRE(run->manifest.size() == 5);
    std::set<std::string> seen;
    for (const auto* records : {&run->lines, &run->manifest})
      for (const nlohmann::json& r : *records) {
        INFO(r.dump());
        CHECK(r.at("device") == "cpu");
        seen.insert(stem(r));
        if (stem(r) == "broken") {
          CHECK(r.at("status") == "failed");
          CHECK_THAT(r.at("error").get<std::string>(), Contains("broken.mp4"));
        } else {
          CHECK(r.at("status") == "ok");
          CHECK(r.at("error").is_null());
        }
      }
    CHECK(seen == std::set<std::string>{"b", "broken", "c", "d", "e"});
    for (const nlohmann::json& r : run->lines)
      if (r.at("status") == "ok") CHECK(r.contains("latent_shape"));  // the run's summary, as for one device
  }
  // Byte for byte the same outputs, and nothing else (no temporary files, nothing for the broken clip).
  const std::vector<std::string> expected{"b" + ext, "c" + ext, "d" + ext, "e" + ext};
  CHECK(list_dir(one_out.path()) == expected);
  CHECK(list_dir(two_out.path()) == expected);
  for (const std::string& name : expected) {
    INFO(name);
    const std::string a = bytes_of(one_out / name), b = bytes_of(two_out / name);
    CHECK(!a.empty());
    CHECK(a == b);
  }
  // With two workers both took inputs (the second while the first ran the longest clip).
  std::set<size_t> workers;
  for (const auto& t : two.result.taken) workers.insert(t.worker);
  CHECK(workers == std::set<size_t>{0, 1});
  if (command == app::RunCommand::kRoundtrip) CHECK(probe(two_out / "c.mp4").frames() == 9);
}

TEST_CASE("devices: an interrupted batch over devices writes no partial output", "[devices][cli]") {
  Clips clips;
  ScratchDir out, logs;
  const torch::Device cpu(torch::kCPU);
  auto items = clips.items(out.path(), ".mp4");

  SECTION("interrupted before the first input") {
    io::set_interrupted(true);
    const BatchRun run =
        run_batch(app::RunCommand::kRoundtrip, items, out.path(), logs / "m.jsonl", {cpu, cpu});
    io::set_interrupted(false);
    CHECK(run.result.interrupted);
    CHECK(run.result.taken.empty());
    CHECK(run.lines.empty());
    CHECK(list_dir(out.path()).empty());
  }
  SECTION("interrupted once the first input is done") {
    // Three long clips go first: when one is done, the others are still running.
    for (int i = 0; i < 3; ++i) {
      const std::string name = "long" + std::to_string(i);
      make_clip(clips.dir / (name + ".mp4"),
                "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 97 -c:v libx264 -pix_fmt yuv420p");
      items.push_back({clips.dir / (name + ".mp4"), out / (name + ".mp4")});
    }
    std::atomic<bool> finished{false};
    std::thread interrupter([&] {
      while (!finished && read_text(logs / "m.jsonl").empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      io::set_interrupted(true);
    });
    BatchRun run;
    try {
      run = run_batch(app::RunCommand::kRoundtrip, items, out.path(), logs / "m.jsonl", {cpu, cpu});
    } catch (...) {
      finished = true;
      interrupter.join();
      io::set_interrupted(false);
      throw;
    }
    finished = true;
    interrupter.join();
    io::set_interrupted(false);
    // Every input was reported, or was running when the flag came (its output never appeared), or was never
    // taken; what exists was reported.
    std::set<std::string> ok, taken, unwritten;
    for (const nlohmann::json& r : run.manifest)
      if (r.at("status") == "ok")
        ok.insert(std::filesystem::path(r.at("output").get<std::string>()).filename());
    for (const auto& t : run.result.taken) taken.insert(t.input.stem().string() + ".mp4");
    for (const auto& path : run.result.unwritten) unwritten.insert(path.filename());
    const std::vector<std::string> written = list_dir(out.path());
    CHECK(std::set<std::string>(written.begin(), written.end()) == ok);
    CHECK(run.manifest.size() + unwritten.size() == taken.size());
    for (const std::string& name : unwritten) CHECK_FALSE(std::filesystem::exists(out / name));
    CHECK(run.result.interrupted);
    CHECK(!unwritten.empty());
    CHECK(run.manifest.size() < items.size());
  }
}

TEST_CASE("cli --devices: refused in one line where it cannot be", "[devices][cli]") {
  ScratchDir dir;
  const auto in =
      make_clip(dir / "in.mp4", "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 2 -c:v libx264");
  make_clip(dir / "in2.mp4", "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 2 -c:v libx264");
  const std::string weights = " --weights " + quote(tiny_weights());
  auto refused = [&](const std::string& args) {
    const CliResult r = run_cli(args + weights);
    INFO(args << "\n" << r.err);
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4", "in2.mp4"});  // nothing written
    return r.err;
  };
  const int64_t gpus = app::visible_cuda_devices();
  CHECK(refused("bench --op decode --size 64x64 --frames 5 --split") ==
        "vaecodec: error: --split splits the clip across --devices; give --devices too\n");
  if (gpus == 0) {
    CHECK(refused("roundtrip " + quote(in) + " -o " + quote(dir / "out.mp4") + " --devices 0") ==
          "vaecodec: error: --devices 0: there are no GPUs to spread the work over: there is no CUDA device "
          "here (only the CPU); run on the CPU with --device cpu\n");
    CHECK_THAT(refused("encode " + quote(in) + " " + quote(dir / "in2.mp4") + " -o " + quote(dir / "out/") +
                       " --devices all"),
               Contains("there is no CUDA device here"));
    CHECK_THAT(refused("decode " + quote(in) + " -o " + quote(dir / "o.mp4") + " --devices cuda:0"),
               Contains("there is no CUDA device here"));
  } else {
    const std::string one = "roundtrip " + quote(in) + " -o " + quote(dir / "out.mp4");
    CHECK_THAT(refused(one + " --devices " + std::to_string(gpus)),
               Contains("cuda:" + std::to_string(gpus) + " does not exist") && Contains("cuda:0"));
    CHECK_THAT(refused(one + " --devices 0,cuda:0"), Contains("cuda:0 is named twice"));
    CHECK_THAT(refused(one + " --devices 0 --device cpu"), Contains("disagree"));
  }
}

// Clips run by one GPU, and a check of a run of them over `--devices`: the same outputs byte for byte, and
// the devices its JSON lines name.
class DeviceBatchCheck {
 public:
  explicit DeviceBatchCheck(int64_t clips) {
    for (int64_t i = 0; i < clips; ++i)
      make_clip(in_ / ("clip" + std::to_string(i) + ".mp4"),
                "-f lavfi -i testsrc2=size=128x96:rate=24 -frames:v " + std::to_string(5 + 4 * i) +
                    " -c:v libx264 -pix_fmt yuv420p");
    const CliResult reference = run_cli(run_ + " -o " + quote(one_.path()) + " --device cuda:0");
    REQUIRE(reference.status == 0);
    names_ = list_dir(one_.path());
    REQUIRE(names_.size() == static_cast<size_t>(clips));
  }
  std::set<std::string> devices_used(const std::string& devices) const {
    ScratchDir out;
    const CliResult r = run_cli(run_ + " -o " + quote(out.path()) + " --devices " + devices);
    INFO("--devices " << devices << "\n" << r.err);
    REQUIRE(r.status == 0);
    CHECK(list_dir(out.path()) == names_);
    for (const std::string& name : names_) CHECK(bytes_of(out / name) == bytes_of(one_ / name));
    std::set<std::string> used;
    const std::vector<nlohmann::json> lines = json_lines(r.out);
    CHECK(lines.size() == names_.size());
    for (const nlohmann::json& line : lines) {
      CHECK(line.at("status") == "ok");
      used.insert(line.at("device").get<std::string>());
    }
    return used;
  }

 private:
  ScratchDir in_, one_;
  // Bit-identical only without cuDNN timing, which may pick other kernels on another GPU (or run).
  std::string run_ =
      "roundtrip " + quote(in_.path()) + " --weights " + quote(tiny_weights()) + " --json --autotune off";
  std::vector<std::string> names_;
};

TEST_CASE("a batch over --devices 0 writes what one GPU writes", "[gpu][devices]") {
  if (!cuda_here()) return;
  const DeviceBatchCheck check(4);
  CHECK(check.devices_used("0") == std::set<std::string>{"cuda:0"});
}

TEST_CASE("a batch over the first GPUs writes what one GPU writes, in either order",
          "[gpu][multi-gpu][devices]") {
  // Note [Tests on several GPUs]: on 2, 3, ... GPUs; at least as many clips as GPUs, so that every GPU takes
  // one.
  const std::vector<int64_t> counts = gpu_counts_here();
  if (counts.empty()) return;
  const DeviceBatchCheck check(std::max<int64_t>(4, counts.back()));
  for (const int64_t n : counts) {
    INFO(n << " GPUs");
    std::set<std::string> all;
    std::string reversed;
    for (int64_t i = 0; i < n; ++i) {
      all.insert("cuda:" + std::to_string(i));
      reversed = "cuda:" + std::to_string(i) + (i ? "," : "") + reversed;
    }
    CHECK(check.devices_used(device_numbers(n)) == all);
    CHECK(check.devices_used(reversed) == all);
  }
}

TEST_CASE("one clip split across the first GPUs writes what one GPU writes",
          "[gpu][multi-gpu][devices][bands]") {
  // Note [Bands across devices]: float32 latents equal the one-GPU encode's to rounding, and the decoded
  // video equals the one-GPU decode's up to the 8-bit output's rounding, on 2, 3, ... GPUs (Note [Tests on
  // several GPUs]). (core's [bands] tests split across bands of one GPU and, [multi-gpu], of several.)
  const std::vector<int64_t> counts = gpu_counts_here();
  if (counts.empty()) return;
  ScratchDir dir;
  make_clip(dir / "in.mp4",
            "-f lavfi -i testsrc2=size=176x208:rate=24 -frames:v 9 -c:v libx264 -pix_fmt yuv420p");
  const std::string weights = " --weights " + quote(tiny_weights()) + " --dtype fp32";
  const auto run = [&](const std::string& tag, const std::string& devices) {
    const CliResult e = run_cli("encode " + quote(dir / "in.mp4") + " -o " +
                                quote(dir / (tag + ".safetensors")) + weights + " " + devices);
    INFO(devices << "\n" << e.err);
    REQUIRE(e.status == 0);
    const CliResult d = run_cli("decode " + quote(dir / (tag + ".safetensors")) + " -o " +
                                quote(dir / (tag + ".mkv")) + " --codec ffv1" + weights + " " + devices);
    INFO(devices << "\n" << d.err);
    REQUIRE(d.status == 0);
  };
  run("one", "--device cuda:0");
  const auto one = read_tensors(dir / "one.safetensors");
  for (const int64_t n : counts) {
    INFO(n << " GPUs");
    const std::string tag = "split" + std::to_string(n);
    run(tag, "--devices " + device_numbers(n));
    const auto split = read_tensors(dir / (tag + ".safetensors"));
    REQUIRE(one.size() == split.size());
    for (const auto& [name, t] : one) CHECK(relative_error(split.at(name), t) <= 1e-5);
    const CliResult c =
        run_cli("compare " + quote(dir / "one.mkv") + " " + quote(dir / (tag + ".mkv")) + " --json");
    REQUIRE(c.status == 0);
    const auto j = nlohmann::json::parse(c.out);
    INFO(c.out);
    CHECK((j.at("identical").get<bool>() || j.at("min_psnr").get<double>() >= 50.0));
  }
}

TEST_CASE("bench --split compares the split's output with the first GPU's own run",
          "[gpu][multi-gpu][devices][bands]") {
  // Note [Benchmark over devices]: the error against one device is computed under the one-device plan (a plan
  // that names bands cannot run on one place), on 2, 3, ... GPUs.
  const std::vector<int64_t> counts = gpu_counts_here();
  if (counts.empty()) return;
  for (const int64_t n : counts) {
    for (const std::string op : {"encode", "decode"}) {
      INFO(n << " GPUs, " << op);
      const CliResult r =
          run_cli("bench --weights " + quote(tiny_weights()) + " --op " + op +
                  " --size 176x208 --frames 9 --runs 1 --warmup 1 --dtype fp32 --json --split "
                  "--devices " +
                  device_numbers(n));
      INFO(r.err);
      REQUIRE(r.status == 0);
      CHECK(r.err.find("warning") == std::string::npos);
      const auto j = nlohmann::json::parse(r.out);
      const nlohmann::json& error = j.at("split").at("relative_error_vs_one_device");
      REQUIRE(error.is_number());
      CHECK(error.get<double>() <= 1e-5);
      CHECK(j.at("split").at("devices").size() == static_cast<size_t>(n));
    }
  }
}

}  // namespace vaecodec::test
