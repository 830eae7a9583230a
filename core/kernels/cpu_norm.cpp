#include "core/kernels/cpu_norm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define VAECODEC_CPU_NORM_AVX2 1
#endif

namespace vaecodec::core::kernels {

namespace {

// Where the rows of pixels are: [B, C, T, H, W] walked as B * T * H rows of W pixels, each pixel's C
// channels adjacent.
struct PixelRows {
  int64_t channels, batch_stride, frames, frame_stride, height, row_stride, width, pixel_stride;

  static PixelRows of(const torch::Tensor& t) {
    return {t.size(1), t.stride(0), t.size(2), t.stride(2), t.size(3), t.stride(3), t.size(4), t.stride(4)};
  }
  int64_t rows(int64_t batch) const { return batch * frames * height; }
  int64_t at(int64_t b, int64_t t, int64_t h) const {
    return b * batch_stride + t * frame_stride + h * row_stride;
  }
  int64_t offset(int64_t row) const { return at(row / height / frames, row / height % frames, row % height); }
};

// float32 CPU 5-D tensors with adjacent channels.
bool adjacent(const torch::Tensor& t) {
  return t.defined() && t.is_cpu() && t.dim() == 5 && t.scalar_type() == torch::kFloat && t.stride(1) == 1;
}

// The same, their channels a multiple of the vector's 8.
bool takes(const torch::Tensor& t) {
  return adjacent(t) && t.size(1) % 8 == 0;
}

bool same_shape(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes();
}

// A [C] float32 vector's data, or nullptr when undefined; false when it is not one.
bool channel_vector(const torch::Tensor& v, int64_t channels, const float** data) {
  *data = nullptr;
  if (!v.defined()) return true;
  if (!v.is_cpu() || v.scalar_type() != torch::kFloat || v.numel() != channels || !v.is_contiguous())
    return false;
  *data = v.data_ptr<float>();
  return true;
}

bool has_avx2() {
#if VAECODEC_CPU_NORM_AVX2
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// A grain of about 16k values per task: few enough tasks for two cores, enough for many.
int64_t grain(const PixelRows& r) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, r.width * r.channels));
}

#if VAECODEC_CPU_NORM_AVX2

// e^x for eight floats: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact enough), e^r by
// a degree-7 polynomial, 2^n into the exponent; x clamped to float32's range of e^x.
__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// A pixel's channels c..c+7 plus the bias's, if any.
__attribute__((target("avx2,fma"))) inline __m256 biased(const float* pixel, const float* bias, int64_t c) {
  const __m256 v = _mm256_loadu_ps(pixel + c);
  return bias ? _mm256_add_ps(v, _mm256_loadu_ps(bias + c)) : v;
}

// Rows begin..end of x normalised into out.
__attribute__((target("avx2,fma"))) void norm_silu_rows(const float* x, const PixelRows& xr, float* out,
                                                        const PixelRows& outr, const float* gamma_scaled,
                                                        const float* bias, int64_t begin, int64_t end) {
  const int64_t channels = xr.channels;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  for (int64_t row = begin; row < end; ++row) {
    const float* in_row = x + xr.offset(row);
    float* out_row = out + outr.offset(row);
    for (int64_t w = 0; w < xr.width; ++w) {
      const float* pixel = in_row + w * xr.pixel_stride;
      float* o = out_row + w * outr.pixel_stride;
      __m256 squares = zero;
      for (int64_t c = 0; c < channels; c += 8) {
        const __m256 v = biased(pixel, bias, c);
        squares = _mm256_fmadd_ps(v, v, squares);
      }
      const __m256 norm = _mm256_set1_ps(std::max(std::sqrt(sum8(squares)), 1e-12f));
      for (int64_t c = 0; c < channels; c += 8) {
        const __m256 z =
            _mm256_mul_ps(_mm256_div_ps(biased(pixel, bias, c), norm), _mm256_loadu_ps(gamma_scaled + c));
        const __m256 y = _mm256_div_ps(z, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, z))));
        _mm256_storeu_ps(o + c, y);
      }
    }
  }
}

#endif  // VAECODEC_CPU_NORM_AVX2

}  // namespace

bool rms_norm_silu_cpu(const torch::Tensor& x, const torch::Tensor& gamma, float scale,
                       const torch::Tensor& out, const torch::Tensor& bias) {
#if VAECODEC_CPU_NORM_AVX2
  if (!has_avx2() || !takes(x) || !takes(out) || !same_shape(x, out)) return false;
  const float *g = nullptr, *b = nullptr;
  if (!gamma.defined() || !channel_vector(gamma, x.size(1), &g) || !channel_vector(bias, x.size(1), &b))
    return false;
  // scale * gamma in float32, as the composite's product of the two rounds it.
  std::vector<float> scaled(g, g + x.size(1));
  for (float& v : scaled) v *= scale;
  const auto xr = PixelRows::of(x), outr = PixelRows::of(out);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, xr.rows(x.size(0)), grain(xr), [&](int64_t begin, int64_t end) {
    norm_silu_rows(in, xr, o, outr, scaled.data(), b, begin, end);
  });
  return true;
#else
  (void)x, (void)gamma, (void)scale, (void)out, (void)bias;
  return false;
#endif
}

int cpu_loop_threads() {
  std::atomic<uint64_t> seen{0};
  const int64_t n = 4 * static_cast<int64_t>(at::get_num_threads());
  at::parallel_for(0, n, 1, [&](int64_t, int64_t) { seen |= uint64_t{1} << (at::get_thread_num() % 64); });
  return std::popcount(seen.load());
}

bool add_residual_cpu(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias) {
  if (!adjacent(y) || !adjacent(s) || !same_shape(y, s)) return false;
  const float* b = nullptr;
  if (!channel_vector(bias, y.size(1), &b)) return false;
  const auto yr = PixelRows::of(y), sr = PixelRows::of(s);
  float* yd = y.data_ptr<float>();
  const float* sd = s.data_ptr<float>();
  // (y + s) + bias, as the composite's two adds round it.
  at::parallel_for(0, yr.rows(y.size(0)), grain(yr), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* y_row = yd + yr.offset(row);
      const float* s_row = sd + sr.offset(row);
      for (int64_t w = 0; w < yr.width; ++w) {
        float* yp = y_row + w * yr.pixel_stride;
        const float* sp = s_row + w * sr.pixel_stride;
        if (b) {
          for (int64_t c = 0; c < yr.channels; ++c) yp[c] = (yp[c] + sp[c]) + b[c];
        } else {
          for (int64_t c = 0; c < yr.channels; ++c) yp[c] += sp[c];
        }
      }
    }
  });
  return true;
}

}  // namespace vaecodec::core::kernels
