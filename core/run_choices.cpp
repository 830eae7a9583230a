#include "core/run_choices.h"

namespace vaecodec::core {
namespace {

thread_local const RunChoices* tls_choices = nullptr;

}  // namespace

std::optional<ConvBackend> parse_conv_backend(const std::string& name) {
  if (name == "auto") return ConvBackend::kAuto;
  if (name == "cudnn") return ConvBackend::kCudnn;
  if (name == "own") return ConvBackend::kOwn;
  return std::nullopt;
}

const RunChoices& current_choices() {
  static const RunChoices defaults;
  return tls_choices ? *tls_choices : defaults;
}

ChoicesScope::ChoicesScope(const RunChoices& choices) : choices_(choices), previous_(tls_choices) {
  tls_choices = &choices_;
}

ChoicesScope::~ChoicesScope() {
  tls_choices = previous_;
}

}  // namespace vaecodec::core
