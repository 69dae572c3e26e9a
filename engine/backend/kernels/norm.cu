// Batch-norm backward and layer-norm forward/backward, float32 (under autocast PyTorch keeps
// normalisation in float32 too). A block reduces a channel (batch norm) or a row (layer norm) with
// block_sum (warp shuffles, then shared memory), its threads striding over the elements so neighbouring
// threads load neighbouring addresses; the layer-norm parameter gradients take a thread per feature
// column (neighbouring columns are neighbouring addresses). Launch the block-reduction kernels with a
// multiple of 32 threads per block. Null weight/bias pointers mean affine=False (weight 1, bias 0).
#include "wg_common.h"

// Batch norm over x viewed as (N, C, S), S = product of the spatial dims, M = N*S per channel.
// Pass 1, a block per channel: grad_bias[c] = sum dy, grad_weight[c] = sum dy * xhat, with
// xhat = (x - mean[c]) * invstd[c] — the two sums the input gradient needs.
extern "C" __global__ void batch_norm_backward_reduce_f32(const float* dy, const float* x, const float* mean,
                                                          const float* invstd, float* grad_weight, float* grad_bias,
                                                          long long N, long long C, long long S) {
    BLOCK_ROW_LOOP(c, C) {
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        const float mu = mean[c], inv = invstd[c];
        THREAD_COL_LOOP(k, N * S) {
            long long i = ((k / S) * C + c) * S + k % S;
            sum_dy += dy[i];
            sum_dy_xhat += dy[i] * (x[i] - mu) * inv;
        }
        sum_dy = block_sum(sum_dy);
        sum_dy_xhat = block_sum(sum_dy_xhat);
        if (threadIdx.x == 0) {
            grad_bias[c] = sum_dy;
            grad_weight[c] = sum_dy_xhat;
        }
    }
}

// Pass 2, one thread per element. Training (batch statistics):
//   dx = weight * invstd * (dy - grad_bias / M - xhat * grad_weight / M)
// Eval (running statistics are constants): dx = dy * weight * invstd.
extern "C" __global__ void batch_norm_backward_elemt_f32(const float* dy, const float* x, const float* mean,
                                                         const float* invstd, const float* weight,
                                                         const float* grad_weight, const float* grad_bias, float* dx,
                                                         long long N, long long C, long long S, int training) {
    float M = (float)(N * S);
    GRID_STRIDE_LOOP(i, N * C * S) {
        long long c = (i / S) % C;
        float scale = (weight ? weight[c] : 1.0f) * invstd[c];
        if (!training) { dx[i] = dy[i] * scale; continue; }
        float xhat = (x[i] - mean[c]) * invstd[c];
        dx[i] = scale * (dy[i] - grad_bias[c] / M - xhat * grad_weight[c] / M);
    }
}

// Layer norm over the last `cols` elements of each of `rows` rows, a block per row:
// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(biased var + eps). Saves mean and rstd.
extern "C" __global__ void layer_norm_forward_f32(const float* x, const float* weight, const float* bias, float* y,
                                                  float* mean, float* rstd, long long rows, long long cols, float eps) {
    BLOCK_ROW_LOOP(r, rows) {
        const float* xr = x + r * cols;
        float sum = 0.0f;
        THREAD_COL_LOOP(j, cols) sum += xr[j];
        float mu = block_sum(sum) / (float)cols;
        float sq = 0.0f;  // second pass around the mean: no cancellation for large means
        THREAD_COL_LOOP(j, cols) sq += (xr[j] - mu) * (xr[j] - mu);
        float inv = 1.0f / sqrtf(block_sum(sq) / (float)cols + eps);
        THREAD_COL_LOOP(j, cols)
            y[r * cols + j] = (xr[j] - mu) * inv * (weight ? weight[j] : 1.0f) + (bias ? bias[j] : 0.0f);
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = inv;
        }
    }
}

// Input gradient, a block per row, with g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
extern "C" __global__ void layer_norm_backward_f32(const float* dy, const float* x, const float* mean, const float* rstd,
                                                   const float* weight, float* dx, long long rows, long long cols) {
    BLOCK_ROW_LOOP(r, rows) {
        long long base = r * cols;
        const float mu = mean[r], inv = rstd[r];
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
        THREAD_COL_LOOP(j, cols) {
            float g = dy[base + j] * (weight ? weight[j] : 1.0f);
            sum_g += g;
            sum_g_xhat += g * (x[base + j] - mu) * inv;
        }
        float mean_g = block_sum(sum_g) / (float)cols, mean_g_xhat = block_sum(sum_g_xhat) / (float)cols;
        THREAD_COL_LOOP(j, cols) {
            float g = dy[base + j] * (weight ? weight[j] : 1.0f);
            float xhat = (x[base + j] - mu) * inv;
            dx[base + j] = inv * (g - mean_g - xhat * mean_g_xhat);
        }
    }
}

// Parameter gradients, one thread per feature column: grad_weight = sum_rows dy * xhat, grad_bias = sum_rows dy.
extern "C" __global__ void layer_norm_backward_params_f32(const float* dy, const float* x, const float* mean,
                                                          const float* rstd, float* grad_weight, float* grad_bias,
                                                          long long rows, long long cols) {
    GRID_STRIDE_LOOP(j, cols) {
        float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
        for (long long r = 0; r < rows; ++r) {
            float g = dy[r * cols + j];
            sum_dy += g;
            sum_dy_xhat += g * (x[r * cols + j] - mean[r]) * rstd[r];
        }
        grad_weight[j] = sum_dy_xhat;
        grad_bias[j] = sum_dy;
    }
}
