#include <memory>

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

}  // namespace vaecodec::app
