#pragma once

#include <string>
#include <vector>

namespace vaecodec::core {

class Device;
class VaeModel;

// Where a share of one run goes when it runs on several devices: a band of a split (core/split/bands.h) or
// the exact tiles shared out among devices (Note [Exact tiles across devices] in core/split/exact_tiles.h).
// Its own model (shares never use one model object: layers keep per-call caches) on its device; several
// places may share a device.
struct BandPlace {
  VaeModel* model = nullptr;
  Device* device = nullptr;
};

// Refuses places without a model or device, two places with one model, and a model that is not on its
// place's device; `what` names a place in the messages ("band").
void check_places(const std::vector<BandPlace>& places, const std::string& what);

}  // namespace vaecodec::core
