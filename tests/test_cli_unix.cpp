// vaecodec as a Unix tool that scripts call and people read: one exit-status rule for every refusal, existing
// outputs kept unless -y, a batch that reports a missing input and goes on, a batch's one progress line, and
// a quality plot whose text says what it shows (read back from the SVG, and by OCR from the PNG).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/video_test_support.h"

extern char** environ;

namespace vaecodec::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

fs::path small_clip(const fs::path& path, int frames = 5) {
  return make_clip(path, kTestsrc + "64x48:rate=24 -frames:v " + std::to_string(frames) +
                             " -pix_fmt yuv420p -c:v libx264 -preset ultrafast");
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : lines_of(text)) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  return keys;
}

// The inode of a file: an atomic replacement (rename of a new file) changes it.
ino_t inode_of(const fs::path& path) {
  struct stat s {};
  REQUIRE(::stat(path.c_str(), &s) == 0);
  return s.st_ino;
}

// Runs the CLI under a pseudo-terminal (util-linux's script), `answer` typed on its stdin.
CliResult run_in_terminal(const std::string& args, const std::string& answer) {
  CliResult r;
  const std::string command = quote(VAECODEC_BINARY) + " " + args;
  const fs::path out = fs::temp_directory_path() / ("vaecodec-tty-" + std::to_string(::getpid()));
  r.status =
      shell("printf '" + answer + "\\n' | script -qec " + quote(command) + " /dev/null >" + quote(out));
  r.out = read_text(out);
  fs::remove(out);
  return r;
}

}  // namespace

TEST_CASE("cli exit status: 2 for what was typed wrong, 1 for what failed, nothing written", "[cli][unix]") {
  ScratchDir dir;
  const fs::path in = small_clip(dir / "in.mp4");
  const std::string out = quote(dir / "out.mp4");
  const std::string rt = "roundtrip " + quote(in) + " -o " + out;
  const std::string w = weights_arg();
  struct Case {
    std::string args;
    int status;
    std::string says;
    std::string env = "";
  };
  std::vector<Case> cases = {
      {rt + " --quiet", 2, "no VAE weights given", "VAECODEC_WEIGHTS="},
      {rt + w + " --preset nope", 2, "unknown preset 'nope'"},
      {rt + w + " --vram lots", 2, "--vram: 'lots' is not a memory size"},
      {rt + w + " --vram 8", 2, "--vram 8 has no unit: write 8G for GiB"},
      {rt + w + " --device gpu", 2, "--device gpu is not a device"},
      {rt + w + " --codec nope", 2, "unknown or unavailable video encoder 'nope'"},
      {rt + w + " --encoder-preset nope", 2, "unknown --encoder-preset 'nope'"},
      {rt + w + " --pix-fmt nope", 2, "--pix-fmt nope is not a pixel format"},
      {"roundtrip " + quote(in) + " -o -" + w, 2, "-o -: vaecodec writes files"},
      {"roundtrip - -o " + out + w, 2, "input '-': vaecodec reads files"},
      {rt + w + " --crf 70", 2, "--crf"},
      {rt + w + " --encoder-options x", 2, "--encoder-options 'x'"},
      {rt + w + " --frames 0", 2, "--frames 0"},
      {rt + w + " --vf nosuchfilter", 2, "--vf 'nosuchfilter'"},
      {rt + w + " --dtype fp8 --device cpu", 2, "dtype fp8: "},
      {rt + w + " --model wan3-vae", 2, "unknown model 'wan3-vae'"},
      {"decode " + quote(in) + " -o " + out + w + " --fps abc", 2, "--fps abc is not a frame rate"},
      {rt + w + " --tile 0x", 2, "--tile 0x is not a tile size"},
      {rt + w + " --tile-overlap 9000", 2, "--tile-overlap: Value 9000 not in range 0 to 2048"},
      {rt + w + " --norm-context -2", 2, "--norm-context: Value -2 not in range 0 to 2048"},
      {rt + w + " --preset rtx4090-24g --preset-file x.json", 2, "--preset and --preset-file"},
      {rt + w + " -y -n", 2, "excludes"},
      {"rountrip " + quote(in) + " -o " + out + w, 2,
       "unknown command 'rountrip'; did you mean 'roundtrip'?"},
      {rt + w + " --crff 20", 2, "unknown option --crff for roundtrip; did you mean --crf?"},
      {"roundtrip " + quote(in) + " -o " + quote(in) + w, 2, "is the input file"},
      {"roundtrip " + quote(in) + " -o " + quote(dir / "out.xyz") + w, 2, "cannot tell a video container"},
      {"decode " + quote(in) + " -o " + out + w, 2, "is a video, not latents"},
      {"compare " + quote(in) + " " + quote(in) + " --plot " + quote(dir / "q.jpg"), 2, "--plot"},
      {"bench --random --autotune maybe", 2, "--autotune"},
      {"roundtrip " + quote(dir / "nope.mp4") + " -o " + out + w, 1, "cannot open input"},
      {"roundtrip " + quote(in) + " -o " + out + " --weights " + quote(dir / "nope.safetensors") + " --quiet",
       1, "nope.safetensors"},
      {"compare " + quote(in) + " " + quote(dir / "nope.mp4"), 1, "nope.mp4"},
  };
  if (!torch::cuda::is_available()) {
    cases.push_back({rt + w + " --device cuda", 2, "--device cuda: no CUDA device is available here"});
    cases.push_back({rt + w + " --preset rtx4090-24g", 2,
                     "--preset rtx4090-24g is a tier for a CUDA GPU (it sets --device"});
  }
  for (const Case& c : cases) {
    INFO(c.args);
    const CliResult r = run_cli(c.args, c.env);
    check_one_line(r, c.status, c.says);
    CHECK(r.out.empty());
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4"});
  }
  // --help states the rule.
  for (const std::string command : {"", "roundtrip ", "compare "}) {
    const CliResult help = run_cli(command + "--help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Contains("Exit status: 0 done; 1 the run failed") &&
                             Contains("2 the command line") && Contains("130 interrupted") &&
                             Contains("143 terminated"));
  }
}

TEST_CASE("cli: SIGTERM stops a run with 143 and writes nothing", "[cli][unix]") {
  ScratchDir dir;
  const fs::path in = make_clip(dir / "in.mkv", kTestsrc + "128x96:rate=24 -frames:v 400 -c:v ffv1");
  const std::vector<std::string> args = {
      VAECODEC_BINARY,         "roundtrip", in.string(), "-o", (dir / "out.mkv").string(), "--weights",
      tiny_weights().string(), "--quiet"};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string err = dir.path().string() + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (list_dir(dir.path()).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 143);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mkv"});
  CHECK_THAT(read_text(err), Contains("interrupted") && Contains("was not written"));
  ::unlink(err.c_str());
}

TEST_CASE("cli: an existing output is kept unless -y, -n never replaces, a terminal is asked",
          "[cli][unix]") {
  ScratchDir dir;
  const fs::path in = small_clip(dir / "in.mp4");
  const fs::path out = dir / "out.mp4", csv = dir / "q.csv";
  const std::string run = "roundtrip " + quote(in) + " -o " + quote(out) + weights_arg();
  REQUIRE(run_cli(run).status == 0);
  const ino_t inode = inode_of(out);

  check_one_line(run_cli(run), 1, out.string() + " exists; pass -y to replace");
  check_one_line(run_cli(run + " -n"), 1, out.string() + " exists and -n keeps existing outputs");
  CHECK(inode_of(out) == inode);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4", "out.mp4"});

  // In a terminal the question is asked once; "n" keeps the file, "y" replaces it.
  const CliResult no = run_in_terminal(run, "n");
  CHECK(no.status == 1);
  CHECK_THAT(no.out, Contains(out.string() + " exists. Overwrite? [y/N]"));
  CHECK(inode_of(out) == inode);
  const CliResult yes = run_in_terminal(run, "y");
  INFO(yes.out);
  CHECK(yes.status == 0);
  CHECK(inode_of(out) != inode);

  const ino_t replaced = inode_of(out);
  REQUIRE(run_cli(run + " -y").status == 0);
  CHECK(inode_of(out) != replaced);

  // --metrics is an output too, and so are compare's --csv and --plot.
  const std::string metrics = " --metrics " + quote(dir / "m.csv");
  REQUIRE(run_cli(run + " -y" + metrics).status == 0);
  check_one_line(run_cli(run + " -y" + metrics + " -n"), 2, "excludes");
  const std::string compare = "compare " + quote(in) + " " + quote(out) + " --csv " + quote(csv);
  REQUIRE(run_cli(compare).status == 0);
  check_one_line(run_cli(compare), 1, csv.string() + " exists; pass -y");
  CHECK(run_cli(compare + " -y").status == 0);

  // A batch: every existing output is named in one line; --skip-existing keeps its meaning.
  ScratchDir batch;
  small_clip(batch / "a.mp4");
  small_clip(batch / "b.mp4");
  const std::string into = "roundtrip " + quote(batch / "a.mp4") + " " + quote(batch / "b.mp4") + " -o " +
                           quote(batch / "out/") + weights_arg();
  REQUIRE(run_cli(into).status == 0);
  check_one_line(run_cli(into), 1, (batch / "out/a.mp4").string() + " and 1 more outputs of this run exist");
  const CliResult skipped = run_cli(into + " --skip-existing");
  CHECK(skipped.status == 0);
  CHECK(lines_of(skipped.err).size() == 2);
  CHECK(run_cli(into + " -y").status == 0);
}

TEST_CASE("cli batch: a missing input fails alone, with one JSON line per input of the same keys",
          "[cli][unix]") {
  ScratchDir dir;
  const fs::path tree = small_clip(dir / "tree.mp4");
  const fs::path manifest = dir / "m.jsonl";
  const CliResult r = run_cli("roundtrip " + quote(dir / "nope.avi") + " " + quote(tree) + " -o " +
                              quote(dir / "out/") + weights_arg() + " --json --manifest " + quote(manifest));
  INFO(r.err);
  CHECK(r.status == 1);
  const std::vector<std::string> errors = lines_of(r.err);
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] ==
        "vaecodec: error: cannot open input " + (dir / "nope.avi").string() + ": No such file or directory");
  CHECK(errors[1] ==
        "vaecodec: error: 1 of 2 inputs failed; the others were written to " + (dir / "out/").string());
  CHECK(list_dir(dir / "out") == std::vector<std::string>{"tree.mp4"});
  const std::vector<nlohmann::json> printed = json_lines(r.out);
  REQUIRE(printed.size() == 2);
  CHECK(printed[0].at("status") == "failed");
  CHECK(printed[0].at("input") == (dir / "nope.avi").string());
  CHECK_THAT(printed[0].at("error").get<std::string>(), Contains("No such file or directory"));
  CHECK(printed[0].at("frames") == 0);
  CHECK(printed[0].at("latent_shape").is_null());
  CHECK(printed[1].at("status") == "ok");
  CHECK(printed[1].at("dtype") == "fp32");  // as --dtype names it
  CHECK(printed[1].at("quality").is_null());
  CHECK(keys_of(printed[0]) == keys_of(printed[1]));
  const std::vector<nlohmann::json> records = json_lines(read_text(manifest));
  REQUIRE(records.size() == 2);
  CHECK(records[0].at("status") == "failed");
  CHECK(records[1].at("status") == "ok");

  // One input that does not exist: its JSON line and one error line, exit 1.
  const CliResult one = run_cli("encode " + quote(dir / "nope.avi") + " -o " + quote(dir / "x.safetensors") +
                                weights_arg() + " --json");
  check_one_line(one, 1, "cannot open input " + (dir / "nope.avi").string());
  const std::vector<nlohmann::json> line = json_lines(one.out);
  REQUIRE(line.size() == 1);
  CHECK(line[0].at("status") == "failed");
  CHECK(keys_of(line[0]).count("latent_shape") == 1);
  CHECK(!fs::exists(dir / "x.safetensors"));

  // Every input missing: each reported, no model loaded, nothing written.
  const CliResult none =
      run_cli("roundtrip " + quote(dir / "a.avi") + " " + quote(dir / "b.avi") + " -o " +
              quote(dir / "none/") + " --weights " + quote(dir / "no-weights") + " --json");
  CHECK(none.status == 1);
  CHECK(json_lines(none.out).size() == 2);
  CHECK_THAT(lines_of(none.err).back(), Contains("2 of 2 inputs failed"));
  CHECK(!fs::exists(dir / "none"));
}

TEST_CASE("cli progress counts the clip's own frames, not the padding the model needs", "[cli][unix]") {
  // 10 frames run as 13 (1 + 4k, Note [Padding]); the engine reports what it ran after every chunk
  // (ChunkOptions::progress), the padding's frames too, and io counts the clip's 10: encode, decode and the
  // round trip.
  ScratchDir dir;
  small_clip(dir / "ten.mp4", 10);
  const std::string weights = " --weights " + quote(tiny_weights());  // not --quiet
  for (const auto& [label, command] : std::vector<std::pair<std::string, std::string>>{
           {"encode", "encode " + quote(dir / "ten.mp4") + " -o " + quote(dir / "ten.safetensors")},
           {"decode", "decode " + quote(dir / "ten.safetensors") + " -o " + quote(dir / "decoded.mp4")},
           {"roundtrip", "roundtrip " + quote(dir / "ten.mp4") + " -o " + quote(dir / "trip.mp4")}}) {
    const CliResult r = run_cli(command + weights);
    INFO(label << ": " << r.err);
    REQUIRE(r.status == 0);
    // Updates (printed on a slow machine) and the final line: never past 10, and 10 at the end.
    const std::regex update("^" + label + ": ([0-9]+)/10 frames");
    int done_lines = 0;
    for (const std::string& line : lines_of(r.err)) {
      std::smatch m;
      if (std::regex_search(line, m, update)) CHECK(std::stoi(m[1]) <= 10);
      if (line.starts_with(label + ": done, ")) {
        ++done_lines;
        CHECK_THAT(line, StartsWith(label + ": done, 10 frames in "));
      }
    }
    CHECK(done_lines == 1);
  }
}

TEST_CASE("cli batch: one progress line names the input and k/N, each outcome names the output",
          "[cli][unix]") {
  ScratchDir dir;
  fs::create_directories(dir / "in");
  small_clip(dir / "in" / "a.mp4", 5);
  small_clip(dir / "in" / "b.mp4", 9);
  const fs::path out = dir / "out";
  const CliResult r = run_cli("roundtrip " + quote(dir / "in") + " -o " + quote(out) + " --weights " +
                              quote(tiny_weights()));  // not --quiet
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> err;
  for (const std::string& line : lines_of(r.err))  // not the progress updates a slow machine may print
    if (!line.starts_with("roundtrip [") || line.find(": done, ") != std::string::npos) err.push_back(line);
  REQUIRE(err.size() == 3);
  CHECK_THAT(err[0], StartsWith("vaecodec: [1/2] " + (dir / "in" / "a.mp4").string() + " -> " +
                                (out / "a.mp4").string() + ": 5 frames in "));
  CHECK_THAT(err[1], StartsWith("vaecodec: [2/2] " + (dir / "in" / "b.mp4").string() + " -> " +
                                (out / "b.mp4").string() + ": 9 frames in "));
  CHECK_THAT(err[2], StartsWith("roundtrip [2/2] b.mp4: done, 14 frames in "));

  // In a terminal: the progress line is redrawn in place, and every message starts a line of its own.
  const CliResult tty = run_in_terminal(
      "roundtrip " + quote(dir / "in") + " -o " + quote(out) + " -y --weights " + quote(tiny_weights()), "");
  INFO(tty.out);
  CHECK(tty.status == 0);
  for (const std::string& line : lines_of(tty.out)) {
    const size_t at = line.find("vaecodec: ");
    if (at == std::string::npos) continue;
    // Before a message there is nothing, or a progress line wiped by as many spaces ("...\r    \r").
    const std::string before = line.substr(0, at);
    if (before.find_first_not_of(" \r") == std::string::npos) continue;
    REQUIRE(before.back() == '\r');
    const size_t wipe = before.rfind('\r', before.size() - 2);
    REQUIRE(wipe != std::string::npos);
    const std::string spaces = before.substr(wipe + 1, before.size() - wipe - 2);
    CHECK(spaces.find_first_not_of(' ') == std::string::npos);
    std::stringstream drawn(before.substr(0, wipe));
    for (std::string segment; std::getline(drawn, segment, '\r');) CHECK(segment.size() <= spaces.size());
  }
  CHECK_THAT(tty.out, Contains("roundtrip [2/2] b.mp4: done, 14 frames in "));
}

TEST_CASE("cli: inspect and bench name dtypes as --dtype does, bench falls back to the CPU", "[cli][unix]") {
  const CliResult inspect = run_cli("inspect " + quote(tiny_weights()) + " --json");
  REQUIRE(inspect.status == 0);
  CHECK(nlohmann::json::parse(inspect.out).at("dtypes").contains("fp32"));
  if (torch::cuda::is_available()) return;  // the fallback is what a machine without a GPU does
  const CliResult bench =
      run_cli("bench --random --size 64x48 --frames 5 --runs 1 --warmup 0 --autotune on --json");
  INFO(bench.err);
  REQUIRE(bench.status == 0);
  const nlohmann::json j = nlohmann::json::parse(bench.out);
  CHECK(j.at("device") == "cpu");
  CHECK(j.at("dtype") == "fp32");
}

TEST_CASE("compare --plot: the text of the chart names the files, panels, mean and worst frame",
          "[cli][unix]") {
  ScratchDir dir;
  const fs::path ref =
      make_clip(dir / "reference.mkv", kTestsrc + "320x240:rate=24 -frames:v 12 -pix_fmt yuv420p -c:v ffv1");
  const fs::path dist =
      make_clip(dir / "distorted.mp4", "-i " + quote(ref) + " -c:v libx264 -crf 40 -pix_fmt yuv420p");
  const CliResult r =
      run_cli("compare " + quote(ref) + " " + quote(dist) + " --json --plot " + quote(dir / "q.svg"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  auto fixed = [](double v, int digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*f", digits, v);
    return std::string(text);
  };
  const std::string mean_psnr = fixed(j.at("mean_psnr").get<double>(), 2);
  const std::string worst = "worst frame " + std::to_string(j.at("min_psnr_frame").get<int>()) + ": " +
                            fixed(j.at("min_psnr").get<double>(), 2) + " dB";

  // SVG: the strings themselves.
  std::vector<std::string> texts;
  const std::string svg = read_text(dir / "q.svg");
  const std::regex text_element("<text[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text_element); it != std::sregex_iterator();
       ++it)
    texts.push_back((*it)[1]);
  auto has = [&](const std::string& wanted) {
    return std::any_of(texts.begin(), texts.end(),
                       [&](const std::string& t) { return t.find(wanted) != std::string::npos; });
  };
  CHECK(has("distorted.mp4 against reference.mkv, 12 frames"));
  CHECK(has("PSNR (dB)   mean " + mean_psnr + " dB"));
  CHECK(has(worst));
  CHECK(has("SSIM   mean " + fixed(j.at("ssim").get<double>(), 4)));
  CHECK(has("frame"));
  CHECK(has("11"));  // the last frame's number on the x axis

  // PNG: read back by OCR (Debian's tesseract-ocr, installed by scripts/setup.sh).
  REQUIRE(shell("command -v tesseract >/dev/null") == 0);
  REQUIRE(run_cli("compare " + quote(ref) + " " + quote(dist) + " --plot " + quote(dir / "q.png")).status ==
          0);
  REQUIRE(shell("tesseract " + quote(dir / "q.png") + " " + quote(dir / "ocr") + " >/dev/null 2>&1") == 0);
  const std::string ocr = read_text(dir / "ocr.txt");
  INFO("OCR: " << ocr);
  CHECK_THAT(ocr, Contains("distorted.mp4") && Contains("reference.mkv") && Contains("PSNR (dB)") &&
                      Contains("SSIM") && Contains("mean " + mean_psnr) && Contains("worst frame") &&
                      Contains("frame"));
}

}  // namespace vaecodec::test
