#include "core/place.h"

#include <set>

#include "core/device/device.h"
#include "core/error.h"
#include "core/vae_model.h"

namespace vaecodec::core {

void check_places(const std::vector<BandPlace>& places, const std::string& what) {
  std::set<const VaeModel*> models;
  for (size_t i = 0; i < places.size(); ++i) {
    const BandPlace& p = places[i];
    if (!p.model || !p.device) throw Error("a " + what + " of a split run has no model or no device");
    if (!models.insert(p.model).second) throw Error("two " + what + "s of a split run share one model");
    if (p.model->device() != p.device->torch_device())
      throw Error(what + " " + std::to_string(i) + "'s model is on " + p.model->device().str() + ", the " +
                  what + " on " + p.device->torch_device().str());
  }
}

}  // namespace vaecodec::core
