// The commands that run a model over videos or latents: roundtrip, encode and decode. They differ only in the
// options they add; parsing is in app/run_options.cpp and the run itself in app/batch.cpp.
#include <memory>

#include "app/batch.h"
#include "app/commands.h"
#include "app/run_options.h"

namespace vaecodec::app {

void add_roundtrip_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "roundtrip", "decode a video, run it through the VAE's encoder and decoder, write the result");
  auto options = std::make_shared<RunOptions>();
  add_run_options(*sub, *options, RunCommand::kRoundtrip);
  sub->callback([options] { run_command(RunCommand::kRoundtrip, *options); });
}

void add_encode_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "encode", "encode a video into VAE latents (.safetensors or ComfyUI's .latent) with timing and colour");
  auto options = std::make_shared<RunOptions>();
  add_run_options(*sub, *options, RunCommand::kEncode);
  sub->add_flag("--latent-scale", options->latent_scale,
                "write the latents times the model's latent scale (SeedVR2: 0.9152), as its diffusion model "
                "takes them; the file records it");
  sub->callback([options] { run_command(RunCommand::kEncode, *options); });
}

void add_decode_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "decode", "decode VAE latents into a video with the size, frame count, timing and colour they record");
  auto options = std::make_shared<RunOptions>();
  add_run_options(*sub, *options, RunCommand::kDecode);
  sub->add_flag("--latent-scale", options->latent_scale,
                "the input's latents are stored times the model's latent scale (SeedVR2: 0.9152), as its "
                "diffusion model takes them: divide first (a file vaecodec wrote says so itself)");
  sub->callback([options] { run_command(RunCommand::kDecode, *options); });
}

}  // namespace vaecodec::app
