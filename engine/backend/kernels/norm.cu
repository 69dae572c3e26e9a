// Batch-norm backward and layer-norm forward/backward, float32 (under autocast PyTorch keeps
// normalisation in float32 too). Reductions are per-thread loops: one thread per channel
// (batch norm) or per row / per feature column (layer norm) — no shared memory.
// Null weight/bias pointers mean affine=False (weight 1, bias 0).
#include "wg_common.h"

// Batch norm over x viewed as (N, C, S), S = product of the spatial dims, M = N*S per channel.
// Pass 1, one thread per channel: grad_bias[c] = sum dy, grad_weight[c] = sum dy * xhat, with
// xhat = (x - mean[c]) * invstd[c] — the two sums the input gradient needs.
extern "C" __global__ void batch_norm_backward_reduce_f32(const float* dy, const float* x, const float* mean,
                                                          const float* invstd, float* grad_weight, float* grad_bias,
                                                          long N, long C, long S) {
    GRID_STRIDE_LOOP(c, C) {
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        for (long n = 0; n < N; ++n)
            for (long s = 0; s < S; ++s) {
                long i = (n * C + c) * S + s;
                sum_dy += dy[i];
                sum_dy_xhat += dy[i] * (x[i] - mean[c]) * invstd[c];
            }
        grad_bias[c] = sum_dy;
        grad_weight[c] = sum_dy_xhat;
    }
}

// Pass 2, one thread per element. Training (batch statistics):
//   dx = weight * invstd * (dy - grad_bias / M - xhat * grad_weight / M)
// Eval (running statistics are constants): dx = dy * weight * invstd.
extern "C" __global__ void batch_norm_backward_elemt_f32(const float* dy, const float* x, const float* mean,
                                                         const float* invstd, const float* weight,
                                                         const float* grad_weight, const float* grad_bias, float* dx,
                                                         long N, long C, long S, int training) {
    float M = (float)(N * S);
    GRID_STRIDE_LOOP(i, N * C * S) {
        long c = (i / S) % C;
        float scale = (weight ? weight[c] : 1.0f) * invstd[c];
        if (!training) { dx[i] = dy[i] * scale; continue; }
        float xhat = (x[i] - mean[c]) * invstd[c];
        dx[i] = scale * (dy[i] - grad_bias[c] / M - xhat * grad_weight[c] / M);
    }
}

// Layer norm over the last `cols` elements of each of `rows` rows, one thread per row:
// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(biased var + eps). Saves mean and rstd.
extern "C" __global__ void layer_norm_forward_f32(const float* x, const float* weight, const float* bias, float* y,
                                                  float* mean, float* rstd, long rows, long cols, float eps) {
    GRID_STRIDE_LOOP(r, rows) {
        const float* xr = x + r * cols;
        float sum = 0.0f;
        for (long j = 0; j < cols; ++j) sum += xr[j];
        float mu = sum / (float)cols;
        float sq = 0.0f;  // second pass around the mean: no cancellation for large means
        for (long j = 0; j < cols; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
        float inv = 1.0f / sqrtf(sq / (float)cols + eps);
        for (long j = 0; j < cols; ++j)
            y[r * cols + j] = (xr[j] - mu) * inv * (weight ? weight[j] : 1.0f) + (bias ? bias[j] : 0.0f);
        mean[r] = mu;
        rstd[r] = inv;
    }
}

// Input gradient, one thread per row, with g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
extern "C" __global__ void layer_norm_backward_f32(const float* dy, const float* x, const float* mean, const float* rstd,
                                                   const float* weight, float* dx, long rows, long cols) {
    GRID_STRIDE_LOOP(r, rows) {
        long base = r * cols;
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
        for (long j = 0; j < cols; ++j) {
            float g = dy[base + j] * (weight ? weight[j] : 1.0f);
            sum_g += g;
            sum_g_xhat += g * (x[base + j] - mean[r]) * rstd[r];
        }
        float mean_g = sum_g / (float)cols, mean_g_xhat = sum_g_xhat / (float)cols;
        for (long j = 0; j < cols; ++j) {
            float g = dy[base + j] * (weight ? weight[j] : 1.0f);
            float xhat = (x[base + j] - mean[r]) * rstd[r];
            dx[base + j] = rstd[r] * (g - mean_g - xhat * mean_g_xhat);
        }
    }
}

// Parameter gradients, one thread per feature column: grad_weight = sum_rows dy * xhat, grad_bias = sum_rows dy.
extern "C" __global__ void layer_norm_backward_params_f32(const float* dy, const float* x, const float* mean,
                                                          const float* rstd, float* grad_weight, float* grad_bias,
                                                          long rows, long cols) {
    GRID_STRIDE_LOOP(j, cols) {
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        for (long r = 0; r < rows; ++r) {
            float g = dy[r * cols + j];
            sum_dy += g;
            sum_dy_xhat += g * (x[r * cols + j] - mean[r]) * rstd[r];
        }
        grad_weight[j] = sum_dy_xhat;
        grad_bias[j] = sum_dy;
    }
}
