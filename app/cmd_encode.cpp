#include <memory>

#include "app/commands.h"
#include "app/run_options.h"

namespace vaecodec::app {

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

}  // namespace vaecodec::app
