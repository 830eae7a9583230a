#include "core/sizes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"

namespace vaecodec::core {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

int64_t parse_size(const std::string& text) {
  const std::string t = trim(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  static const std::vector<std::pair<std::string, double>> units = {{"", 1.0},
                                                                    {"b", 1.0},
                                                                    {"k", 1024.0},
                                                                    {"kib", 1024.0},
                                                                    {"kb", 1e3},
                                                                    {"m", 1048576.0},
                                                                    {"mib", 1048576.0},
                                                                    {"mb", 1e6},
                                                                    {"g", 1073741824.0},
                                                                    {"gib", 1073741824.0},
                                                                    {"gb", 1e9},
                                                                    {"t", 1099511627776.0},
                                                                    {"tib", 1099511627776.0},
                                                                    {"tb", 1e12}};
  if (used > 0 && std::isfinite(value) && value > 0) {
    const std::string unit = lower(trim(t.substr(used)));
    for (const auto& [name, scale] : units)
      if (unit == name) {
        const double bytes = value * scale;
        if (bytes >= 1.0 && bytes < 9.2e18) return static_cast<int64_t>(std::llround(bytes));
      }
  }
  throw Error("'" + text +
              "' is not a memory size: write e.g. 8G, 7.5GiB, 512M or 12GB (G/GiB/M/MiB are "
              "binary, GB/MB decimal)");
}

std::string format_size(int64_t bytes) {
  std::ostringstream s;
  const double gib = static_cast<double>(bytes) / 1073741824.0;
  if (gib >= 1.0) {
    s << std::round(gib * 100) / 100 << " GiB";
  } else {
    s << std::round(static_cast<double>(bytes) / 1048576.0 * 10) / 10 << " MiB";
  }
  return s.str();
}

std::string shape_string(c10::IntArrayRef shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

}  // namespace vaecodec::core
