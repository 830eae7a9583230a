#pragma once

#include <algorithm>
#include <string>

namespace vaecodec::core {

// `text` without the whitespace around it.
inline std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// The first non-empty line of an error's text, trimmed: what the CLI prints and Python raises as the one line
// (LibTorch's messages carry a C++ stack after it). Empty when the text has none.
inline std::string first_line(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = trimmed(text.substr(start, end - start));
    if (!line.empty()) return line;
    start = end + 1;
  }
  return "";
}

}  // namespace vaecodec::core
