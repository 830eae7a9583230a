#pragma once

#include "core/error.h"

namespace vaecodec::app {

// A command line that cannot run as given (options that contradict each other or the inputs, or an
// environment an option depends on): printed as one line like every error, but exit status 2, as for a
// malformed option (app/cli.cpp).
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace vaecodec::app
