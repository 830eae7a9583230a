#include <memory>

#include "app/commands.h"
#include "app/run_options.h"

namespace vaecodec::app {

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
