// Lets g++ compile a Wiregrad .cu file for the CPU: the CUDA keywords are defined away, the
// thread/block indices become thread-local globals, and wg_launch runs every (block, thread)
// of a launch one after another, in launch order or shuffled (wg_set_thread_order). Faithful
// only because our kernels share no memory between threads, use no warp intrinsics and never
// synchronise; the shuffled order is how the tests catch a kernel that breaks that rule.
#pragma once
#define WG_EMULATOR 1

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) alignas(n)

struct wg_uint3 { unsigned int x, y, z; };
static thread_local wg_uint3 threadIdx, blockIdx, blockDim, gridDim;

// 0: threads run in launch order (blocks x fastest, then threads x fastest); another value: in an order
// shuffled by that seed, so a kernel whose result depends on the order its threads run in (one thread
// reading what another writes, without atomics) gives different results from run to run.
static unsigned long long wg_order_seed = 0;
extern "C" void wg_set_thread_order(unsigned long long seed) { wg_order_seed = seed; }

template <typename Body>
static void wg_launch(const unsigned grid[3], const unsigned block[3], Body body) {
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    const unsigned long long nb = (unsigned long long)grid[0] * grid[1] * grid[2];
    const unsigned long long nt = (unsigned long long)block[0] * block[1] * block[2];
    const unsigned long long total = nb * nt;
    std::vector<unsigned long long> order;
    if (wg_order_seed) {
        order.resize(total);
        for (unsigned long long i = 0; i < total; ++i) order[i] = i;
        unsigned long long state = wg_order_seed;
        for (unsigned long long i = total; i > 1; --i) {  // Fisher-Yates with xorshift64
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            std::swap(order[i - 1], order[state % i]);
        }
    }
    for (unsigned long long k = 0; k < total; ++k) {
        const unsigned long long i = wg_order_seed ? order[k] : k;
        const unsigned long long b = i / nt, t = i % nt;
        blockIdx = {(unsigned)(b % grid[0]), (unsigned)((b / grid[0]) % grid[1]),
                    (unsigned)(b / ((unsigned long long)grid[0] * grid[1]))};
        threadIdx = {(unsigned)(t % block[0]), (unsigned)((t / block[0]) % block[1]),
                     (unsigned)(t / ((unsigned long long)block[0] * block[1]))};
        body();
    }
}

// Threads run one at a time, so an atomic add is a plain add (returning the old value).
inline float atomicAdd(float* address, float value) { float old = *address; *address += value; return old; }
inline double atomicAdd(double* address, double value) { double old = *address; *address += value; return old; }

using std::isinf;
using std::isnan;

// CUDA's fast-math intrinsics map to the exact <cmath> functions.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __int_as_float(int bits) { float f; std::memcpy(&f, &bits, 4); return f; }
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}

// IEEE binary16 storage with float32 math, converted through GCC's _Float16 (round to nearest even,
// the same rounding as cvt.rn.f16.f32 on the GPU and as NumPy's float16 cast).
struct wg_half { unsigned short bits; };
inline float half_to_float(wg_half h) { _Float16 v; std::memcpy(&v, &h.bits, 2); return (float)v; }
inline wg_half float_to_half(float f) { _Float16 v = (_Float16)f; wg_half h; std::memcpy(&h.bits, &v, 2); return h; }
