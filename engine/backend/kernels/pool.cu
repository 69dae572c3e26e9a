// 2-D max and average pooling over contiguous (N, C, H, W), forward and backward, float32.
// Forward: one thread per output element. Backward: one thread per *input* element gathering
// from every window that covers it — no atomics, deterministic sums. OH/OW come from the caller,
// so ceil_mode is the caller's choice of OH/OW; windows running past the edge are clipped.
#include "wg_common.h"

// Max pool: y = max over the (dilated) window, padding excluded; argmax = h*W + w within the
// (n, c) plane, as PyTorch's return_indices. NaN wins (the last one), as in PyTorch.
extern "C" __global__ void max_pool2d_forward_f32(const float* x, float* y, long long* argmax, long long N, long long C, long long H, long long W,
                                                  long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH, long long DW,
                                                  long long OH, long long OW) {
    GRID_STRIDE_LOOP(i, N * C * OH * OW) {
        long long ow = i % OW, oh = (i / OW) % OH, plane = i / (OW * OH);
        const float* xp = x + plane * H * W;
        float best = -WG_INFINITY;
        long long best_index = -1;
        for (long long ki = 0; ki < KH; ++ki) {
            long long h = oh * SH - PH + ki * DH;
            if (h < 0 || h >= H) continue;
            for (long long kj = 0; kj < KW; ++kj) {
                long long w = ow * SW - PW + kj * DW;
                if (w < 0 || w >= W) continue;
                float v = xp[h * W + w];
                if (best_index < 0 || v > best || isnan(v)) {
                    best = v;
                    best_index = h * W + w;
                }
            }
        }
        y[i] = best;
        argmax[i] = best_index;
    }
}

// dx[h, w] = sum of dy over the windows whose argmax is (h, w).
extern "C" __global__ void max_pool2d_backward_f32(const float* dy, const long long* argmax, float* dx, long long N, long long C, long long H,
                                                   long long W, long long KH, long long KW, long long SH, long long SW, long long PH, long long PW, long long DH,
                                                   long long DW, long long OH, long long OW) {
    GRID_STRIDE_LOOP(i, N * C * H * W) {
        long long w = i % W, h = (i / W) % H, plane = i / (W * H);
        float sum = 0.0f;
        for (long long ki = 0; ki < KH; ++ki) {
            long long oh_scaled = h + PH - ki * DH;
            if (oh_scaled < 0 || oh_scaled % SH != 0 || oh_scaled / SH >= OH) continue;
            for (long long kj = 0; kj < KW; ++kj) {
                long long ow_scaled = w + PW - kj * DW;
                if (ow_scaled < 0 || ow_scaled % SW != 0 || ow_scaled / SW >= OW) continue;
                long long o = (plane * OH + oh_scaled / SH) * OW + ow_scaled / SW;
                if (argmax[o] == h * W + w) sum += dy[o];
            }
        }
        dx[i] = sum;
    }
}

// The divisor of PyTorch's avg_pool2d: the window clipped to the padded image when
// count_include_pad, else to the image itself; divisor_override > 0 replaces both.
__device__ __forceinline__ float avg_pool_divisor(long long oh, long long ow, long long H, long long W, long long KH, long long KW, long long SH, long long SW,
                                                  long long PH, long long PW, int count_include_pad, long long divisor_override) {
    if (divisor_override > 0) return (float)divisor_override;
    long long h0 = oh * SH - PH, w0 = ow * SW - PW;
    long long h1 = h0 + KH < H + PH ? h0 + KH : H + PH, w1 = w0 + KW < W + PW ? w0 + KW : W + PW;
    if (count_include_pad) return (float)((h1 - h0) * (w1 - w0));
    h0 = h0 > 0 ? h0 : 0; w0 = w0 > 0 ? w0 : 0;
    h1 = h1 < H ? h1 : H; w1 = w1 < W ? w1 : W;
    return (float)((h1 - h0) * (w1 - w0));
}

extern "C" __global__ void avg_pool2d_forward_f32(const float* x, float* y, long long N, long long C, long long H, long long W, long long KH,
                                                  long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                  int count_include_pad, long long divisor_override) {
    GRID_STRIDE_LOOP(i, N * C * OH * OW) {
        long long ow = i % OW, oh = (i / OW) % OH, plane = i / (OW * OH);
        float sum = 0.0f;
        for (long long h = oh * SH - PH; h < oh * SH - PH + KH; ++h) {
            if (h < 0 || h >= H) continue;
            for (long long w = ow * SW - PW; w < ow * SW - PW + KW; ++w)
                if (w >= 0 && w < W) sum += x[(plane * H + h) * W + w];
        }
        y[i] = sum / avg_pool_divisor(oh, ow, H, W, KH, KW, SH, SW, PH, PW, count_include_pad, divisor_override);
    }
}

// dx[h, w] = sum over the windows covering (h, w) of dy / that window's divisor.
extern "C" __global__ void avg_pool2d_backward_f32(const float* dy, float* dx, long long N, long long C, long long H, long long W, long long KH,
                                                   long long KW, long long SH, long long SW, long long PH, long long PW, long long OH, long long OW,
                                                   int count_include_pad, long long divisor_override) {
    GRID_STRIDE_LOOP(i, N * C * H * W) {
        long long w = i % W, h = (i / W) % H, plane = i / (W * H);
        float sum = 0.0f;
        for (long long ki = 0; ki < KH; ++ki) {
            long long oh_scaled = h + PH - ki;
            if (oh_scaled < 0 || oh_scaled % SH != 0 || oh_scaled / SH >= OH) continue;
            long long oh = oh_scaled / SH;
            for (long long kj = 0; kj < KW; ++kj) {
                long long ow_scaled = w + PW - kj;
                if (ow_scaled < 0 || ow_scaled % SW != 0 || ow_scaled / SW >= OW) continue;
                long long ow = ow_scaled / SW;
                float divisor = avg_pool_divisor(oh, ow, H, W, KH, KW, SH, SW, PH, PW, count_include_pad, divisor_override);
                sum += dy[(plane * OH + oh) * OW + ow] / divisor;
            }
        }
        dx[i] = sum;
    }
}
