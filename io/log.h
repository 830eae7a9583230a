#pragma once

#include <iostream>
#include <string>

namespace vaecodec::io {

// A warning for the user: one line on stderr, whatever --quiet says (it silences progress, not problems).
inline void warn(const std::string& message) {
  std::cerr << "vaecodec: warning: " << message << std::endl;
}

}  // namespace vaecodec::io
