#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace vaecodec::core {

// What the exchanges between bands (core/band_exchange.h, which defines these) moved between devices, for a
// front end to report (`bench --devices`) without reaching the rooms where a chunk runs.

// Bytes each device has received from other bands' devices at the exchanges (halo rows, attention keys and
// values, norm statistics) since the last reset, by device ("cuda:1"); bands sharing a device do not count.
std::map<std::string, int64_t> band_traffic();
void reset_band_traffic();

}  // namespace vaecodec::core
