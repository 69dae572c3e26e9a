// Shared by every Wiregrad kernel: the half type, float loads/stores, and the grid-stride loop.
// Compiled by NVRTC/CuPy for the GPU, and by g++ for the CPU emulator (which defines WG_EMULATOR
// and supplies wg_half and the CUDA built-ins in emulator_prelude.h).
#pragma once

#ifndef WG_EMULATOR
// Our own 16-bit half instead of <cuda_fp16.h>: the NVRTC wheel ships no CUDA headers, and the
// two conversions below are all our kernels need (all half math is done in float32).
// A float16 NumPy/CuPy buffer is passed as a wg_half pointer; the layout is identical.
struct __align__(2) wg_half { unsigned short bits; };

__device__ __forceinline__ float half_to_float(wg_half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
__device__ __forceinline__ wg_half float_to_half(float f) {
    wg_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));  // round to nearest even, like NumPy
    return h;
}
#endif

// Loads and stores in float32 whatever the storage type, so one template serves both dtypes.
__device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float load(const wg_half* p, long long i) { return half_to_float(p[i]); }
__device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void store(wg_half* p, long long i, float v) { p[i] = float_to_half(v); }

// NVRTC has no <cmath>, hence no INFINITY/NAN macros: build them from their bit patterns.
#define WG_INFINITY __int_as_float(0x7f800000)
#define WG_NAN __int_as_float(0x7fc00000)

// One thread per output element; a grid smaller than n strides over the rest. Indices are long long
// (64-bit) so tensors past 2**31 elements stay addressable.
#define GRID_STRIDE_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

// A sliding window over contiguous (N, C, H, W) images, as im2col (convolution) and pooling see it:
// kernel KH x KW, stride, padding, dilation, and the OH x OW output positions.
struct WindowGeometry {
    long long N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW;
};
// The entry points' parameters of those names, gathered for the templates.
#define WG_GEOMETRY WindowGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW}

// Calls f(ki, kj, oh, ow) for every output position (oh, ow) whose window reads pixel (h, w), through tap
// (ki, kj): oh = (h + PH - ki*DH) / SH when that division is exact and lands in the output (ow alike).
// Backward passes (col2im, pooling) gather with it, one thread per pixel: no atomics, a fixed order.
template <typename F> __device__ void for_each_window_over(WindowGeometry g, long long h, long long w, F f) {
    for (long long ki = 0; ki < g.KH; ++ki) {
        long long oh_scaled = h + g.PH - ki * g.DH;
        if (oh_scaled < 0 || oh_scaled % g.SH != 0 || oh_scaled / g.SH >= g.OH) continue;
        for (long long kj = 0; kj < g.KW; ++kj) {
            long long ow_scaled = w + g.PW - kj * g.DW;
            if (ow_scaled < 0 || ow_scaled % g.SW != 0 || ow_scaled / g.SW >= g.OW) continue;
            f(ki, kj, oh_scaled / g.SH, ow_scaled / g.SW);
        }
    }
}

// Block-wide reductions for kernels that give one block a row (softmax, cross-entropy, layer norm) or a
// channel (batch norm): every thread passes its partial value and every thread gets the block's result.
// A warp reduces with shuffles, lane 0 of each warp leaves its value in shared memory, and warp 0
// reduces those. blockDim.x must be a multiple of 32 (at most 1024) and every thread of the block must
// call it (the calls are barriers).
__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}
template <bool IsMax> __device__ float block_reduce(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const float identity = IsMax ? -WG_INFINITY : 0.0f;
    v = IsMax ? warp_max(v) : warp_sum(v);
    __syncthreads();  // the previous reduction's threads have all read partial[0]
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? partial[lane] : identity;
        v = IsMax ? warp_max(v) : warp_sum(v);
        if (lane == 0) partial[0] = v;
    }
    __syncthreads();
    return partial[0];
}
__device__ __forceinline__ float block_sum(float v) { return block_reduce<false>(v); }
__device__ __forceinline__ float block_max(float v) { return block_reduce<true>(v); }

// A block per row: blocks stride over the rows, the block's threads over the row's columns.
#define BLOCK_ROW_LOOP(r, rows) for (long long r = blockIdx.x; r < (rows); r += gridDim.x)
#define THREAD_COL_LOOP(j, cols) for (long long j = threadIdx.x; j < (cols); j += blockDim.x)
