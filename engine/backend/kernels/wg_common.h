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
__device__ __forceinline__ float load(const float* p, long i) { return p[i]; }
__device__ __forceinline__ float load(const wg_half* p, long i) { return half_to_float(p[i]); }
__device__ __forceinline__ void store(float* p, long i, float v) { p[i] = v; }
__device__ __forceinline__ void store(wg_half* p, long i, float v) { p[i] = float_to_half(v); }

// NVRTC has no <cmath>, hence no INFINITY/NAN macros: build them from their bit patterns.
#define WG_INFINITY __int_as_float(0x7f800000)
#define WG_NAN __int_as_float(0x7fc00000)

// One thread per output element; a grid smaller than n strides over the rest. Indices are long
// (64-bit) so tensors past 2**31 elements stay addressable.
#define GRID_STRIDE_LOOP(i, n) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long)blockDim.x * gridDim.x)
