#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "io/progress.h"

namespace {

using vaecodec::io::Progress;
using vaecodec::io::ProgressOptions;

// Options writing to `out` on a clock the test moves by hand.
ProgressOptions fake_options(std::ostringstream& out, const double& clock, bool terminal) {
  ProgressOptions options;
  options.out = &out;
  options.is_terminal = terminal;
  options.clock = [&clock] { return clock; };
  return options;
}

}  // namespace

TEST_CASE("plain progress: a line at most every interval, and one at the end", "[progress]") {
  std::ostringstream out;
  double now = 100.0;
  Progress progress("encode", 100, fake_options(out, now, /*terminal=*/false));

  now = 101.0;
  progress.update(10);
  CHECK(out.str().empty());
  now = 105.0;
  progress.update(25);
  CHECK(out.str() == "encode: 25/100 frames (25%), 5.0 fps, ETA 0:15\n");
  now = 107.0;
  progress.update(40);
  now = 110.0;
  progress.update(50);
  now = 112.0;
  progress.update(100);
  now = 120.0;
  progress.finish();
  progress.finish();
  progress.update(120);
  CHECK(out.str() ==
        "encode: 25/100 frames (25%), 5.0 fps, ETA 0:15\n"
        "encode: 50/100 frames (50%), 5.0 fps, ETA 0:10\n"
        "encode: done, 100 frames in 0:20 (5.0 fps)\n");
}

TEST_CASE("plain progress with an unknown total, and long times", "[progress]") {
  std::ostringstream out;
  double now = 0.0;
  SECTION("unknown total") {
    Progress progress("decode", 0, fake_options(out, now, false));
    now = 5.0;
    progress.update(30);
    CHECK(out.str() == "decode: 30 frames, 6.0 fps\n");
  }
  SECTION("hours") {
    Progress progress("decode", 100000, fake_options(out, now, false));
    now = 60.0;
    progress.update(120);  // 2 fps: 99880 frames left take 13:52:20
    now = 4000.0;
    progress.finish();
    CHECK(out.str() ==
          "decode: 120/100000 frames (0%), 2.0 fps, ETA 13:52:20\n"
          "decode: done, 120 frames in 1:06:40 (0.0 fps)\n");
  }
  SECTION("no rate yet") {
    ProgressOptions options = fake_options(out, now, false);
    options.min_interval_s = 0;
    Progress progress("decode", 10, options);
    progress.update(0);
    CHECK(out.str() == "decode: 0/10 frames (0%), 0.0 fps, ETA --:--\n");
  }
}

TEST_CASE("terminal progress redraws one line with a carriage return", "[progress]") {
  std::ostringstream out;
  double now = 0.0;
  auto progress = std::make_unique<Progress>("encode", 100, fake_options(out, now, /*terminal=*/true));
  now = 0.05;
  progress->update(1);
  CHECK(out.str().empty());
  now = 0.2;
  progress->update(2);
  const std::string first = "encode: 2/100 frames (2%), 10.0 fps, ETA 0:10";
  CHECK(out.str() == "\r" + first);
  now = 0.25;
  progress->update(3);  // within 0.1 s of the last redraw
  CHECK(out.str() == "\r" + first);
  now = 1.0;
  progress->update(100);
  const std::string second = "encode: 100/100 frames (100%), 100.0 fps, ETA 0:00";
  now = 2.0;
  progress->finish();
  const std::string last = "encode: done, 100 frames in 0:02 (50.0 fps)";
  REQUIRE(last.size() < second.size());
  CHECK(out.str() ==
        "\r" + first + "\r" + second + "\r" + last + std::string(second.size() - last.size(), ' ') + "\n");
  progress.reset();  // finished: nothing more to print
  const std::string text = out.str();
  CHECK(text.back() == '\n');
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

TEST_CASE("terminal progress ends its line when destroyed unfinished", "[progress]") {
  std::ostringstream out;
  double now = 0.0;
  {
    Progress progress("encode", 10, fake_options(out, now, true));
    now = 1.0;
    progress.update(5);
  }
  CHECK(out.str() == "\rencode: 5/10 frames (50%), 5.0 fps, ETA 0:01\n");

  std::ostringstream plain;
  { Progress progress("encode", 10, fake_options(plain, now, false)); }
  CHECK(plain.str().empty());
}

TEST_CASE("quiet progress prints nothing", "[progress]") {
  std::ostringstream out;
  double now = 0.0;
  for (bool terminal : {false, true}) {
    ProgressOptions options = fake_options(out, now, terminal);
    options.quiet = true;
    Progress progress("encode", 10, options);
    now += 100.0;
    progress.update(5);
    progress.finish();
  }
  CHECK(out.str().empty());
}

TEST_CASE("progress updates from several threads", "[progress]") {
  std::ostringstream out;
  ProgressOptions options;
  options.out = &out;
  options.is_terminal = false;
  options.min_interval_s = 0;  // every update prints: the most contention
  Progress progress("encode", 4000, options);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&progress, t] {
      for (int i = 0; i < 1000; ++i) progress.update(t * 1000 + i);
    });
  }
  for (auto& thread : threads) thread.join();
  progress.finish();
  const std::string text = out.str();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  CHECK(lines >= 2);
  CHECK(lines <= 4001);
  // Every line is whole: it starts with the label.
  std::istringstream in(text);
  std::string line;
  bool whole = true;
  while (std::getline(in, line)) whole = whole && line.rfind("encode: ", 0) == 0;
  CHECK(whole);
}

TEST_CASE("progress messages: wiped terminal line, redrawn at the next update, the listener hears all",
          "[progress]") {
  std::ostringstream out;
  double now = 0.0;
  std::vector<int64_t> heard;
  ProgressOptions options = fake_options(out, now, /*terminal=*/true);
  options.listener = [&heard](int64_t done) { heard.push_back(done); };
  SECTION("terminal") {
    Progress progress("roundtrip batch", 10, options);
    now = 1.0;
    progress.update(2);
    progress.message("vaecodec: error: a.mp4: broken");
    now = 1.01;  // within the redraw interval: drawn all the same, the line having been wiped
    progress.update(3);
    CHECK(out.str() ==
          "\rroundtrip batch: 2/10 frames (20%), 2.0 fps, ETA 0:04"
          "\r                                                     \r"
          "vaecodec: error: a.mp4: broken\n"
          "\rroundtrip batch: 3/10 frames (30%), 3.0 fps, ETA 0:02");
    CHECK(heard == std::vector<int64_t>{2, 3});
  }
  SECTION("quiet: messages still print, the listener still hears") {
    options.quiet = true;
    Progress progress("roundtrip batch", 10, options);
    progress.update(4);
    progress.message("vaecodec: error: b.mp4: broken");
    progress.finish();
    CHECK(out.str() == "vaecodec: error: b.mp4: broken\n");
    CHECK(heard == std::vector<int64_t>{4});
  }
}

TEST_CASE("progress told fewer frames than before keeps its count", "[progress]") {
  // The engine (exact tiles' windows) and the writer both report: the writer's count may lag the engine's.
  std::ostringstream out;
  double now = 100.0;
  std::vector<int64_t> heard;
  ProgressOptions options = fake_options(out, now, /*terminal=*/false);
  options.listener = [&heard](int64_t done) { heard.push_back(done); };
  Progress progress("decode", 100, options);
  progress.update(60);
  now = 110.0;
  progress.update(20);
  CHECK(out.str() == "decode: 60/100 frames (60%), 6.0 fps, ETA 0:07\n");
  CHECK(heard == std::vector<int64_t>{60, 60});
}
