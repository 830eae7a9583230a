#pragma once
// The Hopper implicit-GEMM convolution as a template over its tile (Note [Hopper implicit GEMM]); each tile
// is instantiated in a file of its own (tile_*.cu), so that the build compiles them in parallel.
#include <type_traits>

#include <cuda_runtime.h>

#include <cute/tensor.hpp>

#include "core/kernels/conv3d_sm90.h"

#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.hpp"  // before the collectives, which use it undeclared

#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"

namespace vaecodec::core::kernels::hopper {

// Note [Hopper implicit GEMM]
// A convolution is a GEMM over M = output pixels (N*Z*P*Q), N = output channels, K = T*R*S*C: CUTLASS's
// Hopper collective loads the activation tile with the tensor-memory-accelerator's im2col mode (zero fill
// for the padding, no im2col buffer) and the weights as a plain tile, and multiplies with wgmma, one
// producer warp and one consumer warpgroup per tile. The tile's N is chosen to divide the output channels
// exactly (96 and 192 are the narrow stages cuDNN tiles in 64s, wasting a quarter or a third of its tile),
// its K slice to divide the input channels (a slice crossing two filter taps would read the next tap's
// channels as zeros). The epilogue adds the bias and, where given, a residual (the source C, beta 1; with
// beta 0 it is never read) in float32 and rounds once (LinCombPerColBias: the bias indexes the GEMM's
// columns, the output channels).
// With e4m3 inputs (Note [FP8 convolutions] in core/kernels/conv3d.cpp) the same kernel multiplies in fp8
// and the epilogue first scales each output channel's sum by its alpha (the weights' per-channel scale over
// the activations' scale): PerColLinCombPerColBiasEltAct with the identity, alpha a float32 vector.
template <int TileM, int TileN, int TileK, bool Fp8>
struct HopperConv {
  using Element = cutlass::bfloat16_t;  // output and residual
  using ElementIn = std::conditional_t<Fp8, cutlass::float_e4m3_t, cutlass::bfloat16_t>;
  static constexpr int kAlign = 8;                         // 16-byte accesses of bf16
  static constexpr int kAlignIn = 16 / sizeof(ElementIn);  // and of the inputs
  using Layout = cutlass::layout::TensorNDHWC;
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Shape<cute::Int<TileK>>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;  // no multicast
  using Fusion =
      std::conditional_t<Fp8,
                         cutlass::epilogue::fusion::PerColLinCombPerColBiasEltAct<
                             cutlass::epilogue::thread::Identity, Element, float, float, Element, float>,
                         cutlass::epilogue::fusion::LinCombPerColBias<Element, float, float, Element, float>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, Layout, kAlign, Element, Layout,
      kAlign, cutlass::epilogue::TmaWarpSpecialized, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop, ElementIn, Layout,
      kAlignIn, ElementIn, Layout, kAlignIn, float, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::conv::KernelImplicitTmaWarpSpecializedSm90>::CollectiveOp;
  using Problem = cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop,
                                                  Mainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<Problem, Mainloop, Epilogue>;
  using Device = cutlass::conv::device::ConvUniversalAdapter<Kernel>;

  static cudaError_t run(const Conv3dProblem& p, cudaStream_t stream) {
    if (p.c % TileK != 0 || p.k % TileN != 0 || (Fp8 && p.alpha == nullptr)) return cudaErrorNotSupported;
    const int64_t kt = p.t, kr = p.r, ks = p.s, c = p.c;
    Problem problem(cutlass::conv::Mode::kCrossCorrelation,
                    {static_cast<int>(p.n), static_cast<int>(p.d), static_cast<int>(p.h),
                     static_cast<int>(p.w), static_cast<int>(p.c)},
                    {p.x_stride[0], p.x_stride[1], p.x_stride[2], p.x_stride[3], int64_t{1}},
                    {static_cast<int>(p.k), static_cast<int>(kt), static_cast<int>(kr), static_cast<int>(ks),
                     static_cast<int>(c)},
                    {kt * kr * ks * c, kr * ks * c, ks * c, c, int64_t{1}}, {p.pad[0], p.pad[1], p.pad[2]},
                    {p.pad[0], p.pad[1], p.pad[2]}, {p.stride[0], p.stride[1], p.stride[2]}, {1, 1, 1}, 1);
    typename Kernel::StrideD stride_d;
    cute::for_each(cute::make_seq<cute::rank<0>(typename Kernel::StrideD{})>{},
                   [&](auto i) { cute::get<0, i>(stride_d) = problem.stride_C[Problem::RankT - 2 - i]; });
    typename Device::Arguments args{
        problem,
        {static_cast<const ElementIn*>(p.x), static_cast<const ElementIn*>(p.weight)},
        {{},
         // Without a residual the source is never read (beta 0), but its
         // descriptor still wants an address: the output's.
         static_cast<const Element*>(p.residual ? p.residual : p.y),
         stride_d,
         static_cast<Element*>(p.y),
         stride_d}};
    args.epilogue.thread.alpha = 1.f;
    args.epilogue.thread.beta = p.residual ? 1.f : 0.f;  // no residual: the source is never read
    args.epilogue.thread.bias_ptr = p.bias;
    if constexpr (Fp8) args.epilogue.thread.alpha_ptr = p.alpha;  // per output channel
    Device conv;
    if (conv.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    if (Device::get_workspace_size(args) != 0) return cudaErrorNotSupported;
    if (conv.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    if (conv.run(stream) != cutlass::Status::kSuccess) {
      const cudaError_t error = cudaGetLastError();
      return error == cudaSuccess ? cudaErrorLaunchFailure : error;
    }
    return cudaGetLastError();
  }
};

// One tile's entry point, explicitly instantiated by its tile_*.cu file.
template <int TileM, int TileN, int TileK, bool Fp8>
cudaError_t run_tile(const Conv3dProblem& problem, cudaStream_t stream) {
  return HopperConv<TileM, TileN, TileK, Fp8>::run(problem, stream);
}

}  // namespace vaecodec::core::kernels::hopper
