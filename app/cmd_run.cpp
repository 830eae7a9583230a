// The commands that run a model over videos or latents: roundtrip, encode and decode. They differ only in the
// options they add; parsing is in app/run_options.cpp and the run itself in app/run_command.cpp.
#include <memory>

#include "app/commands.h"
#include "app/dataset_batch.h"
#include "app/run_command.h"
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
  // musubi-tuner's dataset config in place of inputs and an output (Note [Dataset batches]).
  CLI::Option* input = sub->get_option("input");
  CLI::Option* output = sub->get_option("--output");
  input->required(false);
  output->required(false);
  sub->add_option("--dataset-config", options->dataset_config,
                  "musubi-tuner's dataset config (TOML): write every Wan latent cache it names into its "
                  "datasets' cache_directory, as its wan_cache_latents.py would")
      ->excludes(input)
      ->excludes(output);
  sub->add_flag(
      "--dry-run", options->dry_run,
      "with --dataset-config: list the cache files (item key, bucket, frames, source) and run nothing");
  sub->callback([options] {
    if (!options->dataset_config.empty()) {  // Note [Dataset batches]
      check_dataset_options(*options);
      if (options->dry_run) return list_dataset_batch(*options);
      return run_command(RunCommand::kEncode, *options);
    }
    if (options->dry_run) throw CLI::ValidationError("--dry-run", "lists the caches of a --dataset-config");
    if (options->inputs.empty()) throw CLI::RequiredError("input");
    if (options->output.empty()) throw CLI::RequiredError("--output");
    run_command(RunCommand::kEncode, *options);
  });
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
