// im2col / col2im for 2-D convolution over contiguous (N, C, H, W) images, in two column layouts:
// - (N, C*KH*KW, OH*OW), row index (c*KH + ki)*KW + kj: the layout of torch.nn.functional.unfold, where
//   conv forward is a batched matmul weight(OC, C*KH*KW) @ cols (F.unfold/fold, grouped convolutions);
// - channel-major (C*KH*KW, N, OH*OW), the `_kn` entry points: the batch folds into the GEMM's columns,
//   so an ungrouped conv's forward and both gradients are each one 2-D GEMM (one cuBLAS call on the host
//   instead of a broadcast batched matmul, and no sum over the batch after the weight gradient).
// col2im is the adjoint (sum of overlapping patches, = torch.nn.functional.fold): conv's input
// gradient and conv-transpose's forward. It runs one thread per *image* element gathering every
// column entry that reads it, so it needs no atomics and sums in a fixed order (deterministic).
#include "wg_common.h"

// Where column (row, n, l) lives: row (c*KH + ki)*KW + kj of image n at output position l = oh*OW + ow.
template <bool CHANNEL_MAJOR> __device__ long long column_index(long long row, long long n, long long l, WindowGeometry g) {
    long long L = g.OH * g.OW;
    return CHANNEL_MAJOR ? (row * g.N + n) * L + l : (n * g.C * g.KH * g.KW + row) * L + l;
}

// One thread per column element; padding reads as 0.
template <bool CHANNEL_MAJOR, typename T> __device__ void im2col(const T* image, T* cols, WindowGeometry g) {
    long long L = g.OH * g.OW, rows = g.C * g.KH * g.KW;
    GRID_STRIDE_LOOP(i, g.N * rows * L) {
        long long l = i % L;
        long long row = CHANNEL_MAJOR ? i / (L * g.N) : (i / L) % rows;
        long long n = CHANNEL_MAJOR ? (i / L) % g.N : i / (L * rows);
        long long ow = l % g.OW, oh = l / g.OW;
        long long kj = row % g.KW, ki = (row / g.KW) % g.KH, c = row / (g.KW * g.KH);
        long long h = oh * g.SH - g.PH + ki * g.DH, w = ow * g.SW - g.PW + kj * g.DW;
        bool inside = h >= 0 && h < g.H && w >= 0 && w < g.W;
        store(cols, i, inside ? load(image, ((n * g.C + c) * g.H + h) * g.W + w) : 0.0f);
    }
}

// One thread per image element (n, c, h, w), summing the column entries of every window tap that read it.
template <bool CHANNEL_MAJOR, typename T> __device__ void col2im(const T* cols, T* image, WindowGeometry g) {
    long long total = g.N * g.C * g.H * g.W;
    GRID_STRIDE_LOOP(i, total) {
        long long w = i % g.W, h = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C, n = i / (g.W * g.H * g.C);
        float sum = 0.0f;
        for_each_window_over(g, h, w, [&](long long ki, long long kj, long long oh, long long ow) {
            long long row = (c * g.KH + ki) * g.KW + kj;
            sum += load(cols, column_index<CHANNEL_MAJOR>(row, n, oh * g.OW + ow, g));
        });
        store(image, i, sum);
    }
}

extern "C" __global__ void im2col_f32(const float* image, float* cols, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                      long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    im2col<false>(image, cols, WG_GEOMETRY);
}
extern "C" __global__ void im2col_f16(const wg_half* image, wg_half* cols, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                      long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    im2col<false>(image, cols, WG_GEOMETRY);
}
extern "C" __global__ void col2im_f32(const float* cols, float* image, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                      long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    col2im<false>(cols, image, WG_GEOMETRY);
}
extern "C" __global__ void col2im_f16(const wg_half* cols, wg_half* image, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                      long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    col2im<false>(cols, image, WG_GEOMETRY);
}
extern "C" __global__ void im2col_kn_f32(const float* image, float* cols, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                         long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    im2col<true>(image, cols, WG_GEOMETRY);
}
extern "C" __global__ void im2col_kn_f16(const wg_half* image, wg_half* cols, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                         long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    im2col<true>(image, cols, WG_GEOMETRY);
}
extern "C" __global__ void col2im_kn_f32(const float* cols, float* image, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                         long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    col2im<true>(cols, image, WG_GEOMETRY);
}
extern "C" __global__ void col2im_kn_f16(const wg_half* cols, wg_half* image, long long N, long long C, long long H, long long W, long long KH, long long KW,
                                         long long SH, long long SW, long long PH, long long PW, long long DH, long long DW, long long OH, long long OW) {
    col2im<true>(cols, image, WG_GEOMETRY);
}
