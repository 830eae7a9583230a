#pragma once

#include <cstdint>
#include <string>

#include <c10/util/ArrayRef.h>

namespace vaecodec::core {

// "8G", "8GiB", "7.5G", "512M", "512MiB", "12GB" (10^9), "1073741824" (bytes). G/GiB and M/MiB are binary
// units, GB/MB decimal. Throws naming the text when it is not a size.
int64_t parse_size(const std::string& text);
// 24159191040 -> "22.5 GiB".
std::string format_size(int64_t bytes);
// {1, 16, 21, 90, 160} -> "[1, 16, 21, 90, 160]".
std::string shape_string(c10::IntArrayRef shape);

}  // namespace vaecodec::core
