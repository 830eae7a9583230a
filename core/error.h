#pragma once

#include <stdexcept>
#include <string>

namespace vaecodec {

// Every failure vaecodec reports: what failed, where and why, in one line. Caught once in main.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace vaecodec
