#pragma once

#include <stdexcept>
#include <string>

namespace vaecodec {

// Every failure vaecodec reports: what failed, where and why, in one line. Caught once in main.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error in what the user asked for (an option's value that cannot work for this input, such as a filter
// graph that does not parse or a start past the end): main exits with 2, as for a malformed command line.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace vaecodec
