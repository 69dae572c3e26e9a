// Dropout with a counter-based RNG: element i's keep/drop decision is Philox-4x32-10 of the
// counter (i, offset) under the key `seed`, so it depends only on (seed, offset, i) — not on the
// launch shape or thread order. The same (seed, offset) reproduces the mask on any GPU, in the
// emulator, and in the NumPy reference (tests/kernel_references.py). The caller advances `offset`
// between calls that share a seed, as PyTorch does with its Philox offset.
#include "wg_common.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u  // golden ratio
#define PHILOX_W1 0xBB67AE85u  // sqrt(3) - 1

// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011).
__device__ __forceinline__ void philox4x32_10(unsigned int ctr[4], unsigned int k0, unsigned int k1) {
    for (int round = 0; round < 10; ++round) {
        unsigned long long p0 = (unsigned long long)PHILOX_M0 * ctr[0];
        unsigned long long p1 = (unsigned long long)PHILOX_M1 * ctr[2];
        unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
        unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
        ctr[0] = hi1 ^ ctr[1] ^ k0;
        ctr[1] = lo1;
        ctr[2] = hi0 ^ ctr[3] ^ k1;
        ctr[3] = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
}

// Uniform float in [0, 1) for element `index`: the top 24 bits of Philox's first output word.
__device__ __forceinline__ float philox_uniform(unsigned long long seed, unsigned long long offset, long long index) {
    unsigned long long i = (unsigned long long)index;
    unsigned int ctr[4] = {(unsigned int)i, (unsigned int)(i >> 32), (unsigned int)offset, (unsigned int)(offset >> 32)};
    philox4x32_10(ctr, (unsigned int)seed, (unsigned int)(seed >> 32));
    return (float)(ctr[0] >> 8) * (1.0f / 16777216.0f);
}

// y = x * mask / (1 - p), mask[i] = 1 with probability 1 - p. p == 1 drops everything (y = 0),
// like PyTorch, instead of multiplying by an infinite scale.
template <typename T>
__device__ void dropout_forward(const T* x, T* y, unsigned char* mask, long long n, float p,
                                unsigned long long seed, unsigned long long offset) {
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    GRID_STRIDE_LOOP(i, n) {
        unsigned char keep = philox_uniform(seed, offset, i) >= p;
        mask[i] = keep;
        store(y, i, keep ? load(x, i) * scale : 0.0f);
    }
}
// dx = dy * mask / (1 - p), with the mask the forward saved.
template <typename T>
__device__ void dropout_backward(const T* dy, const unsigned char* mask, T* dx, long long n, float p) {
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    GRID_STRIDE_LOOP(i, n) { store(dx, i, mask[i] ? load(dy, i) * scale : 0.0f); }
}

extern "C" __global__ void dropout_forward_f32(const float* x, float* y, unsigned char* mask, long long n, float p,
                                               unsigned long long seed, unsigned long long offset) {
    dropout_forward(x, y, mask, n, p, seed, offset);
}
extern "C" __global__ void dropout_forward_f16(const wg_half* x, wg_half* y, unsigned char* mask, long long n, float p,
                                               unsigned long long seed, unsigned long long offset) {
    dropout_forward(x, y, mask, n, p, seed, offset);
}
extern "C" __global__ void dropout_backward_f32(const float* dy, const unsigned char* mask, float* dx, long long n, float p) {
    dropout_backward(dy, mask, dx, n, p);
}
extern "C" __global__ void dropout_backward_f16(const wg_half* dy, const unsigned char* mask, wg_half* dx, long long n, float p) {
    dropout_backward(dy, mask, dx, n, p);
}

// The raw generator, exposed so tests can check it bit for bit against the published Philox
// known-answer vectors: out[4*i .. 4*i+3] = Philox-4x32-10(counter = ctr[4*i .. 4*i+3], key = key[2*i, 2*i+1]).
extern "C" __global__ void philox4x32_10_blocks(const unsigned int* ctr, const unsigned int* key, unsigned int* out, long long n) {
    GRID_STRIDE_LOOP(i, n) {
        unsigned int c[4] = {ctr[4 * i], ctr[4 * i + 1], ctr[4 * i + 2], ctr[4 * i + 3]};
        philox4x32_10(c, key[2 * i], key[2 * i + 1]);
        for (int k = 0; k < 4; ++k) out[4 * i + k] = c[k];
    }
}
