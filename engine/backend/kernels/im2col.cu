// im2col / col2im for 2-D convolution over contiguous (N, C, H, W) images.
// Columns are laid out (N, C*KH*KW, OH*OW), row index (c*KH + ki)*KW + kj — the layout of
// torch.nn.functional.unfold — so conv forward is a batched matmul weight(OC, C*KH*KW) @ cols.
// col2im is the adjoint (sum of overlapping patches, = torch.nn.functional.fold): conv's input
// gradient and conv-transpose's forward. It runs one thread per *image* element gathering every
// column entry that reads it, so it needs no atomics and sums in a fixed order (deterministic).
#include "wg_common.h"

struct ConvGeometry {
    long N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW;
};

// One thread per column element; padding reads as 0.
template <typename T> __device__ void im2col(const T* image, T* cols, ConvGeometry g) {
    long total = g.N * g.C * g.KH * g.KW * g.OH * g.OW;
    GRID_STRIDE_LOOP(i, total) {
        long ow = i % g.OW, oh = (i / g.OW) % g.OH;
        long kj = (i / (g.OW * g.OH)) % g.KW, ki = (i / (g.OW * g.OH * g.KW)) % g.KH;
        long c = (i / (g.OW * g.OH * g.KW * g.KH)) % g.C, n = i / (g.OW * g.OH * g.KW * g.KH * g.C);
        long h = oh * g.SH - g.PH + ki * g.DH, w = ow * g.SW - g.PW + kj * g.DW;
        bool inside = h >= 0 && h < g.H && w >= 0 && w < g.W;
        store(cols, i, inside ? load(image, ((n * g.C + c) * g.H + h) * g.W + w) : 0.0f);
    }
}

// One thread per image element (n, c, h, w): for each kernel tap (ki, kj), the output position that
// read this pixel through that tap is oh = (h + PH - ki*DH) / SH when that division is exact.
template <typename T> __device__ void col2im(const T* cols, T* image, ConvGeometry g) {
    long total = g.N * g.C * g.H * g.W;
    long L = g.OH * g.OW;
    GRID_STRIDE_LOOP(i, total) {
        long w = i % g.W, h = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C, n = i / (g.W * g.H * g.C);
        float sum = 0.0f;
        for (long ki = 0; ki < g.KH; ++ki) {
            long oh_scaled = h + g.PH - ki * g.DH;
            if (oh_scaled < 0 || oh_scaled % g.SH != 0 || oh_scaled / g.SH >= g.OH) continue;
            long oh = oh_scaled / g.SH;
            for (long kj = 0; kj < g.KW; ++kj) {
                long ow_scaled = w + g.PW - kj * g.DW;
                if (ow_scaled < 0 || ow_scaled % g.SW != 0 || ow_scaled / g.SW >= g.OW) continue;
                long ow = ow_scaled / g.SW;
                long row = (c * g.KH + ki) * g.KW + kj;
                sum += load(cols, (n * g.C * g.KH * g.KW + row) * L + oh * g.OW + ow);
            }
        }
        store(image, i, sum);
    }
}

extern "C" __global__ void im2col_f32(const float* image, float* cols, long N, long C, long H, long W, long KH, long KW,
                                      long SH, long SW, long PH, long PW, long DH, long DW, long OH, long OW) {
    im2col(image, cols, ConvGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW});
}
extern "C" __global__ void im2col_f16(const wg_half* image, wg_half* cols, long N, long C, long H, long W, long KH, long KW,
                                      long SH, long SW, long PH, long PW, long DH, long DW, long OH, long OW) {
    im2col(image, cols, ConvGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW});
}
extern "C" __global__ void col2im_f32(const float* cols, float* image, long N, long C, long H, long W, long KH, long KW,
                                      long SH, long SW, long PH, long PW, long DH, long DW, long OH, long OW) {
    col2im(cols, image, ConvGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW});
}
extern "C" __global__ void col2im_f16(const wg_half* cols, wg_half* image, long N, long C, long H, long W, long KH, long KW,
                                      long SH, long SW, long PH, long PW, long DH, long DW, long OH, long OW) {
    col2im(cols, image, ConvGeometry{N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW});
}
