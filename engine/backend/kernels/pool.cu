// 2-D max and average pooling over contiguous (N, C, H, W), forward and backward, float32 and float16
// (wg_half storage, math in float32). Forward: one thread per output element. Backward: one thread per
// *input* element gathering from every window that covers it — no atomics, deterministic sums. OH/OW come
// from the caller, so ceil_mode is the caller's choice of OH/OW; windows running past the edge are clipped.
#include "wg_common.h"

// Max pool: y = max over the (dilated) window, padding excluded; argmax = h*W + w within the
// (n, c) plane, as PyTorch's return_indices. NaN wins (the last one), as in PyTorch.
template <typename T> __device__ void max_pool2d_forward(const T* x, T* y, long long* argmax, WindowGeometry g) {
    GRID_STRIDE_LOOP(i, g.N * g.C * g.OH * g.OW) {
        long long ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
        const T* xp = x + plane * g.H * g.W;
        float best = -WG_INFINITY;
        long long best_index = -1;
        for (long long ki = 0; ki < g.KH; ++ki) {
            long long h = oh * g.SH - g.PH + ki * g.DH;
            if (h < 0 || h >= g.H) continue;
            for (long long kj = 0; kj < g.KW; ++kj) {
                long long w = ow * g.SW - g.PW + kj * g.DW;
                if (w < 0 || w >= g.W) continue;
                float v = load(xp, h * g.W + w);
                if (best_index < 0 || v > best || isnan(v)) {
                    best = v;
                    best_index = h * g.W + w;
                }
            }
        }
        store(y, i, best);  // a float16 maximum was a float16 value: the store is exact
        argmax[i] = best_index;
    }
}

// dx[h, w] = sum of dy over the windows whose argmax is (h, w).
template <typename T> __device__ void max_pool2d_backward(const T* dy, const long long* argmax, T* dx, WindowGeometry g) {
    GRID_STRIDE_LOOP(i, g.N * g.C * g.H * g.W) {
        long long w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
        float sum = 0.0f;
        for_each_window_over(g, h, w, [&](long long, long long, long long oh, long long ow) {
            long long o = (plane * g.OH + oh) * g.OW + ow;
            if (argmax[o] == h * g.W + w) sum += load(dy, o);
        });
        store(dx, i, sum);
    }
}

// The divisor of PyTorch's avg_pool2d: the window clipped to the padded image when
// count_include_pad, else to the image itself; divisor_override > 0 replaces both.
__device__ __forceinline__ float avg_pool_divisor(WindowGeometry g, long long oh, long long ow, int count_include_pad,
                                                  long long divisor_override) {
    if (divisor_override > 0) return (float)divisor_override;
    long long h0 = oh * g.SH - g.PH, w0 = ow * g.SW - g.PW;
    long long h1 = h0 + g.KH < g.H + g.PH ? h0 + g.KH : g.H + g.PH, w1 = w0 + g.KW < g.W + g.PW ? w0 + g.KW : g.W + g.PW;
    if (count_include_pad) return (float)((h1 - h0) * (w1 - w0));
    h0 = h0 > 0 ? h0 : 0; w0 = w0 > 0 ? w0 : 0;
    h1 = h1 < g.H ? h1 : g.H; w1 = w1 < g.W ? w1 : g.W;
    return (float)((h1 - h0) * (w1 - w0));
}

// Avg pool (no dilation): the window's sum in float32 over the divisor, rounded once to T, as PyTorch's
// CPU and CUDA kernels accumulate float16 in float32.
template <typename T> __device__ void avg_pool2d_forward(const T* x, T* y, WindowGeometry g, int count_include_pad,
                                                         long long divisor_override) {
    GRID_STRIDE_LOOP(i, g.N * g.C * g.OH * g.OW) {
        long long ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
        float sum = 0.0f;
        for (long long h = oh * g.SH - g.PH; h < oh * g.SH - g.PH + g.KH; ++h) {
            if (h < 0 || h >= g.H) continue;
            for (long long w = ow * g.SW - g.PW; w < ow * g.SW - g.PW + g.KW; ++w)
                if (w >= 0 && w < g.W) sum += load(x, (plane * g.H + h) * g.W + w);
        }
        store(y, i, sum / avg_pool_divisor(g, oh, ow, count_include_pad, divisor_override));
    }
}

// dx[h, w] = sum over the windows covering (h, w) of dy / that window's divisor.
template <typename T> __device__ void avg_pool2d_backward(const T* dy, T* dx, WindowGeometry g, int count_include_pad,
                                                          long long divisor_override) {
    GRID_STRIDE_LOOP(i, g.N * g.C * g.H * g.W) {
        long long w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
        float sum = 0.0f;
        for_each_window_over(g, h, w, [&](long long, long long, long long oh, long long ow) {
            float divisor = avg_pool_divisor(g, oh, ow, count_include_pad, divisor_override);
            sum += load(dy, (plane * g.OH + oh) * g.OW + ow) / divisor;
        });
        store(dx, i, sum);
    }
}

// Entry points: one per (op, direction, dtype), written out so that nvrtc.entry_points sees every name.
// Average pooling has no dilation parameters: its windows are dense.
#define WG_DENSE_GEOMETRY WindowGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, 1, 1, OH, OW}
extern "C" __global__ void max_pool2d_forward_f32(const float* x, float* y, long long* argmax, long long N, long long C, long long H, long long W,
                                                  long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH, long long DW,
                                                  long long OH, long long OW) {
    max_pool2d_forward(x, y, argmax, WG_GEOMETRY);
}
extern "C" __global__ void max_pool2d_forward_f16(const wg_half* x, wg_half* y, long long* argmax, long long N, long long C, long long H, long long W,
                                                  long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH, long long DW,
                                                  long long OH, long long OW) {
    max_pool2d_forward(x, y, argmax, WG_GEOMETRY);
}
extern "C" __global__ void max_pool2d_backward_f32(const float* dy, const long long* argmax, float* dx, long long N, long long C, long long H,
                                                   long long W, long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH,
                                                   long long DW, long long OH, long long OW) {
    max_pool2d_backward(dy, argmax, dx, WG_GEOMETRY);
}
extern "C" __global__ void max_pool2d_backward_f16(const wg_half* dy, const long long* argmax, wg_half* dx, long long N, long long C, long long H,
                                                   long long W, long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH,
                                                   long long DW, long long OH, long long OW) {
    max_pool2d_backward(dy, argmax, dx, WG_GEOMETRY);
}
extern "C" __global__ void avg_pool2d_forward_f32(const float* x, float* y, long long N, long long C, long long H, long long W, long long KH,
                                                  long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                  int count_include_pad, long long divisor_override) {
    avg_pool2d_forward(x, y, WG_DENSE_GEOMETRY, count_include_pad, divisor_override);
}
extern "C" __global__ void avg_pool2d_forward_f16(const wg_half* x, wg_half* y, long long N, long long C, long long H, long long W, long long KH,
                                                  long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                  int count_include_pad, long long divisor_override) {
    avg_pool2d_forward(x, y, WG_DENSE_GEOMETRY, count_include_pad, divisor_override);
}
extern "C" __global__ void avg_pool2d_backward_f32(const float* dy, float* dx, long long N, long long C, long long H, long long W, long long KH,
                                                   long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                   int count_include_pad, long long divisor_override) {
    avg_pool2d_backward(dy, dx, WG_DENSE_GEOMETRY, count_include_pad, divisor_override);
}
extern "C" __global__ void avg_pool2d_backward_f16(const wg_half* dy, wg_half* dx, long long N, long long C, long long H, long long W, long long KH,
                                                   long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                   int count_include_pad, long long divisor_override) {
    avg_pool2d_backward(dy, dx, WG_DENSE_GEOMETRY, count_include_pad, divisor_override);
}
