#include "app/errors.h"

#include <algorithm>

#include <iostream>

#include <c10/util/Exception.h>

#include "core/error_text.h"
#include "io/log.h"

namespace vaecodec::app {
namespace {

using core::first_line;
using core::trimmed;

std::string libtorch_line(const c10::Error& e) {
  const std::string& text = e.msg();
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e))
    return "out of memory (" + first_line(text) +
           "); give a smaller budget (--vram or a --preset) or --chunk, or free memory held by other "
           "programs";
  static const std::string kAssert = "INTERNAL ASSERT FAILED";
  if (text.find(kAssert) != std::string::npos) {
    // "<condition> INTERNAL ASSERT FAILED at "<file>":<line>, please report a bug to PyTorch. <detail>"
    static const std::string kReport = "please report a bug to PyTorch.";
    const auto report = text.find(kReport);
    const std::string detail =
        report == std::string::npos ? "" : first_line(text.substr(report + kReport.size()));
    return "LibTorch stopped on an internal check" + (detail.empty() ? std::string() : " (" + detail + ")") +
           "; the input or the weights may be malformed, or try the other --device";
  }
  const std::string line = first_line(text);
  return "LibTorch: " + (line.empty() ? std::string("unknown error") : line);
}

}  // namespace

std::string error_line(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return libtorch_line(e);
  } catch (const std::exception& e) {
    const std::string line = first_line(e.what());
    return line.empty() ? "unknown error" : line;
  } catch (...) {
    return "unknown error";
  }
}

void print_full_error(const std::exception_ptr& error) {
  if (!io::verbose()) return;
  std::string text;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
    return;
  }
  if (trimmed(text) == error_line(error)) return;
  std::cerr << "vaecodec: full error: " << trimmed(text) << std::endl;
}

bool from_libtorch(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace vaecodec::app
