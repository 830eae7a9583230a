// The Wan2.1 model: chunk invariance, the released architecture's tensors, loading from every layout, and the
// errors of a checkpoint that does not fit.
#include <tuple>

#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/kernel_log.h"
#include "core/kernels/norm_silu.h"
#include "core/layers.h"
#include "core/models/registry.h"
#include "core/models/wan/wan_blocks.h"
#include "core/safetensors.h"
#include "core/vae_model.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {
namespace {

std::filesystem::path wan21_dir() {
  return data_dir() / "wan21-tiny";
}

std::shared_ptr<core::VaeModel> tiny_wan21(const std::string& file = "weights.safetensors") {
  return core::build_model(core::load_checkpoint(wan21_dir() / file));
}

// Chunk invariance is a property of the algorithm: checked in float64, where any difference left is rounding
// at 1e-15 and not float32's summation order (which varies with the convolution's input length, ~1e-6).
std::shared_ptr<core::VaeModel> tiny_wan21_f64() {
  return core::build_model(core::load_checkpoint(wan21_dir() / "weights.safetensors"),
                           {"", torch::kCPU, torch::kDouble});
}

// Original -> diffusers (AutoencoderKLWan) names, written independently of the loader's mapping.
std::string to_diffusers(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> prefix = {
      {"encoder.conv1.", "encoder.conv_in."},
      {"decoder.conv1.", "decoder.conv_in."},
      {"encoder.head.0.", "encoder.norm_out."},
      {"encoder.head.2.", "encoder.conv_out."},
      {"decoder.head.0.", "decoder.norm_out."},
      {"decoder.head.2.", "decoder.conv_out."},
      {"conv1.", "quant_conv."},
      {"conv2.", "post_quant_conv."},
      {"encoder.middle.0.", "encoder.mid_block.resnets.0."},
      {"encoder.middle.1.", "encoder.mid_block.attentions.0."},
      {"encoder.middle.2.", "encoder.mid_block.resnets.1."},
      {"decoder.middle.0.", "decoder.mid_block.resnets.0."},
      {"decoder.middle.1.", "decoder.mid_block.attentions.0."},
      {"decoder.middle.2.", "decoder.mid_block.resnets.1."},
      {"encoder.downsamples.", "encoder.down_blocks."}};
  std::string out = name;
  for (const auto& [from, to] : prefix) {
    if (out.rfind(from, 0) == 0) {
      out = to + out.substr(from.size());
      break;
    }
  }
  // decoder.upsamples.N: 15 entries, stages of 3 resnets followed by an upsampler (none after the last
  // stage).
  if (out.rfind("decoder.upsamples.", 0) == 0) {
    const auto rest = out.substr(std::string("decoder.upsamples.").size());
    const int n = std::stoi(rest.substr(0, rest.find('.')));
    const auto tail = rest.substr(rest.find('.'));
    const int stage = n / 4, pos = n % 4;
    out = pos == 3 ? "decoder.up_blocks." + std::to_string(stage) + ".upsamplers.0" + tail
                   : "decoder.up_blocks." + std::to_string(stage) + ".resnets." + std::to_string(pos) + tail;
  }
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{".residual.0.", ".norm1."},
                                                        {".residual.2.", ".conv1."},
                                                        {".residual.3.", ".norm2."},
                                                        {".residual.6.", ".conv2."},
                                                        {".shortcut.", ".conv_shortcut."}}) {
    if (auto p = out.find(from); p != std::string::npos) out.replace(p, from.size(), to);
  }
  return out;
}

}  // namespace

TEST_CASE("frames pushed in arbitrary pieces give the same latents", "[model][chunks]") {
  auto model = tiny_wan21_f64();
  const auto video = read_tensors(wan21_dir() / "cases.safetensors").at("video").to(torch::kDouble);
  const auto reference = core::encode_video(*model, video, {1});
  core::Run run(*model, core::Device::of(model->device()), core::Op::kEncode, {2});
  std::vector<torch::Tensor> parts;
  int64_t t = 0;
  for (int64_t piece : {3, 1, 7, 6}) {
    if (auto z = run.push(video.narrow(2, t, piece)); z.defined()) parts.push_back(z);
    t += piece;
  }
  if (auto z = run.finish(); z.defined()) parts.push_back(z);
  CHECK(relative_error(torch::cat(parts, 2), reference) <= 1e-12);
}

TEST_CASE("every family computes the same function channels-last, the GPU's and the CPU's float32 layout",
          "[model][layout]") {
  // The GPU runs channels-last (Note [Channels-last]), and so does float32 on the CPU (Note [Channels-last on
  // the CPU]), float64 plain. Every layout-aware step - padding frames, the 2x upsampler, the temporal frame
  // doubling, the attention's token view, SeedVR2's pixel shuffle into the conv buffer, its padded
  // downsampling, the CPU RMS norm's and SeedVR2's composite GroupNorm's channels-last paths (Note [The RMS
  // norm off the GPU], Note [The GroupNorm on the CPU]) - gives the plain layout's function on each family's
  // golden inputs: in float64 to its rounding, and in float32, where oneDNN's convolutions keep the layout
  // from layer to layer (float64's answer in the plain one), to float32's.
  for (const auto& tiny : tiny_models()) {
    INFO(tiny.family);
    const auto cases = read_tensors(tiny.folder / "cases.safetensors");
    for (const auto dtype : {torch::kDouble, torch::kFloat}) {
      INFO(c10::toString(dtype));
      auto last = load_tiny(tiny, torch::kCPU, dtype);
      auto plain = load_tiny(tiny, torch::kCPU, dtype);
      CHECK(last->channels_last() == (dtype == torch::kFloat));  // the CPU's default
      last->set_channels_last(true);
      plain->set_channels_last(false);
      const double bound = dtype == torch::kDouble ? 1e-12 : 1e-5;
      const auto latent = cases.at("latent").to(dtype);
      const auto video = cases.at("video").to(dtype);
      for (int64_t chunk : {1, 2}) {
        INFO("chunk " << chunk);
        CHECK(relative_error(core::decode_latents(*last, latent, {chunk}),
                             core::decode_latents(*plain, latent, {chunk})) <= bound);
        CHECK(relative_error(core::encode_video(*last, video, {chunk}),
                             core::encode_video(*plain, video, {chunk})) <= bound);
      }
    }
  }
}

TEST_CASE("the temporal upsampler hands on, in every chunk, a layout the GPU kernels take",
          "[model][layout]") {
  // Note [Doubled frames' layout]: the upsampler's output goes to the next residual block, whose fused norm
  // writes into its convolution's causal buffer and whose residual add reads it; the kernels' own layout
  // conditions are checked here, on the CPU. Chunks of one latent frame after the first once handed them a
  // strided view, and a first chunk of several frames a contiguous tensor. The same function in both layouts.
  torch::manual_seed(0);
  const int64_t in = 16, out = 8;
  core::WanResample layer(in, core::ResampleMode::kUpsample3d, out);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : layer.parameters()) p.copy_(torch::randn(p.sizes()) / std::sqrt(double(in * 3)));
  }
  layer.to(torch::kDouble);
  auto next = core::wan_conv3(out, out);
  next->to(torch::kDouble);
  for (const auto& chunks : std::vector<std::vector<int64_t>>{{1, 1, 1}, {2, 1, 3}}) {
    core::CausalCache last_cache, plain_cache;
    for (size_t i = 0; i < chunks.size(); ++i) {
      INFO("chunk " << i << " (" << chunks[i] << " frame(s)) of a run whose first has " << chunks[0]);
      const auto x = torch::randn({1, in, chunks[i], 5, 6}, torch::kDouble);
      last_cache.rewind();  // as the model does at the start of each chunk
      plain_cache.rewind();
      const auto got = layer.forward(x.contiguous(torch::MemoryFormat::ChannelsLast3d), last_cache);
      const auto expected = layer.forward(x, plain_cache);
      CHECK(got.is_contiguous(torch::MemoryFormat::ChannelsLast3d));
      core::CausalCache::Slot slot;  // the next convolution's, as norm_silu_conv prepares it
      CHECK(core::kernels::rms_norm_silu_takes_layout(got, next->prepare_with(got, slot).fill));
      CHECK(core::kernels::add_residual_takes_layout(torch::empty_like(got), got));
      CHECK(relative_error(got, expected) <= 1e-12);
    }
  }
}

TEST_CASE("on CUDA the layers keep the channels-last layout", "[model][layout][gpu]") {
  // CPU convolutions may answer in the plain layout; cuDNN keeps channels-last, and so must every other step,
  // or a transpose would hide in the run.
  if (!cuda_here()) return;
  auto checkpoint = core::load_checkpoint(wan21_dir() / "weights.safetensors");
  auto last = core::build_model(checkpoint, {"", torch::kCUDA, torch::kFloat});
  auto plain = core::build_model(checkpoint, {"", torch::kCUDA, torch::kFloat, nullptr, false});
  REQUIRE(last->channels_last());
  const auto latent = read_tensors(wan21_dir() / "cases.safetensors").at("latent");
  const auto decoded = core::decode_latents(*last, latent, {1});
  CHECK(decoded.is_contiguous(torch::MemoryFormat::ChannelsLast3d));
  CHECK(relative_error(decoded.cpu(), core::decode_latents(*plain, latent, {1}).cpu()) <= 1e-5);
}

TEST_CASE("off the GPU RMSNorm+SiLU written into a causal buffer is SiLU of the norm", "[model][layers]") {
  // Note [The RMS norm off the GPU]: the norm divides straight into the buffer and SiLU runs there in place.
  torch::manual_seed(0);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const bool channels_last : {false, true}) {
      for (const bool with_bias : {false, true}) {
        INFO(c10::toString(dtype) << (channels_last ? " channels-last" : " contiguous")
                                  << (with_bias ? ", bias" : ""));
        const int64_t c = 12;
        core::RMSNorm norm(c);
        {
          torch::NoGradGuard no_grad;
          norm.named_parameters()["gamma"].copy_(1 + 0.1 * torch::randn({c, 1, 1, 1}));
        }
        norm.to(dtype);
        const auto format =
            channels_last ? torch::MemoryFormat::ChannelsLast3d : torch::MemoryFormat::Contiguous;
        const auto x = (torch::randn({1, c, 3, 9, 13}) + 0.5).to(dtype).contiguous(format);
        const auto bias = with_bias ? (0.3 * torch::randn({c})).to(dtype) : torch::Tensor();
        auto buffer = torch::full({1, c, 5, 9, 13}, 7.0, x.options()).contiguous(format);
        norm.forward_silu_into(x, buffer.narrow(2, 2, 3), bias);
        const auto expected = torch::silu(norm.forward(with_bias ? x + bias.reshape({c, 1, 1, 1}) : x));
        const auto got = buffer.narrow(2, 2, 3);
        CHECK(((got - expected).abs().max() / expected.abs().max()).item<double>() <=
              (dtype == torch::kFloat ? 1e-7 : 1e-15));
        CHECK(torch::equal(buffer.narrow(2, 0, 2), torch::full({1, c, 2, 9, 13}, 7.0, x.options())));
      }
    }
  }
}

TEST_CASE("on CUDA the fused RMSNorm+SiLU and residual add match float64", "[model][gpu]") {
  // Note [Vectorised norm]: the 16-byte kernel for channel counts it divides (96 = 4 lanes x 3 vectors of 8
  // bf16, 192, 384, 128, 1024), the warp-per-voxel kernel for the others (20; 12 in bf16), the planar kernel
  // for contiguous tensors; each with and without the deferred bias (Note [Deferred bias]), into a causal
  // buffer's tail.
  if (!cuda_here()) return;
  torch::manual_seed(0);
  const auto cl = torch::MemoryFormat::ChannelsLast3d;
  for (const int64_t c : {96, 192, 384, 128, 1024, 20, 12}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      for (const bool channels_last : {true, false}) {
        for (const bool with_bias : {false, true}) {
          INFO(c << " channels, " << c10::toString(dtype)
                 << (channels_last ? " channels-last" : " contiguous") << (with_bias ? ", bias" : ""));
          core::RMSNorm norm(c);
          {
            torch::NoGradGuard no_grad;
            norm.named_parameters()["gamma"].copy_(1 + 0.1 * torch::randn({c, 1, 1, 1}));
          }
          const auto format = channels_last ? cl : torch::MemoryFormat::Contiguous;
          const auto x = (torch::randn({2, c, 3, 9, 13}) + 0.5).to(torch::kCUDA, dtype).contiguous(format);
          const auto bias = with_bias ? (0.3 * torch::randn({c})).to(dtype) : torch::Tensor();
          // Float64 from the very values the kernel reads.
          core::RMSNorm reference(c);
          {
            torch::NoGradGuard no_grad;
            reference.named_parameters()["gamma"].copy_(norm.named_parameters()["gamma"]);
          }
          reference.to(torch::kDouble);
          auto xd = x.cpu().to(torch::kDouble);
          if (with_bias) xd = xd + bias.to(torch::kDouble).reshape({c, 1, 1, 1});
          const auto expected = torch::silu(reference.forward(xd));
          norm.to(torch::kCUDA, dtype);
          auto buffer = torch::zeros({2, c, 5, 9, 13}, x.options()).contiguous(format);
          norm.forward_silu_into(x, buffer.narrow(2, 2, 3), with_bias ? bias.cuda() : bias);
          const double tolerance = dtype == torch::kFloat ? 1e-5 : 5e-3;
          CHECK(relative_error(buffer.narrow(2, 2, 3).cpu().to(torch::kDouble), expected) <= tolerance);
          CHECK(buffer.narrow(2, 0, 2).abs().max().item<double>() == 0);  // the head is left alone

          // One batch item with a tail (Note [History written by the norm] in core/layers.cpp): its last two
          // frames written a second time, the same values, where the vectorised kernel runs; else untouched.
          const auto x1 = x.narrow(0, 0, 1).contiguous(format);
          auto one = torch::zeros({1, c, 5, 9, 13}, x.options()).contiguous(format);
          auto tail = torch::zeros({1, c, 2, 9, 13}, x.options()).contiguous(cl);
          const bool tail_written =
              norm.forward_silu_into(x1, one.narrow(2, 2, 3), with_bias ? bias.cuda() : bias, tail);
          CHECK(relative_error(one.narrow(2, 2, 3).cpu().to(torch::kDouble), expected.narrow(0, 0, 1)) <=
                tolerance);
          if (!channels_last) CHECK_FALSE(tail_written);
          if (channels_last && dtype == torch::kBFloat16 && c % 8 == 0) CHECK(tail_written);  // the models'
          if (tail_written)
            CHECK(torch::equal(tail, one.narrow(2, 3, 2)));
          else
            CHECK(tail.abs().max().item<double>() == 0);

          // Into a band's buffer, its rows cut by one halo row above and one below
          // (Note [Frames of a band's buffer]): the own kernel frame by frame where the layout is
          // channels-last.
          core::KernelLog::reset();
          core::KernelLog::enable(true);
          auto band = torch::zeros({2, c, 5, 11, 13}, x.options()).contiguous(format);
          norm.forward_silu_into(x, band.narrow(2, 2, 3).narrow(3, 1, 9), with_bias ? bias.cuda() : bias);
          core::KernelLog::enable(false);
          CHECK(relative_error(band.narrow(2, 2, 3).narrow(3, 1, 9).cpu().to(torch::kDouble), expected) <=
                tolerance);
          CHECK(band.narrow(3, 0, 1).abs().max().item<double>() == 0);  // the halo rows are left alone
          CHECK(band.narrow(3, 10, 1).abs().max().item<double>() == 0);
          if (channels_last) {
            bool own = false;
            for (const auto& e : core::KernelLog::entries())
              own = own || (e.kernel == "rms_norm_silu" && e.path == "own kernel");
            CHECK(own);
          }

          // y += s + bias, in place.
          auto y = torch::randn({2, c, 3, 9, 13}).to(torch::kCUDA, dtype).contiguous(format);
          const auto s = torch::randn({2, c, 3, 9, 13}).to(torch::kCUDA, dtype).contiguous(format);
          const auto b = (0.3 * torch::randn({c})).to(torch::kCUDA, dtype);
          auto sum = y.cpu().to(torch::kDouble) + s.cpu().to(torch::kDouble) +
                     b.cpu().to(torch::kDouble).reshape({c, 1, 1, 1});
          core::FloatCopy b32;
          core::add_residual(y, s, b, b32);
          CHECK(relative_error(y.cpu().to(torch::kDouble), sum) <= tolerance);
        }
      }
    }
  }
}

TEST_CASE("on CUDA the upsampler on the input grid matches float64", "[model][gpu]") {
  // Note [Upsampling on the input grid]: the 2x2 phase convolution and the interleave kernel (channels-last,
  // with the bias), against the same layer in float64 on the CPU, whose result the golden data checks.
  if (!cuda_here()) return;
  torch::manual_seed(0);
  struct Shape {
    int64_t in, out, t, h, w;
  };
  for (const Shape s :
       {Shape{32, 16, 2, 5, 7}, Shape{192, 96, 1, 9, 16}, Shape{16, 24, 3, 4, 4}, Shape{16, 12, 2, 3, 5}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      INFO(s.in << " -> " << s.out << " channels, " << s.t << "x" << s.h << "x" << s.w << ", "
                << c10::toString(dtype));
      core::WanResample layer(s.in, core::ResampleMode::kUpsample2d, s.out);
      {
        torch::NoGradGuard no_grad;
        for (auto& p : layer.parameters()) p.copy_(torch::randn(p.sizes()) / std::sqrt(double(s.in * 9)));
      }
      const auto x = torch::randn({2, s.in, s.t, s.h, s.w});
      core::CausalCache cache;
      layer.to(torch::kDouble);
      const auto expected = layer.forward(x.to(torch::kDouble), cache);
      layer.to(torch::kCUDA, dtype);
      const auto xg = x.to(torch::kCUDA, dtype).contiguous(torch::MemoryFormat::ChannelsLast3d);
      const auto got = layer.forward(xg, cache);
      CHECK(got.is_contiguous(torch::MemoryFormat::ChannelsLast3d));
      CHECK(relative_error(got.cpu().to(torch::kDouble), expected) <= (dtype == torch::kFloat ? 1e-5 : 1e-2));
    }
  }
}

TEST_CASE("VAECODEC_AUTOTUNE_CANDIDATES takes a count of candidates or is refused", "[model]") {
  const int before = at::globalContext().benchmarkLimitCuDNN();
  ::setenv("VAECODEC_AUTOTUNE_CANDIDATES", "3", 1);
  core::Device::set_autotune(false);
  CHECK(at::globalContext().benchmarkLimitCuDNN() == 3);
  for (const char* bad : {"", "three", "3x", "-1"}) {
    INFO("'" << bad << "'");
    ::setenv("VAECODEC_AUTOTUNE_CANDIDATES", bad, 1);
    REQUIRE_THROWS_WITH(core::Device::set_autotune(false),
                        Catch::Contains("VAECODEC_AUTOTUNE_CANDIDATES: expected"));
  }
  ::unsetenv("VAECODEC_AUTOTUNE_CANDIDATES");
  at::globalContext().setBenchmarkLimitCuDNN(before);
}

TEST_CASE("a run rejects frame counts other than 1 + 4k", "[model][chunks]") {
  auto model = tiny_wan21();
  core::Run run(*model, core::Device::of(model->device()), core::Op::kEncode);
  run.push(torch::zeros({1, 3, 6, 64, 48}));
  REQUIRE_THROWS_WITH(run.finish(), Catch::Contains("1 + 4k frames, got 6"));
  REQUIRE_THROWS_WITH(core::encode_video(*model, torch::zeros({1, 3, 5, 60, 48})),
                      Catch::Contains("not a multiple of 8"));
}

TEST_CASE(".pth, .safetensors and diffusers-layout files give the same outputs", "[model][weights]") {
  const auto latent = read_tensors(wan21_dir() / "cases.safetensors").at("latent");
  const auto from_safetensors = core::decode_latents(*tiny_wan21("weights.safetensors"), latent);
  const auto from_pth = core::decode_latents(*tiny_wan21("weights.pth"), latent);
  CHECK(torch::equal(from_safetensors, from_pth));

  TempDir dir;
  std::map<std::string, torch::Tensor> renamed;
  for (const auto& [name, tensor] : read_tensors(wan21_dir() / "weights.safetensors"))
    renamed[to_diffusers(name)] = tensor;
  REQUIRE(renamed.count("decoder.up_blocks.1.upsamplers.0.time_conv.weight") == 1);
  REQUIRE(renamed.count("decoder.up_blocks.3.resnets.2.norm1.gamma") == 1);
  core::write_safetensors(dir / "diffusers.safetensors", renamed);
  const auto checkpoint = core::load_checkpoint(dir / "diffusers.safetensors");
  CHECK(checkpoint.layout == "diffusers");
  const auto from_diffusers = core::decode_latents(*core::build_model(checkpoint), latent);
  CHECK(torch::equal(from_safetensors, from_diffusers));
}

TEST_CASE("the released dim-96 model expects exactly the released tensors", "[model][weights]") {
  auto model = released_model_matching("wan2.1-vae", "wan21-released-keys.json", 194);
  CHECK(model->info().latent_channels == 16);
  CHECK(model->info().spatial_factor == 8);
  CHECK(model->info().temporal_factor == 4);
}

TEST_CASE("a checkpoint that does not fit the model names the tensor and the file", "[model][weights]") {
  auto checkpoint = core::load_checkpoint(wan21_dir() / "weights.safetensors");
  auto build = [&] { return core::build_model(checkpoint, {"wan2.1-vae"}); };
  SECTION("missing") {
    checkpoint.tensors.erase("decoder.upsamples.7.time_conv.bias");
    REQUIRE_THROWS_WITH(build(), Catch::Contains("weights.safetensors") &&
                                     Catch::Contains("missing tensor 'decoder.upsamples.7.time_conv.bias'"));
  }
  SECTION("misshapen") {
    checkpoint.tensors["encoder.middle.1.proj.weight"] = torch::zeros({32, 32, 1, 2});
    REQUIRE_THROWS_WITH(build(),
                        Catch::Contains("tensor 'encoder.middle.1.proj.weight' has shape [32, 32, 1, 2]") &&
                            Catch::Contains("expects [32, 32, 1, 1]"));
  }
  SECTION("unexpected") {
    checkpoint.tensors["decoder.extra.weight"] = torch::zeros({2});
    REQUIRE_THROWS_WITH(build(), Catch::Contains("unexpected tensor 'decoder.extra.weight'"));
  }
  SECTION("not a VAE") {
    checkpoint.tensors = {{"model.layer.weight", torch::zeros({4, 4})}};
    REQUIRE_THROWS_WITH(core::build_model(checkpoint), Catch::Contains("not a known VAE"));
  }
}

TEST_CASE("a convolution computed in pieces of frames and rows is the whole convolution", "[model][layers]") {
  // Note [Convolutions past 2^31 elements]: limits that force pieces of several frames, of one frame, and
  // bands of rows, with and without padding and stride.
  torch::manual_seed(7);
  const auto x =
      torch::randn({1, 6, 7, 11, 9}, torch::kFloat64).contiguous(torch::MemoryFormat::ChannelsLast3d);
  const auto bias = torch::randn({5}, torch::kFloat64);
  for (auto [kernel, stride, padding] :
       {std::tuple{std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{1, 1, 1},
                   std::array<int64_t, 3>{0, 1, 1}},
        std::tuple{std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{1, 1, 1},
                   std::array<int64_t, 3>{1, 1, 1}},
        std::tuple{std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{2, 2, 2},
                   std::array<int64_t, 3>{1, 1, 0}},
        std::tuple{std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{1, 1, 1},
                   std::array<int64_t, 3>{0, 0, 0}}}) {
    const auto weight = torch::randn({5, 6, kernel[0], kernel[1], kernel[2]}, torch::kFloat64);
    const auto want =
        at::conv3d(x, weight, bias, {stride[0], stride[1], stride[2]}, {padding[0], padding[1], padding[2]});
    for (int64_t limit : {int64_t{1} << 40, int64_t{2000}, int64_t{600}, int64_t{150}, int64_t{1}}) {
      // piece_output: pieces of whole frames within the index limit, of one frame, of bands.
      for (int64_t piece_output : {INT64_MAX, int64_t{700}, int64_t{1}}) {
        CAPTURE(kernel, stride, padding, limit, piece_output);
        const auto got = core::conv3d_in_pieces(x, weight, bias, stride, padding, limit, piece_output);
        REQUIRE(got.sizes() == want.sizes());
        REQUIRE(torch::allclose(got, want, 0, 1e-12));
      }
    }
  }
}

TEST_CASE("on CUDA a convolution past 2^31 elements runs in pieces", "[model][layers][gpu]") {
  if (!cuda_here()) return;
  // SeedVR2's 256 -> 128 convolution at 1920x1080, 6 frames (a chunk of 4 and its cache of 2): 3.2e9 inputs.
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto x = torch::randn({1, 256, 6, 1080, 1920}, opts).contiguous(torch::MemoryFormat::ChannelsLast3d);
  const auto weight =
      (torch::randn({128, 256, 3, 3, 3}, opts) * 0.02).contiguous(torch::MemoryFormat::ChannelsLast3d);
  const auto bias = torch::randn({128}, opts);
  // The pieces themselves at cuDNN's limit (the layer takes them there unless an own kernel runs the shape);
  // what they cost is measured by the SeedVR2 1080p rows of scripts/gpu_budgets.sh.
  const auto got = core::conv3d_in_pieces(x, weight, bias, {1, 1, 1}, {0, 1, 1}, INT32_MAX);
  REQUIRE(got.size(2) == 4);
  // In pieces of one frame (as the layer runs them) the input is read in place: the output and one frame's
  // output besides, and cuDNN's workspace (Note [Convolutions past 2^31 elements]).
  core::Device& device = core::Device::of(torch::kCUDA);
  device.synchronize();
  device.release_cached();
  device.reset_peak_statistics();
  const int64_t before = device.peak_allocated_bytes();
  const auto framed =
      core::conv3d_in_pieces(x, weight, bias, {1, 1, 1}, {0, 1, 1}, INT32_MAX, int64_t{1} << 28);
  device.synchronize();
  const double frame_bytes = 128.0 * 1080 * 1920 * 2, added = device.peak_allocated_bytes() - before;
  CAPTURE(added / frame_bytes);
  CHECK(added <= (4 + 1.5) * frame_bytes);  // the output's 4 frames and one frame and a half
  const auto framed_error = (framed.to(torch::kFloat) - got.to(torch::kFloat)).norm().item<double>() /
                            got.to(torch::kFloat).norm().item<double>();
  CHECK(framed_error <= 1e-2);
  // Every output frame from its three input frames alone, a convolution under the limit: bf16's rounding
  // apart.
  for (int64_t t = 0; t < 4; ++t) {
    const auto one = at::conv3d(x.narrow(2, t, 3), weight, bias, {1, 1, 1}, {0, 1, 1}).to(torch::kFloat);
    const auto piece = got.narrow(2, t, 1).to(torch::kFloat);
    CHECK((piece - one).norm().item<double>() / one.norm().item<double>() <= 1e-2);
  }
}

TEST_CASE("on CUDA attention wider than the fused kernels runs in blocks of queries and matches float64",
          "[model][layers][gpu]") {
  if (!cuda_here()) return;
  // Note [Attention wider than the fused kernels] in core/layers.cpp: SeedVR2's 512-channel head over two
  // frames of 9000 latent pixels, two blocks of queries each (a block's scratch over 9000 keys holds 5952
  // queries in bf16, 7424 in float32). Queries on both sides of bf16's edge and the last ones against float64
  // on the CPU.
  const int64_t tokens = 9000, channels = 512;
  const auto cpu = torch::TensorOptions().dtype(torch::kDouble);
  const auto q = torch::randn({2, 1, tokens, channels}, cpu), k = torch::randn({2, 1, tokens, channels}, cpu),
             v = torch::randn({2, 1, tokens, channels}, cpu);
  const auto rows =
      torch::cat({torch::arange(0, 32), torch::arange(5930, 5990), torch::arange(tokens - 32, tokens)});
  const auto scores = torch::matmul(q.index_select(2, rows), k.transpose(2, 3)) / std::sqrt(double(channels));
  const auto reference = torch::matmul(torch::softmax(scores, -1), v).squeeze(1);
  for (const auto& [dtype, bound] : {std::pair{torch::kFloat, 1e-5}, std::pair{torch::kBFloat16, 1e-2}}) {
    INFO("dtype " << dtype);
    const auto on = [&](const torch::Tensor& x) { return x.to(torch::kCUDA, dtype); };
    core::KernelLog::reset();
    core::KernelLog::enable(true);
    const auto out = core::frame_attention(on(q), on(k), on(v));
    core::KernelLog::enable(false);
    const auto log = core::KernelLog::entries();  // the blocks ran, not LibTorch's kernel
    REQUIRE(log.size() == 1);
    CHECK(log.front().kernel == "attention");
    CHECK(log.front().path == "blocks of queries");
    REQUIRE(out.sizes() == torch::IntArrayRef({2, tokens, channels}));
    CHECK(relative_error(out.index_select(1, rows.to(torch::kCUDA)).cpu().to(torch::kDouble), reference) <=
          bound);
  }
}

}  // namespace vaecodec::test
