// Softmax and log-softmax along the last dimension, and the fused softmax-cross-entropy loss.
// One thread per row (rows = product of the leading dims, cols = last dim; contiguous rows):
// each thread does its row's max, sum and normalisation in float32, subtracting the row max first
// so exp never overflows. Fine for our class counts; no shared memory, so the emulator is exact.
#include "wg_common.h"

// Row max and log(sum(exp(x - max))) of one row, both in float32.
template <typename T> __device__ void row_max_logsumexp(const T* row, long cols, float* max_out, float* lse_out) {
    float m = -WG_INFINITY;
    for (long j = 0; j < cols; ++j) m = fmaxf(m, load(row, j));
    float sum = 0.0f;
    for (long j = 0; j < cols; ++j) sum += expf(load(row, j) - m);
    *max_out = m;
    *lse_out = logf(sum);
}

template <typename T> __device__ void softmax_forward(const T* x, T* y, long rows, long cols) {
    GRID_STRIDE_LOOP(r, rows) {
        const T* xr = x + r * cols;
        float m, lse;
        row_max_logsumexp(xr, cols, &m, &lse);
        float inv_sum = expf(-lse);
        for (long j = 0; j < cols; ++j) store(y + r * cols, j, expf(load(xr, j) - m) * inv_sum);
    }
}
// dx = y * (dy - sum(dy * y)) per row.
template <typename T> __device__ void softmax_backward(const T* dy, const T* y, T* dx, long rows, long cols) {
    GRID_STRIDE_LOOP(r, rows) {
        long base = r * cols;
        float dot = 0.0f;
        for (long j = 0; j < cols; ++j) dot += load(dy, base + j) * load(y, base + j);
        for (long j = 0; j < cols; ++j) store(dx, base + j, load(y, base + j) * (load(dy, base + j) - dot));
    }
}

template <typename T> __device__ void log_softmax_forward(const T* x, T* y, long rows, long cols) {
    GRID_STRIDE_LOOP(r, rows) {
        const T* xr = x + r * cols;
        float m, lse;
        row_max_logsumexp(xr, cols, &m, &lse);
        for (long j = 0; j < cols; ++j) store(y + r * cols, j, load(xr, j) - m - lse);
    }
}
// dx = dy - exp(y) * sum(dy) per row (y is the log-softmax output).
template <typename T> __device__ void log_softmax_backward(const T* dy, const T* y, T* dx, long rows, long cols) {
    GRID_STRIDE_LOOP(r, rows) {
        long base = r * cols;
        float sum = 0.0f;
        for (long j = 0; j < cols; ++j) sum += load(dy, base + j);
        for (long j = 0; j < cols; ++j) store(dx, base + j, load(dy, base + j) - expf(load(y, base + j)) * sum);
    }
}

// Per-row cross-entropy from logits, as torch.nn.functional.cross_entropy(reduction='none') with
// label smoothing eps over C classes: (1 - eps) * -logp[target] + (eps / C) * -sum_c logp[c].
// Rows whose target is ignore_index get loss 0; the caller's mean divides by the other rows' count.
// An out-of-range target gives NaN rather than reading outside the row.
template <typename T>
__device__ void cross_entropy_forward(const T* logits, const long* targets, float* loss, long rows, long classes,
                                      long ignore_index, float label_smoothing) {
    GRID_STRIDE_LOOP(r, rows) {
        long t = targets[r];
        if (t == ignore_index) { loss[r] = 0.0f; continue; }
        if (t < 0 || t >= classes) { loss[r] = WG_NAN; continue; }
        const T* row = logits + r * classes;
        float m, lse;
        row_max_logsumexp(row, classes, &m, &lse);
        float nll = -(load(row, t) - m - lse);
        float smooth = 0.0f;
        if (label_smoothing > 0.0f) {
            float sum_logp = 0.0f;
            for (long j = 0; j < classes; ++j) sum_logp += load(row, j) - m - lse;
            smooth = -sum_logp / (float)classes;
        }
        loss[r] = (1.0f - label_smoothing) * nll + label_smoothing * smooth;
    }
}
// grad_logits[r, c] = grad_loss[r] * (softmax[r, c] - (1 - eps) * [c == target] - eps / C), 0 for ignored rows.
// grad_loss is per row so every reduction fits: 'mean' passes g / n_valid, 'sum' g, 'none' the grad itself.
template <typename T>
__device__ void cross_entropy_backward(const T* logits, const long* targets, const float* grad_loss, T* grad_logits,
                                       long rows, long classes, long ignore_index, float label_smoothing) {
    GRID_STRIDE_LOOP(r, rows) {
        long t = targets[r];
        long base = r * classes;
        if (t == ignore_index || t < 0 || t >= classes) {
            for (long j = 0; j < classes; ++j) store(grad_logits, base + j, t == ignore_index ? 0.0f : WG_NAN);
            continue;
        }
        float m, lse;
        row_max_logsumexp(logits + base, classes, &m, &lse);
        float g = grad_loss[r];
        float off_target = label_smoothing / (float)classes;
        for (long j = 0; j < classes; ++j) {
            float p = expf(load(logits, base + j) - m - lse);
            float target_weight = off_target + (j == t ? 1.0f - label_smoothing : 0.0f);
            store(grad_logits, base + j, g * (p - target_weight));
        }
    }
}

extern "C" __global__ void softmax_forward_f32(const float* x, float* y, long rows, long cols) { softmax_forward(x, y, rows, cols); }
extern "C" __global__ void softmax_forward_f16(const wg_half* x, wg_half* y, long rows, long cols) { softmax_forward(x, y, rows, cols); }
extern "C" __global__ void softmax_backward_f32(const float* dy, const float* y, float* dx, long rows, long cols) { softmax_backward(dy, y, dx, rows, cols); }
extern "C" __global__ void softmax_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long rows, long cols) { softmax_backward(dy, y, dx, rows, cols); }

extern "C" __global__ void log_softmax_forward_f32(const float* x, float* y, long rows, long cols) { log_softmax_forward(x, y, rows, cols); }
extern "C" __global__ void log_softmax_forward_f16(const wg_half* x, wg_half* y, long rows, long cols) { log_softmax_forward(x, y, rows, cols); }
extern "C" __global__ void log_softmax_backward_f32(const float* dy, const float* y, float* dx, long rows, long cols) { log_softmax_backward(dy, y, dx, rows, cols); }
extern "C" __global__ void log_softmax_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long rows, long cols) { log_softmax_backward(dy, y, dx, rows, cols); }

extern "C" __global__ void cross_entropy_forward_f32(const float* logits, const long* targets, float* loss, long rows,
                                                     long classes, long ignore_index, float label_smoothing) {
    cross_entropy_forward(logits, targets, loss, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_forward_f16(const wg_half* logits, const long* targets, float* loss, long rows,
                                                     long classes, long ignore_index, float label_smoothing) {
    cross_entropy_forward(logits, targets, loss, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_backward_f32(const float* logits, const long* targets, const float* grad_loss,
                                                      float* grad_logits, long rows, long classes, long ignore_index,
                                                      float label_smoothing) {
    cross_entropy_backward(logits, targets, grad_loss, grad_logits, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_backward_f16(const wg_half* logits, const long* targets, const float* grad_loss,
                                                      wg_half* grad_logits, long rows, long classes, long ignore_index,
                                                      float label_smoothing) {
    cross_entropy_backward(logits, targets, grad_loss, grad_logits, rows, classes, ignore_index, label_smoothing);
}
