// Checkpoint loading: the safetensors reader and writer, .pth files, and the key layouts of other tools.

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <set>
#include <string>

#include <torch/torch.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/safetensors.h"
#include "tests/diffusers_names.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using vaecodec::core::Checkpoint;
using vaecodec::core::load_checkpoint;
using vaecodec::core::normalize_layout;
using vaecodec::core::SafetensorsFile;
using vaecodec::core::StateDict;
using vaecodec::core::write_safetensors;
using vaecodec::test::replace_all;
using vaecodec::test::wan21_to_diffusers;
using vaecodec::test::wan22_to_diffusers;

const fs::path kData = VAECODEC_TEST_DATA;

using vaecodec::test::TempDir;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

uint64_t header_length(const std::string& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), sizeof(n));
  return n;
}

std::string with_header_length(std::string file, uint64_t n) {
  std::memcpy(file.data(), &n, sizeof(n));
  return file;
}

// A safetensors file put together by hand: length, header text, data bytes.
std::string raw_safetensors(const std::string& header, const std::string& data) {
  return with_header_length(std::string(8, '\0'), header.size()) + header + data;
}

StateDict read_all(const fs::path& path) {
  const SafetensorsFile file(path);
  StateDict tensors;
  for (const auto& [name, entry] : file.entries()) {
    tensors.emplace(name, file.load(name));
  }
  return tensors;
}

std::set<std::string> names_of(const StateDict& tensors) {
  std::set<std::string> names;
  for (const auto& item : tensors) {
    names.insert(item.first);
  }
  return names;
}

void require_same_tensors(const StateDict& actual, const StateDict& expected) {
  REQUIRE(names_of(actual) == names_of(expected));
  for (const auto& [name, tensor] : expected) {
    INFO(name);
    const auto& other = actual.at(name);
    REQUIRE(other.scalar_type() == tensor.scalar_type());
    REQUIRE(other.sizes() == tensor.sizes());
    REQUIRE(torch::equal(other, tensor));
  }
}

// The tensors of a released key list (names and shapes only), as empty-storage stand-ins.
StateDict released_names(const std::string& file) {
  std::ifstream in(kData / file);
  REQUIRE(in.good());
  const auto keys = nlohmann::json::parse(in);
  StateDict tensors;
  for (const auto& item : keys.items()) {
    tensors.emplace(item.key(), torch::empty({0}));
  }
  return tensors;
}

StateDict renamed(const StateDict& tensors, const std::function<std::string(const std::string&)>& rename) {
  StateDict out;
  for (const auto& [name, tensor] : tensors) {
    REQUIRE(out.emplace(rename(name), tensor).second);
  }
  return out;
}

// SeedVR2's attention projections under the names used before diffusers renamed them.
std::string seedvr2_to_legacy(const std::string& name) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex(R"((attentions\.\d+)\.to_q\.)"), "$1.query."},
      {std::regex(R"((attentions\.\d+)\.to_k\.)"), "$1.key."},
      {std::regex(R"((attentions\.\d+)\.to_v\.)"), "$1.value."},
      {std::regex(R"((attentions\.\d+)\.to_out\.0\.)"), "$1.proj_attn."},
  };
  return replace_all(name, rules);
}

// A zip archive with one stored (uncompressed) file, as any zip tool would write it.
std::string zip_with_one_file(const std::string& name, const std::string& content) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : content) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) {
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
  }
  crc = ~crc;
  std::string out;
  const auto u16 = [&](uint32_t v) {
    out += {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff)};
  };
  const auto u32 = [&](uint32_t v) {
    u16(v & 0xffff);
    u16(v >> 16);
  };
  const auto size = static_cast<uint32_t>(content.size());
  const auto name_size = static_cast<uint32_t>(name.size());
  u32(0x04034b50);                                  // local file header
  for (uint32_t v : {20u, 0u, 0u, 0u, 0u}) u16(v);  // version, flags, method (stored), time, date
  u32(crc);
  u32(size);
  u32(size);
  u16(name_size);
  u16(0);  // extra field length
  out += name + content;
  const auto directory_offset = static_cast<uint32_t>(out.size());
  u32(0x02014b50);  // central directory entry
  for (uint32_t v : {20u, 20u, 0u, 0u, 0u, 0u}) u16(v);
  u32(crc);
  u32(size);
  u32(size);
  u16(name_size);
  for (uint32_t v : {0u, 0u, 0u, 0u}) u16(v);  // extra, comment, disk, internal attributes
  u32(0);                                      // external attributes
  u32(0);                                      // offset of the local header
  out += name;
  const auto directory_size = static_cast<uint32_t>(out.size()) - directory_offset;
  u32(0x06054b50);  // end of central directory
  for (uint32_t v : {0u, 0u, 1u, 1u}) u16(v);
  u32(directory_size);
  u32(directory_offset);
  u16(0);  // comment length
  return out;
}

}  // namespace

TEST_CASE("wan21-tiny weights.pth and weights.safetensors hold the same tensors", "[weights]") {
  const auto pth = load_checkpoint(kData / "wan21-tiny" / "weights.pth");
  const auto st = load_checkpoint(kData / "wan21-tiny" / "weights.safetensors");
  CHECK(pth.format == "pth");
  CHECK(st.format == "safetensors");
  CHECK(pth.layout == "original");
  CHECK(st.layout == "original");
  CHECK(pth.tensors.size() == 194);
  CHECK(names_of(pth.tensors) == names_of(released_names("wan21-released-keys.json")));
  require_same_tensors(pth.tensors, st.tensors);
  for (const auto& [name, tensor] : pth.tensors) {
    REQUIRE(tensor.device().is_cpu());
  }
}

TEST_CASE("write_safetensors round trip keeps dtypes, shapes, values and metadata", "[weights]") {
  TempDir dir;
  const auto path = dir / "round.safetensors";
  torch::manual_seed(0);
  const StateDict tensors = {
      {"f32", torch::randn({2, 3})},
      {"f16", torch::randn({4, 1, 2}).to(torch::kHalf)},
      {"bf16", torch::randn({3, 2, 1, 1, 1}).to(torch::kBFloat16)},
      {"f64.scalar", torch::tensor(3.25, torch::kDouble)},
      {"i64", torch::arange(5, torch::kLong)},
      {"i32", torch::arange(-3, 3, torch::kInt)},
      {"u8.empty", torch::empty({0, 4}, torch::kByte)},
      {"transposed", torch::randn({3, 5}).t()},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "weights of a test"}};
  write_safetensors(path, tensors, metadata);

  const auto bytes = read_bytes(path);
  CHECK((8 + header_length(bytes)) % 8 == 0);
  CHECK(dir.file_count() == 1);

  const SafetensorsFile file(path);
  CHECK(file.metadata() == metadata);
  StateDict expected = tensors;
  expected["transposed"] = tensors.at("transposed").contiguous();
  require_same_tensors(read_all(path), expected);

  // Writing over an existing file replaces it.
  write_safetensors(path, {{"only", torch::ones({2})}});
  const auto rewritten = load_checkpoint(path);
  CHECK(names_of(rewritten.tensors) == std::set<std::string>{"only"});
  CHECK(rewritten.metadata.empty());
}

TEST_CASE("write_safetensors reports failures and leaves no file behind", "[weights]") {
  TempDir dir;
  const auto missing_dir = dir / "no-such-dir" / "x.safetensors";
  REQUIRE_THROWS_WITH(write_safetensors(missing_dir, {{"a", torch::ones({1})}}),
                      Catch::Contains(missing_dir.string()) && Catch::Contains("No such file or directory"));

  const auto path = dir / "complex.safetensors";
  REQUIRE_THROWS_WITH(write_safetensors(path, {{"c", torch::ones({2}, torch::kComplexFloat)}}),
                      Catch::Contains("tensor 'c' has dtype"));
  CHECK(dir.file_count() == 0);
}

TEST_CASE("a truncated safetensors file is reported, wherever it is cut", "[weights]") {
  TempDir dir;
  const auto original = read_bytes(kData / "wan21-tiny" / "weights.safetensors");
  const auto path = dir / "cut.safetensors";

  write_bytes(path, original.substr(0, original.size() - 100));
  REQUIRE_THROWS_WITH(load_checkpoint(path),
                      Catch::Contains(path.string()) && Catch::Contains("outside the data section"));

  write_bytes(path, original.substr(0, 8 + header_length(original) / 2));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Catch::Contains("runs past the end of the file"));

  write_bytes(path, original.substr(0, 5));
  REQUIRE_THROWS_WITH(SafetensorsFile(path), Catch::Contains("shorter than the 8-byte header length"));
}

TEST_CASE("safetensors headers are validated before use", "[weights]") {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  const std::string data(8, '\0');
  const auto expect_error = [&](const std::string& file, const std::string& message) {
    write_bytes(path, file);
    REQUIRE_THROWS_WITH(load_checkpoint(path), Catch::Contains(path.string()) && Catch::Contains(message));
  };
  const auto tensor = [](const std::string& fields) { return R"({"a": {)" + fields + "}}"; };

  const auto good = raw_safetensors(tensor(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])"), data);
  write_bytes(path, good);
  CHECK(load_checkpoint(path).tensors.at("a").sizes() == std::vector<int64_t>{2});

  SECTION("header length pointing past the end") {
    expect_error(with_header_length(good, good.size() + 100), "runs past the end of the file");
  }
  SECTION("absurd header length") {
    expect_error(with_header_length(good, uint64_t{1} << 40), "implausibly large");
  }
  SECTION("offsets outside the data section") {
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "shape": [4], "data_offsets": [0, 16])"), data),
                 "outside the data section");
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "shape": [0], "data_offsets": [8, 4])"), data),
                 "outside the data section");
  }
  SECTION("offsets that do not match the shape") {
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 4])"), data),
                 "needs 8");
  }
  SECTION("corrupt JSON") {
    expect_error(raw_safetensors(R"({"a": {"dtype": "F32", "sha)", data), "not valid JSON");
    write_bytes(path, raw_safetensors("[1, 2, 3]", data));
    REQUIRE_THROWS_WITH(SafetensorsFile(path), Catch::Contains("not a JSON object"));
  }
  SECTION("missing fields") {
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "shape": [2])"), data), "has no 'data_offsets'");
    expect_error(raw_safetensors(tensor(R"("shape": [2], "data_offsets": [0, 8])"), data), "has no 'dtype'");
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "data_offsets": [0, 8])"), data),
                 "has no 'shape'");
  }
  SECTION("unsupported dtype") {
    expect_error(raw_safetensors(tensor(R"("dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8])"), data),
                 "unsupported dtype 'F8_E4M3'");
  }
  SECTION("negative and overflowing shapes") {
    expect_error(raw_safetensors(tensor(R"("dtype": "F32", "shape": [-2], "data_offsets": [0, 8])"), data),
                 "not a non-negative integer");
    expect_error(
        raw_safetensors(
            tensor(R"("dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8])"), data),
        "overflows");
  }
  SECTION("metadata that is not strings") {
    expect_error(raw_safetensors(R"({"__metadata__": {"epoch": 3}})", ""), "__metadata__");
  }
  SECTION("a name that is not in the file") {
    write_bytes(path, good);
    REQUIRE_THROWS_WITH(SafetensorsFile(path).load("b"), Catch::Contains("no tensor named 'b'"));
  }
}

TEST_CASE("files that are not checkpoints are reported by name and reason", "[weights]") {
  TempDir dir;
  const auto path = dir / "weights.bin";

  write_bytes(path, "this is a text file, not a model\n");
  REQUIRE_THROWS_WITH(
      load_checkpoint(path),
      Catch::Contains(path.string() + ": not a checkpoint (expected .safetensors or a torch.save "
                                      ".pth zip)"));

  write_bytes(path, "");
  REQUIRE_THROWS_WITH(load_checkpoint(path), Catch::Contains(path.string()) && Catch::Contains("empty file"));

  const auto missing = dir / "missing.safetensors";
  REQUIRE_THROWS_WITH(load_checkpoint(missing),
                      Catch::Contains(missing.string()) && Catch::Contains("No such file or directory"));

  // A folder is read as a diffusers model folder (tests/test_diffusers_folder.cpp); this one holds no VAE.
  REQUIRE_THROWS_WITH(load_checkpoint(dir.path()),
                      Catch::Contains(dir.path().string()) && Catch::Contains("not a diffusers VAE"));

  write_bytes(path, std::string("\x80\x02\x8a\x0alegacy torch.save pickle", 28));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Catch::Contains("legacy (non-zip) torch.save"));
}

TEST_CASE("a damaged or foreign .pth zip is reported", "[weights]") {
  TempDir dir;
  const auto path = dir / "weights.pth";
  const auto original = read_bytes(kData / "wan21-tiny" / "weights.pth");

  write_bytes(path, original.substr(0, original.size() / 2));
  REQUIRE_THROWS_WITH(load_checkpoint(path),
                      Catch::Contains(path.string()) && Catch::Contains("truncated or corrupt zip"));

  write_bytes(path, original.substr(0, 100));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Catch::Contains("truncated or corrupt zip"));

  write_bytes(path, zip_with_one_file("notes/readme.txt", "hello\n"));
  REQUIRE_THROWS_WITH(load_checkpoint(path),
                      Catch::Contains(path.string()) && Catch::Contains("not a PyTorch checkpoint"));
}

TEST_CASE("original layouts are recognised and left alone", "[weights]") {
  for (const char* model : {"wan21-tiny", "wan22-tiny", "seedvr2-tiny"}) {
    INFO(model);
    const auto path = kData / model / "weights.safetensors";
    const auto checkpoint = load_checkpoint(path);
    CHECK(checkpoint.layout == "original");
    CHECK(names_of(checkpoint.tensors) == names_of(read_all(path)));
  }
  for (const char* keys :
       {"wan21-released-keys.json", "wan22-released-keys.json", "seedvr2-released-keys.json"}) {
    INFO(keys);
    auto tensors = released_names(keys);
    const auto names = names_of(tensors);
    CHECK(normalize_layout(tensors) == "original");
    CHECK(names_of(tensors) == names);
  }
}

TEST_CASE("a diffusers Wan2.1 file loads under the original names", "[weights]") {
  TempDir dir;
  const auto original = read_all(kData / "wan21-tiny" / "weights.safetensors");
  const auto diffusers = renamed(original, wan21_to_diffusers);
  // The test's own mapping gives diffusers' names.
  for (const char* name :
       {"quant_conv.weight", "decoder.conv_in.weight", "encoder.norm_out.gamma",
        "encoder.down_blocks.3.conv_shortcut.weight", "encoder.mid_block.attentions.0.to_qkv.weight",
        "decoder.mid_block.resnets.1.norm2.gamma", "decoder.up_blocks.3.resnets.2.conv2.weight",
        "decoder.up_blocks.1.upsamplers.0.time_conv.weight"}) {
    INFO(name);
    CHECK(diffusers.count(name) == 1);
  }

  const auto path = dir / "diffusion_pytorch_model.safetensors";
  write_safetensors(path, diffusers);
  const auto checkpoint = load_checkpoint(path);
  CHECK(checkpoint.layout == "diffusers");
  require_same_tensors(checkpoint.tensors, original);
}

TEST_CASE("the Wan2.1 decoder mapping follows the block sizes found in the file", "[weights]") {
  // One residual block per stage: up blocks of 2 resnets, so upsamplers sit at 2, 5 and 8 of the flat list.
  StateDict diffusers;
  std::set<std::string> expected;
  for (int block = 0; block < 4; ++block) {
    for (int r = 0; r < 2; ++r) {
      const auto stem = "decoder.up_blocks." + std::to_string(block) + ".resnets." + std::to_string(r);
      const auto flat = "decoder.upsamples." + std::to_string(3 * block + r);
      diffusers.emplace(stem + ".norm1.gamma", torch::zeros({1}));
      diffusers.emplace(stem + ".conv2.bias", torch::zeros({1}));
      expected.insert({flat + ".residual.0.gamma", flat + ".residual.6.bias"});
    }
    if (block < 3) {
      const auto stem = "decoder.up_blocks." + std::to_string(block) + ".upsamplers.0";
      diffusers.emplace(stem + ".resample.1.weight", torch::zeros({1}));
      expected.insert("decoder.upsamples." + std::to_string(3 * block + 2) + ".resample.1.weight");
    }
  }
  diffusers.emplace("post_quant_conv.weight", torch::zeros({1}));
  expected.insert("conv2.weight");

  CHECK(normalize_layout(diffusers) == "diffusers");
  CHECK(names_of(diffusers) == expected);
}

TEST_CASE("a diffusers Wan2.2 file loads under the original names", "[weights]") {
  TempDir dir;
  const auto original = read_all(kData / "wan22-tiny" / "weights.safetensors");
  const auto diffusers = renamed(original, wan22_to_diffusers);
  for (const char* name :
       {"encoder.down_blocks.1.resnets.0.conv_shortcut.weight",
        "encoder.down_blocks.0.downsampler.resample.1.weight",
        "decoder.up_blocks.0.upsampler.time_conv.weight", "decoder.up_blocks.3.resnets.2.norm1.gamma"}) {
    INFO(name);
    CHECK(diffusers.count(name) == 1);
  }
  const auto path = dir / "wan22.safetensors";
  write_safetensors(path, diffusers);
  const auto checkpoint = load_checkpoint(path);
  CHECK(checkpoint.layout == "diffusers");
  require_same_tensors(checkpoint.tensors, original);
}

TEST_CASE("SeedVR2's legacy attention names are renamed", "[weights]") {
  TempDir dir;
  const auto original = read_all(kData / "seedvr2-tiny" / "weights.safetensors");
  const auto legacy = renamed(original, seedvr2_to_legacy);
  CHECK(legacy.count("decoder.mid_block.attentions.0.proj_attn.weight") == 1);
  CHECK(legacy.count("encoder.mid_block.attentions.0.query.bias") == 1);

  const auto path = dir / "ema_vae.safetensors";
  write_safetensors(path, legacy);
  const auto checkpoint = load_checkpoint(path);
  CHECK(checkpoint.layout == "seedvr2-legacy-attention");
  require_same_tensors(checkpoint.tensors, original);
}

TEST_CASE("a wrapper prefix on every key is stripped", "[weights]") {
  const auto original = read_all(kData / "wan21-tiny" / "weights.safetensors");
  for (const std::string prefix : {"first_stage_model.", "vae.", "model.", "module.model."}) {
    INFO(prefix);
    auto wrapped = renamed(original, [&](const std::string& name) { return prefix + name; });
    CHECK(normalize_layout(wrapped) == "original");
    require_same_tensors(wrapped, original);
  }
  // A prefix that only some keys carry is part of their names.
  auto partial = original;
  partial.emplace("vae.extra", torch::zeros({1}));
  normalize_layout(partial);
  CHECK(partial.count("vae.extra") == 1);
}
