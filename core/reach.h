#pragma once

#include <cstdint>

namespace vaecodec::core {

// How a block of a trunk changes the resolution (Note [Exact tiles] in core/trunk.h).
enum class Resize { kSame, kUp2, kDown2 };

// How far a block of a trunk looks around each output pixel; `local` false: it looks at the whole frame
// (attention), and a trunk holding it cannot be tiled at all. `frame_norm`: its convolutions are local but it
// normalises with statistics over the whole frame (SeedVR2's GroupNorm), which a tile only approximates
// (Note [Norms of tiles through time] in core/split/exact_tiles.h): such a trunk runs tiles through time, not
// exact ones.
struct Reach {
  int64_t margin = 0;
  Resize resize = Resize::kSame;
  bool local = true;
  bool frame_norm = false;
  static Reach whole_frame() { return {0, Resize::kSame, false}; }
};

}  // namespace vaecodec::core
