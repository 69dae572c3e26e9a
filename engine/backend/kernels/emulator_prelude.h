// Lets g++ compile a Wiregrad .cu file for the CPU: the CUDA keywords are defined away, the
// thread/block indices become thread-local globals, and wg_launch runs a launch's blocks one after
// another. Within a block every thread is a fiber (ucontext) with its own stack: a fiber runs until it
// reaches __syncthreads() or a warp-level primitive (__syncwarp, __shfl_*_sync), where it waits until
// every thread of the block (of its warp) that has not finished has arrived. So shared memory
// (`__shared__` is a static local, one copy that the block's fibers share), block barriers and warp
// shuffles behave as on a GPU, and a barrier reached by only some threads is reported as a deadlock.
// Threads run in launch order or in an order shuffled by a seed (wg_set_thread_order), re-shuffled at
// every barrier: a kernel whose result depends on which thread runs first (a missing barrier, a thread
// reading what another writes without atomics) gives different results from run to run.
#pragma once
#define WG_EMULATOR 1

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __shared__ static
#define __restrict__

struct wg_uint3 { unsigned int x, y, z; };
static thread_local wg_uint3 threadIdx, blockIdx, blockDim, gridDim;
static const int warpSize = 32;

static unsigned long long wg_order_seed = 0;
extern "C" void wg_set_thread_order(unsigned long long seed) { wg_order_seed = seed; }

static char wg_error[512];  // why the last launch was abandoned ("" when it ran to the end)
extern "C" const char* wg_last_error() { return wg_error; }

enum wg_fiber_state { WG_RUNNABLE, WG_AT_BLOCK_BARRIER, WG_AT_WARP_BARRIER, WG_FINISHED };
struct wg_fiber {
    ucontext_t context;
    wg_fiber_state state;
    unsigned tid;  // linear thread index in the block
    wg_uint3 index;
    int barrier_line;  // the source line of the __syncthreads it waits at
};
static thread_local ucontext_t wg_scheduler;
static thread_local wg_fiber* wg_current = nullptr;
static thread_local std::function<void()>* wg_body = nullptr;
static thread_local unsigned long long wg_shuffle_slots[1024];  // one exchange slot per thread of a block

static void wg_fiber_main() {
    (*wg_body)();
    wg_current->state = WG_FINISHED;  // uc_link returns to the scheduler
}

static void wg_wait(wg_fiber_state at) {
    wg_current->state = at;
    swapcontext(&wg_current->context, &wg_scheduler);
}

// A block barrier is met when every thread that has not finished waits at the same __syncthreads (the
// same source line): threads at different barriers are a deadlock on a GPU (or undefined behaviour).
inline void wg_block_barrier(int line) {
    wg_current->barrier_line = line;
    wg_wait(WG_AT_BLOCK_BARRIER);
}
#define __syncthreads() wg_block_barrier(__LINE__)
inline void __syncwarp(unsigned = 0xffffffffu) { wg_wait(WG_AT_WARP_BARRIER); }

static unsigned long long wg_next_random(unsigned long long& state) {  // xorshift64
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return state;
}

// Warp shuffles: each lane publishes its value, the warp meets, each lane reads its source lane's value,
// and the warp meets again before the slots can be reused. A source outside the warp (or the block)
// returns the lane's own value, as on the GPU.
template <typename T> static T wg_shuffle(T value, long source_tid) {
    unsigned long long bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    wg_shuffle_slots[wg_current->tid] = bits;
    __syncwarp();
    T out = value;
    long nt = (long)blockDim.x * blockDim.y * blockDim.z;
    if (source_tid >= 0 && source_tid < nt && source_tid / 32 == (long)wg_current->tid / 32)
        std::memcpy(&out, &wg_shuffle_slots[source_tid], sizeof(T));
    __syncwarp();
    return out;
}
template <typename T> T __shfl_sync(unsigned, T v, int lane, int width = 32) {
    long tid = wg_current->tid;
    return wg_shuffle(v, tid - (tid % 32) % width + lane % width);
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    long tid = wg_current->tid, lane = (tid % 32) % width;
    return wg_shuffle(v, lane + (long)delta < width ? tid + (long)delta : tid);
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    long tid = wg_current->tid, lane = (tid % 32) % width;
    return wg_shuffle(v, lane >= (long)delta ? tid - (long)delta : tid);
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    long tid = wg_current->tid, lane = (tid % 32) % width, other = lane ^ mask;
    return wg_shuffle(v, other < width ? tid - lane + other : tid);
}

// Runs one block's threads as fibers until all have finished; false (and wg_error) on a deadlock.
static bool wg_run_block(unsigned nt, std::vector<wg_fiber>& fibers, std::vector<char>& stacks, size_t stack_size,
                         unsigned long long& order_state) {
    for (unsigned t = 0; t < nt; ++t) {
        wg_fiber& f = fibers[t];
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = stacks.data() + t * stack_size;
        f.context.uc_stack.ss_size = stack_size;
        f.context.uc_link = &wg_scheduler;
        makecontext(&f.context, wg_fiber_main, 0);
        f.state = WG_RUNNABLE;
        f.tid = t;
        f.index = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
    }
    std::vector<unsigned> order(nt);
    for (unsigned t = 0; t < nt; ++t) order[t] = t;
    for (;;) {
        if (wg_order_seed)
            for (unsigned i = nt; i > 1; --i) std::swap(order[i - 1], order[wg_next_random(order_state) % i]);
        for (unsigned k = 0; k < nt; ++k) {
            wg_fiber& f = fibers[order[k]];
            if (f.state != WG_RUNNABLE) continue;
            wg_current = &f;
            threadIdx = f.index;
            swapcontext(&wg_scheduler, &f.context);
        }
        // every fiber now waits at a barrier or has finished: release whichever barrier all have reached
        bool released = false, all_finished = true, block_barrier_met = true;
        for (unsigned w = 0; w * 32 < nt; ++w) {
            bool warp_met = true, any = false;
            for (unsigned t = w * 32; t < nt && t < (w + 1) * 32; ++t) {
                if (fibers[t].state == WG_FINISHED) continue;
                any = true;
                if (fibers[t].state != WG_AT_WARP_BARRIER) warp_met = false;
            }
            if (any && warp_met) {
                for (unsigned t = w * 32; t < nt && t < (w + 1) * 32; ++t)
                    if (fibers[t].state == WG_AT_WARP_BARRIER) fibers[t].state = WG_RUNNABLE;
                released = true;
            }
        }
        if (released) continue;
        int line = -1, other_line = -1;
        for (unsigned t = 0; t < nt; ++t) {
            if (fibers[t].state == WG_FINISHED) continue;
            all_finished = false;
            if (fibers[t].state != WG_AT_BLOCK_BARRIER) { block_barrier_met = false; continue; }
            if (line < 0) line = fibers[t].barrier_line;
            else if (fibers[t].barrier_line != line) { block_barrier_met = false; other_line = fibers[t].barrier_line; }
        }
        if (all_finished) return true;
        if (block_barrier_met) {
            for (unsigned t = 0; t < nt; ++t)
                if (fibers[t].state == WG_AT_BLOCK_BARRIER) fibers[t].state = WG_RUNNABLE;
            continue;
        }
        unsigned at_block = 0, at_warp = 0, finished = 0;
        for (unsigned t = 0; t < nt; ++t) {
            at_block += fibers[t].state == WG_AT_BLOCK_BARRIER;
            at_warp += fibers[t].state == WG_AT_WARP_BARRIER;
            finished += fibers[t].state == WG_FINISHED;
        }
        if (other_line >= 0)
            std::snprintf(wg_error, sizeof wg_error,
                          "deadlock in block (%u, %u, %u): threads wait at different __syncthreads (lines %d "
                          "and %d; a barrier inside a branch that not every thread takes)",
                          blockIdx.x, blockIdx.y, blockIdx.z, line, other_line);
        else
            std::snprintf(wg_error, sizeof wg_error,
                          "deadlock in block (%u, %u, %u): %u thread(s) wait at __syncthreads, %u at a warp "
                          "primitive whose warp never completes, %u finished (a barrier inside a branch that "
                          "not every thread takes)", blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp, finished);
        return false;
    }
}

template <typename Body>
static void wg_launch(const unsigned grid[3], const unsigned block[3], Body body) {
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    wg_error[0] = 0;
    const unsigned long long nb = (unsigned long long)grid[0] * grid[1] * grid[2];
    const unsigned nt = block[0] * block[1] * block[2];
    if (nt > 1024) {
        std::snprintf(wg_error, sizeof wg_error, "a block of %u threads: CUDA allows at most 1024", nt);
        return;
    }
    std::function<void()> run = body;
    wg_body = &run;
    const size_t stack_size = 64 * 1024;
    std::vector<char> stacks((size_t)nt * stack_size);
    std::vector<wg_fiber> fibers(nt);
    std::vector<unsigned long long> blocks(nb);
    unsigned long long order_state = wg_order_seed;
    for (unsigned long long i = 0; i < nb; ++i) blocks[i] = i;
    if (wg_order_seed)  // blocks in a shuffled order too
        for (unsigned long long i = nb; i > 1; --i) std::swap(blocks[i - 1], blocks[wg_next_random(order_state) % i]);
    for (unsigned long long k = 0; k < nb; ++k) {
        const unsigned long long b = blocks[k];
        blockIdx = {(unsigned)(b % grid[0]), (unsigned)((b / grid[0]) % grid[1]),
                    (unsigned)(b / ((unsigned long long)grid[0] * grid[1]))};
        if (!wg_run_block(nt, fibers, stacks, stack_size, order_state)) break;
    }
    wg_body = nullptr;
    wg_current = nullptr;
}

// Fibers never run at the same time, so an atomic add is a plain add (returning the old value).
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
