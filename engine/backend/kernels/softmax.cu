// Softmax and log-softmax along the last dimension, and the fused softmax-cross-entropy loss.
// A block per row (rows = product of the leading dims, cols = last dim; contiguous rows): the block's
// threads stride over the row's columns (coalesced loads) and combine their partial max and sums with
// block_max/block_sum (warp shuffles, then shared memory). All math in float32, subtracting the row max
// first so exp never overflows. Launch with a block of a multiple of 32 threads (see the launchers).
#include "wg_common.h"

// Row max and log(sum(exp(x - max))) of one row, both in float32; every thread of the block gets them.
template <typename T> __device__ void row_max_logsumexp(const T* row, long long cols, float* max_out, float* lse_out) {
    float m = -WG_INFINITY;
    THREAD_COL_LOOP(j, cols) m = fmaxf(m, load(row, j));
    m = block_max(m);
    float sum = 0.0f;
    THREAD_COL_LOOP(j, cols) sum += expf(load(row, j) - m);
    *max_out = m;
    *lse_out = logf(block_sum(sum));
}

template <typename T> __device__ void softmax_forward(const T* x, T* y, long long rows, long long cols) {
    BLOCK_ROW_LOOP(r, rows) {
        const T* xr = x + r * cols;
        float m, lse;
        row_max_logsumexp(xr, cols, &m, &lse);
        float inv_sum = expf(-lse);
        THREAD_COL_LOOP(j, cols) store(y + r * cols, j, expf(load(xr, j) - m) * inv_sum);
    }
}
// dx = y * (dy - sum(dy * y)) per row.
template <typename T> __device__ void softmax_backward(const T* dy, const T* y, T* dx, long long rows, long long cols) {
    BLOCK_ROW_LOOP(r, rows) {
        long long base = r * cols;
        float dot = 0.0f;
        THREAD_COL_LOOP(j, cols) dot += load(dy, base + j) * load(y, base + j);
        dot = block_sum(dot);
        THREAD_COL_LOOP(j, cols) store(dx, base + j, load(y, base + j) * (load(dy, base + j) - dot));
    }
}

template <typename T> __device__ void log_softmax_forward(const T* x, T* y, long long rows, long long cols) {
    BLOCK_ROW_LOOP(r, rows) {
        const T* xr = x + r * cols;
        float m, lse;
        row_max_logsumexp(xr, cols, &m, &lse);
        THREAD_COL_LOOP(j, cols) store(y + r * cols, j, load(xr, j) - m - lse);
    }
}
// dx = dy - exp(y) * sum(dy) per row (y is the log-softmax output).
template <typename T> __device__ void log_softmax_backward(const T* dy, const T* y, T* dx, long long rows, long long cols) {
    BLOCK_ROW_LOOP(r, rows) {
        long long base = r * cols;
        float sum = 0.0f;
        THREAD_COL_LOOP(j, cols) sum += load(dy, base + j);
        sum = block_sum(sum);
        THREAD_COL_LOOP(j, cols) store(dx, base + j, load(dy, base + j) - expf(load(y, base + j)) * sum);
    }
}

// Per-row cross-entropy from logits, as torch.nn.functional.cross_entropy(reduction='none') with
// label smoothing eps over C classes: (1 - eps) * -logp[target] + (eps / C) * -sum_c logp[c].
// Rows whose target is ignore_index get loss 0; the caller's mean divides by the other rows' count.
// An out-of-range target gives NaN rather than reading outside the row. (The branches depend on the
// row only, so the whole block takes them together and its reductions stay barriers of all threads.)
template <typename T>
__device__ void cross_entropy_forward(const T* logits, const long long* targets, float* loss, long long rows, long long classes,
                                      long long ignore_index, float label_smoothing) {
    BLOCK_ROW_LOOP(r, rows) {
        long long t = targets[r];
        if (t == ignore_index || t < 0 || t >= classes) {
            if (threadIdx.x == 0) loss[r] = t == ignore_index ? 0.0f : WG_NAN;
            continue;
        }
        const T* row = logits + r * classes;
        float m, lse;
        row_max_logsumexp(row, classes, &m, &lse);
        float smooth = 0.0f;
        if (label_smoothing > 0.0f) {
            float sum_logp = 0.0f;
            THREAD_COL_LOOP(j, classes) sum_logp += load(row, j) - m - lse;
            smooth = -block_sum(sum_logp) / (float)classes;
        }
        if (threadIdx.x == 0) {
            float nll = -(load(row, t) - m - lse);
            loss[r] = (1.0f - label_smoothing) * nll + label_smoothing * smooth;
        }
    }
}
// grad_logits[r, c] = grad_loss[r] * (softmax[r, c] - (1 - eps) * [c == target] - eps / C), 0 for ignored rows.
// grad_loss is per row so every reduction fits: 'mean' passes g / n_valid, 'sum' g, 'none' the grad itself.
template <typename T>
__device__ void cross_entropy_backward(const T* logits, const long long* targets, const float* grad_loss, T* grad_logits,
                                       long long rows, long long classes, long long ignore_index, float label_smoothing) {
    BLOCK_ROW_LOOP(r, rows) {
        long long t = targets[r];
        long long base = r * classes;
        if (t == ignore_index || t < 0 || t >= classes) {
            THREAD_COL_LOOP(j, classes) store(grad_logits, base + j, t == ignore_index ? 0.0f : WG_NAN);
            continue;
        }
        float m, lse;
        row_max_logsumexp(logits + base, classes, &m, &lse);
        float g = grad_loss[r];
        float off_target = label_smoothing / (float)classes;
        THREAD_COL_LOOP(j, classes) {
            float p = expf(load(logits, base + j) - m - lse);
            float target_weight = off_target + (j == t ? 1.0f - label_smoothing : 0.0f);
            store(grad_logits, base + j, g * (p - target_weight));
        }
    }
}

extern "C" __global__ void softmax_forward_f32(const float* x, float* y, long long rows, long long cols) { softmax_forward(x, y, rows, cols); }
extern "C" __global__ void softmax_forward_f16(const wg_half* x, wg_half* y, long long rows, long long cols) { softmax_forward(x, y, rows, cols); }
extern "C" __global__ void softmax_backward_f32(const float* dy, const float* y, float* dx, long long rows, long long cols) { softmax_backward(dy, y, dx, rows, cols); }
extern "C" __global__ void softmax_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long long rows, long long cols) { softmax_backward(dy, y, dx, rows, cols); }

extern "C" __global__ void log_softmax_forward_f32(const float* x, float* y, long long rows, long long cols) { log_softmax_forward(x, y, rows, cols); }
extern "C" __global__ void log_softmax_forward_f16(const wg_half* x, wg_half* y, long long rows, long long cols) { log_softmax_forward(x, y, rows, cols); }
extern "C" __global__ void log_softmax_backward_f32(const float* dy, const float* y, float* dx, long long rows, long long cols) { log_softmax_backward(dy, y, dx, rows, cols); }
extern "C" __global__ void log_softmax_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long long rows, long long cols) { log_softmax_backward(dy, y, dx, rows, cols); }

extern "C" __global__ void cross_entropy_forward_f32(const float* logits, const long long* targets, float* loss, long long rows,
                                                     long long classes, long long ignore_index, float label_smoothing) {
    cross_entropy_forward(logits, targets, loss, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_forward_f16(const wg_half* logits, const long long* targets, float* loss, long long rows,
                                                     long long classes, long long ignore_index, float label_smoothing) {
    cross_entropy_forward(logits, targets, loss, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_backward_f32(const float* logits, const long long* targets, const float* grad_loss,
                                                      float* grad_logits, long long rows, long long classes, long long ignore_index,
                                                      float label_smoothing) {
    cross_entropy_backward(logits, targets, grad_loss, grad_logits, rows, classes, ignore_index, label_smoothing);
}
extern "C" __global__ void cross_entropy_backward_f16(const wg_half* logits, const long long* targets, const float* grad_loss,
                                                      wg_half* grad_logits, long long rows, long long classes, long long ignore_index,
                                                      float label_smoothing) {
    cross_entropy_backward(logits, targets, grad_loss, grad_logits, rows, classes, ignore_index, label_smoothing);
}
