// Hostile files: crafted weights, latent and preset files are refused in one line and never run code, read
// out of bounds, overflow the stack or allocate more than the file holds
// (Note [Checking a torch.save pickle], Note [Untrusted JSON]). Every file is made here, byte by byte.

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/models/registry.h"
#include "core/presets.h"
#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/pickle_support.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using Catch::Contains;
using vaecodec::core::load_checkpoint;
using vaecodec::test::PickleWriter;
using vaecodec::test::TempDir;
using vaecodec::test::torch_zip;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(v));
  return out;
}

// A safetensors file put together by hand: header length, header text, data.
std::string raw_safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, sizeof(n));
  return out + header + data;
}

// {"w": tensor} with the given layout over a storage "0" of `numel` floats whose record holds `record`.
std::string pth_with_tensor(int64_t numel, int64_t offset, const std::vector<int64_t>& sizes,
                            const std::vector<int64_t>& strides, const std::string& record) {
  PickleWriter p;
  p.proto()
      .empty_dict()
      .put(0)
      .mark()
      .string("w")
      .tensor("0", numel, offset, sizes, strides)
      .setitems()
      .stop();
  return torch_zip(p.bytes(), {{"0", record}});
}

// Peak resident memory of this process so far, in bytes.
long peak_rss_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

}  // namespace

TEST_CASE("a crafted .pth of the shape torch.save writes loads (the crafting is right)", "[hostile]") {
  TempDir dir;
  const auto path = dir / "w.pth";
  write_bytes(path, pth_with_tensor(6, 0, {2, 3}, {3, 1}, float_bytes({1, 2, 3, 4, 5, 6})));
  const auto checkpoint = load_checkpoint(path);
  REQUIRE(checkpoint.tensors.size() == 1);
  CHECK(torch::equal(checkpoint.tensors.at("w"), torch::arange(1, 7, torch::kFloat).view({2, 3})));

  // A view into a larger storage, as a slice saves.
  write_bytes(path, pth_with_tensor(6, 1, {2, 2}, {3, 1}, float_bytes({1, 2, 3, 4, 5, 6})));
  CHECK(torch::equal(load_checkpoint(path).tensors.at("w"), torch::tensor({{2.f, 3.f}, {5.f, 6.f}})));
}

TEST_CASE("a .pth whose pickle names any other global is refused before anything runs", "[hostile]") {
  TempDir dir;
  const auto path = dir / "evil.pth";
  const auto marker = dir / "ran";
  // What pickle.loads would run as os.system("touch <marker>"): GLOBAL, argument tuple, REDUCE.
  for (const auto& [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"posix", "system"},
                                                        {"os", "system"},
                                                        {"builtins", "eval"},
                                                        {"subprocess", "Popen"},
                                                        {"torch", "load"},
                                                        {"__main__", "TensorID"},
                                                        {"torch.jit._pickle", "build_tensorlist"}}) {
    INFO(module << "." << name);
    PickleWriter p;
    p.proto().global(module, name).string("touch " + marker.string()).tuple1().reduce().stop();
    write_bytes(path, torch_zip(p.bytes(), {}));
    REQUIRE_THROWS_WITH(load_checkpoint(path),
                        Contains(path.string() + ": not a loadable PyTorch checkpoint") &&
                            Contains("'" + module + "." + name + "'") && Contains("nothing was run"));
    CHECK_FALSE(fs::exists(marker));
  }

  // Inside an otherwise normal state dict, after a tensor.
  PickleWriter p;
  p.proto().empty_dict().put(0).mark().string("w").tensor("0", 1, 0, {1}, {1});
  p.string("x")
      .global("posix", "system")
      .string("touch " + marker.string())
      .tuple1()
      .reduce()
      .setitems()
      .stop();
  write_bytes(path, torch_zip(p.bytes(), {{"0", float_bytes({1})}}));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Contains("'posix.system'"));
  CHECK_FALSE(fs::exists(marker));

  PickleWriter parameter;
  parameter.proto().global("torch._utils", "_rebuild_parameter").stop();
  write_bytes(path, torch_zip(parameter.bytes(), {}));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Contains("nn.Parameter"));
}

TEST_CASE("a .pth tensor that reaches outside its storage record is refused", "[hostile]") {
  TempDir dir;
  const auto path = dir / "w.pth";
  const auto record = float_bytes({1, 2, 3, 4});
  const auto expect_refused = [&](const std::string& file, const std::string& why) {
    write_bytes(path, file);
    REQUIRE_THROWS_WITH(load_checkpoint(path), Contains(path.string()) && Contains(why));
  };
  expect_refused(pth_with_tensor(4, 0, {1000}, {1}, record), "reach past its 16 bytes");        // size
  expect_refused(pth_with_tensor(4, 3, {2}, {1}, record), "reach past its 16 bytes");           // offset
  expect_refused(pth_with_tensor(4, 0, {2, 2}, {1000, 1}, record), "reach past its 16 bytes");  // stride
  expect_refused(pth_with_tensor(4, 0, {2}, {-1}, record), "not non-negative integers");        // negative
  expect_refused(pth_with_tensor(4, 0, {65536, 65536, 65536, 65536}, {0, 0, 0, 0}, record), "overflow");
  // The storage claims more than its record holds, or a record that does not exist.
  expect_refused(pth_with_tensor(1 << 20, 0, {4}, {1}, record), "its record holds 16");
  PickleWriter p;
  p.proto().empty_dict().put(0).mark().string("w").tensor("7", 4, 0, {4}, {1}).setitems().stop();
  expect_refused(torch_zip(p.bytes(), {{"0", record}}), "no record");
  // A compressed record that unpacks to more than the file holds (a zip bomb).
  PickleWriter bomb;
  bomb.proto()
      .empty_dict()
      .put(0)
      .mark()
      .string("w")
      .tensor("0", 1 << 20, 0, {1 << 20}, {1})
      .setitems()
      .stop();
  expect_refused(torch_zip(bomb.bytes(), {{"0", std::string(4 << 20, '\0')}}, /*compressed=*/true),
                 "in a file of");
}

TEST_CASE("a one-byte change to a .pth memo index is refused without allocating", "[hostile]") {
  // The real test checkpoint's pickle, with the high byte of one LONG_BINPUT index set: LibTorch's
  // unpickler would fill its memo up to that index (tens of GB).
  caffe2::serialize::PyTorchStreamReader reader(
      (vaecodec::test::data_dir() / "wan21-tiny" / "weights.pth").string());
  const auto [data, size] = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char*>(data.get()), size);
  std::map<std::string, std::string> storages;
  for (const auto& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) == 0) {
      const auto [bytes, n] = reader.getRecord(name);
      storages[name.substr(5)] = std::string(static_cast<const char*>(bytes.get()), n);
    }
  }
  // LONG_BINPUT 256: memo entries are numbered in order, and those from 256 on take four bytes.
  const auto put = pickle.find(std::string("r\x00\x01\x00\x00", 5));
  REQUIRE(put != std::string::npos);
  TempDir dir;
  const auto path = dir / "weights.pth";
  write_bytes(path, torch_zip(pickle, storages));
  CHECK(load_checkpoint(path).tensors.size() > 10);  // unchanged, it loads

  pickle[put + 4] = '\x40';
  write_bytes(path, torch_zip(pickle, storages));
  const long rss_before = peak_rss_bytes();
  REQUIRE_THROWS_WITH(load_checkpoint(path), Contains(path.string()) && Contains("memo entry"));
  CHECK(peak_rss_bytes() - rss_before < (256L << 20));
}

TEST_CASE("malformed pickle programs are refused in one line", "[hostile]") {
  TempDir dir;
  const auto path = dir / "w.pth";
  const auto expect_refused = [&](const PickleWriter& p, const std::string& why) {
    write_bytes(path, torch_zip(p.bytes(), {}));
    REQUIRE_THROWS_WITH(load_checkpoint(path), Contains(path.string()) && Contains(why));
  };
  expect_refused(PickleWriter().proto().get(5).stop(), "never stored");
  expect_refused(PickleWriter().proto().string("a").put(1000000).stop(), "memo entry 1000000");
  expect_refused(PickleWriter().proto().raw("X\xf0\xff\xff\xff").stop(), "longer than the rest");
  expect_refused(PickleWriter().proto().empty_dict().mark().string("k").setitems().stop(),
                 "key without a value");
  expect_refused(PickleWriter().proto().string("a").mark().tuple2().stop(), "more values than the stack");
  expect_refused(PickleWriter().proto().empty_dict().put(0).get(0).string("k").get(0).setitem().stop(),
                 "into itself");
  expect_refused(PickleWriter().proto().raw(std::string(1, '\x8a')).raw("\x05").raw("12345").stop(), "LONG1");
  expect_refused(PickleWriter().proto().raw("a").stop(), "opcode 0x61");  // APPEND
  expect_refused(PickleWriter().proto().none().none().stop(), "2 values");
  expect_refused(PickleWriter()
                     .proto()
                     .global("collections", "OrderedDict")
                     .empty_tuple()
                     .reduce()
                     .mark()
                     .string("k")
                     .string("v")
                     .setitems()
                     .stop(),
                 "OrderedDict");
  // A cycle through the memo: d2 inside d1, then d1 into d2.
  expect_refused(PickleWriter()
                     .proto()
                     .empty_dict()
                     .put(0)
                     .string("inner")
                     .empty_dict()
                     .put(1)
                     .setitem()
                     .get(1)
                     .string("outer")
                     .get(0)
                     .setitem()
                     .stop(),
                 "after putting it into another");
  // Nesting deep enough to overflow the stack of a recursive destructor.
  PickleWriter deep;
  deep.proto().empty_tuple();
  for (int i = 0; i < 200000; ++i) deep.tuple1();
  expect_refused(deep.stop(), "deeper than 32");
  // Cut anywhere, the torch.save pickle is refused, never read past its end.
  PickleWriter good;
  good.proto().empty_dict().put(0).mark().string("w").tensor("0", 1, 0, {1}, {1}).setitems().stop();
  for (size_t cut = 0; cut + 1 < good.bytes().size(); ++cut) {
    INFO(cut);
    write_bytes(path, torch_zip(good.bytes().substr(0, cut), {{"0", float_bytes({1})}}));
    REQUIRE_THROWS_AS(load_checkpoint(path), vaecodec::Error);
  }
}

TEST_CASE("weights that are not floating point are refused", "[hostile]") {
  TempDir dir;
  for (const auto& [dtype, bytes] : std::vector<std::pair<std::string, int>>{
           {"I8", 1}, {"U8", 1}, {"BOOL", 1}, {"I64", 8}, {"I32", 4}, {"I16", 2}}) {
    INFO(dtype);
    const auto path = dir / "w.safetensors";
    const std::string header = R"({"w": {"dtype": ")" + dtype + R"(", "shape": [2], "data_offsets": [0, )" +
                               std::to_string(2 * bytes) + "]}}";
    write_bytes(path, raw_safetensors(header, std::string(2 * bytes, '\1')));
    REQUIRE_THROWS_WITH(load_checkpoint(path),
                        Contains(path.string() + ": tensor 'w' is") && Contains("must be floating point"));
  }
  const auto path = dir / "w.pth";
  PickleWriter p;
  p.proto()
      .empty_dict()
      .put(0)
      .mark()
      .string("w")
      .tensor("0", 2, 0, {2}, {1}, "LongStorage")
      .setitems()
      .stop();
  write_bytes(path, torch_zip(p.bytes(), {{"0", std::string(16, '\0')}}));
  REQUIRE_THROWS_WITH(load_checkpoint(path),
                      Contains("tensor 'w' is Long") && Contains("must be floating point"));
}

TEST_CASE("safetensors with duplicate names or overlapping tensors are refused", "[hostile]") {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  const std::string data = float_bytes({1, 2, 3, 4});
  write_bytes(path, raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                                    data));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Contains(path.string()) && Contains("key 'a' appears twice"));

  write_bytes(path, raw_safetensors(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                                    data));
  REQUIRE_THROWS_WITH(load_checkpoint(path), Contains(path.string()) && Contains("'a' and 'b' overlap"));

  // Adjacent ranges and empty tensors anywhere are fine.
  write_bytes(path, raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                                    data));
  CHECK(load_checkpoint(path).tensors.size() == 3);
}

TEST_CASE("JSON nested 200 000 deep or with numbers out of range is refused, not a crash", "[hostile]") {
  TempDir dir;
  // Found by fuzzing: nlohmann's parser throws out_of_range, not parse_error, for a number beyond double.
  const auto huge = dir / "huge.safetensors";
  write_bytes(
      huge,
      raw_safetensors(R"({"a": {"dtype": "F32", "shape": [555555555555E555], "data_offsets": [0, 0]}})", ""));
  REQUIRE_THROWS_WITH(load_checkpoint(huge),
                      Contains(huge.string()) && Contains("not valid JSON (a number out of range)"));

  const std::string deep = std::string(200000, '[') + std::string(200000, ']');

  const auto weights = dir / "w.safetensors";
  write_bytes(weights, raw_safetensors(R"({"a": {"dtype": "F32", "shape": )" + deep + "}}", ""));
  REQUIRE_THROWS_WITH(load_checkpoint(weights),
                      Contains(weights.string()) && Contains("nested deeper than 64"));

  // A latent file whose record nests deep inside the model config.
  const auto latents = dir / "l.safetensors";
  const std::string record = R"({"format_version": 1, "model": {"config": )" + deep + "}}";
  std::string escaped;
  for (char c : record) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
  write_bytes(latents, raw_safetensors(R"({"__metadata__": {"vaecodec": ")" + escaped +
                                           R"("}, "latents": {"dtype": "F32", "shape": [1, 1, 1, 1, 1], )"
                                           R"("data_offsets": [0, 4]}})",
                                       float_bytes({1})));
  REQUIRE_THROWS_WITH(vaecodec::io::read_latents(latents),
                      Contains(latents.string()) && Contains("nested deeper than 64"));

  const auto preset = dir / "p.json";
  write_bytes(preset, R"({"name": "x", "engine": )" + deep + "}");
  REQUIRE_THROWS_WITH(vaecodec::core::load_preset_file(preset),
                      Contains(preset.string()) && Contains("nested deeper than 64"));
}

TEST_CASE("config detection survives shapes no model has", "[hostile]") {
  // Empty and zero-size stand-ins (meta tensors: shapes without memory) where each family divides by or
  // indexes a size.
  const auto t = [](std::vector<int64_t> shape) {
    return torch::empty(shape, torch::TensorOptions().device(torch::kMeta));
  };
  const std::vector<vaecodec::core::StateDict> cases = {
      // Wan2.2: zero base width (a division by it), a zero-width stage (then a division by that), a scalar
      // norm.
      {{"encoder.conv1.weight", t({0, 12, 3, 3, 3})},
       {"conv2.weight", t({96, 48, 1, 1, 1})},
       {"decoder.head.0.gamma", t({256, 1, 1, 1})},
       {"encoder.downsamples.0.downsamples.0.residual.2.weight", t({0, 160, 3, 3, 3})}},
      {{"encoder.conv1.weight", t({160, 12, 3, 3, 3})},
       {"conv2.weight", t({96, 48, 1, 1, 1})},
       {"decoder.head.0.gamma", t({256, 1, 1, 1})},
       {"encoder.downsamples.0.downsamples.0.residual.2.weight", t({0, 160, 3, 3, 3})}},
      {{"encoder.conv1.weight", t({160, 12, 3, 3, 3})},
       {"conv2.weight", t({96, 48, 1, 1, 1})},
       {"decoder.head.0.gamma", t({})},
       {"encoder.downsamples.0.downsamples.0.residual.2.weight", t({})}},
      // SeedVR2: a scalar where a conv weight belongs.
      {{"encoder.conv_in.weight", t({128, 3, 3, 3, 3})},
       {"decoder.conv_in.weight", t({512, 16, 3, 3, 3})},
       {"decoder.up_blocks.0.upsamplers.0.upscale_conv.weight", t({2048, 512, 1, 1, 1})},
       {"encoder.down_blocks.0.resnets.0.conv1.weight", t({})}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const auto& family : vaecodec::core::model_families()) {
      INFO("case " << i << ", " << family.name);
      CHECK_FALSE(family.detect(cases[i]).has_value());
    }
  }
}
