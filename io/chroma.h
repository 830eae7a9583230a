#pragma once

#include <cstdint>

#include <torch/torch.h>

extern "C" {
#include <libavutil/pixfmt.h>
}

namespace vaecodec::io {

// Note [Chroma resampling]
// 4:2:0 and 4:2:2 chroma is upsampled to the luma grid on the way in and brought back on the way out, here,
// on tensors, so that the two directions are exact inverses of each other: downsample(upsample(c)) == c.
// An I/O path that upsamples with one filter and downsamples with another (swscale's bicubic in, area out)
// blurs the chroma a little on every pass; on testsrc2 at 70x42 that alone cost 9 dB of PSNR.
// - Upsampling: Catmull-Rom cubic interpolation along each subsampled axis, edges replicated, at the chroma
//   sample positions the frame's chroma_location gives (AVCHROMA_LOC_LEFT: co-sited with the even luma
//   columns, halfway between rows; TOPLEFT: co-sited both ways; CENTER: halfway both ways; ...). Unspecified
//   is taken as centred, which is what swscale (and so the ffmpeg program) assumes when it subsamples. The
//   writer subsamples for the input's location and tags the output with it, centred included: H.264 and
//   HEVC decoders read an untagged stream as LEFT, which would shift the chroma by a quarter sample.
// - Downsampling: the chroma that upsamples back to the given full-resolution chroma as closely as the
//   filter allows. It is the fixed point of c <- c + w A (t - U c), with U the upsampling above and A its
//   transpose (halved): a left inverse of U, close to the least-squares one, found by a few iterations
//   (along each axis on its own: U is separable). Chroma that came from upsampling comes back exactly;
//   anything else gets the chroma whose upsampling is closest to it, without the blur of an averaging filter.
// Only factors 1 and 2 per axis are resampled here (every 4:2:0, 4:2:2, 4:4:0 and 4:4:4 format); rarer
// layouts (4:1:1, 4:1:0) go through swscale at 4:4:4.

// Chroma sample positions along each axis, in luma samples from the first luma sample of its pair:
// 0 co-sited with it, 0.5 halfway to the next one, 1 co-sited with the next one.
struct ChromaSiting {
  double horizontal = 0.5;
  double vertical = 0.5;
};
ChromaSiting chroma_siting(AVChromaLocation location);

// chroma: [..., h, w] float; log2_w, log2_h (0 or 1): the subsampling of each axis. Returns [..., height,
// width].
torch::Tensor upsample_chroma(const torch::Tensor& chroma, int64_t height, int64_t width, int log2_w,
                              int log2_h, ChromaSiting siting);

// full: [..., height, width] float -> [..., ceil(height / 2^log2_h), ceil(width / 2^log2_w)], the inverse of
// upsample_chroma (Note [Chroma resampling]).
torch::Tensor downsample_chroma(const torch::Tensor& full, int log2_w, int log2_h, ChromaSiting siting);

}  // namespace vaecodec::io
