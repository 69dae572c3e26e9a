// Fused optimiser steps: one thread per parameter element does the whole update (weight decay,
// state updates, bias correction, parameter write) in one pass instead of 5-10 elementwise kernels.
// Formulas follow torch.optim.SGD / Adam / AdamW / RMSprop (single-tensor implementations).
// _f16 variants: float16 params and grads, float32 states, all math in float32; only the
// parameter write is rounded to float16. A state pointer may be null when its feature is off.
#include "wg_common.h"

// SGD with momentum, dampening, Nesterov and L2 weight decay:
//   g += wd * p; buf = first_step ? g : momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf; p -= lr * g
template <typename P>
__device__ void sgd_step(P* param, const P* grad, float* momentum_buffer, long long n, float lr, float momentum,
                         float dampening, float weight_decay, int nesterov, int maximize, int first_step) {
    GRID_STRIDE_LOOP(i, n) {
        float p = load(param, i), g = load(grad, i);
        if (maximize) g = -g;
        if (weight_decay != 0.0f) g += weight_decay * p;
        if (momentum != 0.0f) {
            float buf = first_step ? g : momentum * momentum_buffer[i] + (1.0f - dampening) * g;
            momentum_buffer[i] = buf;
            g = nesterov ? g + momentum * buf : buf;
        }
        store(param, i, p - lr * g);
    }
}

// Adam (decoupled_weight_decay = 0) and AdamW (= 1); `step` counts from 1 and already includes
// this step. Bias corrections are computed in double, as torch does on the host.
//   m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g^2; vmax = max(vmax, v) if amsgrad
//   p -= lr / (1 - beta1^t) * m / (sqrt(v or vmax) / sqrt(1 - beta2^t) + eps)
template <typename P>
__device__ void adam_step(P* param, const P* grad, float* exp_avg, float* exp_avg_sq, float* max_exp_avg_sq, long long n,
                          float lr, float beta1, float beta2, float eps, float weight_decay, long long step, int amsgrad,
                          int decoupled_weight_decay, int maximize) {
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)step)));
    float bias_correction2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    GRID_STRIDE_LOOP(i, n) {
        float p = load(param, i), g = load(grad, i);
        if (maximize) g = -g;
        if (weight_decay != 0.0f) {
            if (decoupled_weight_decay) p *= 1.0f - lr * weight_decay;
            else g += weight_decay * p;
        }
        float m = exp_avg[i] + (1.0f - beta1) * (g - exp_avg[i]);
        float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        if (amsgrad) {
            v = fmaxf(max_exp_avg_sq[i], v);
            max_exp_avg_sq[i] = v;
        }
        float denom = sqrtf(v) / bias_correction2_sqrt + eps;
        store(param, i, p - step_size * (m / denom));
    }
}

// RMSprop: sq = alpha * sq + (1 - alpha) * g^2; centered: ga = lerp(ga, g, 1 - alpha), sq - ga^2 under the root;
//   avg = sqrt(.) + eps; momentum > 0: buf = momentum * buf + g / avg, p -= lr * buf; else p -= lr * g / avg
template <typename P>
__device__ void rmsprop_step(P* param, const P* grad, float* square_avg, float* grad_avg, float* momentum_buffer,
                             long long n, float lr, float alpha, float eps, float weight_decay, float momentum, int centered,
                             int maximize) {
    GRID_STRIDE_LOOP(i, n) {
        float p = load(param, i), g = load(grad, i);
        if (maximize) g = -g;
        if (weight_decay != 0.0f) g += weight_decay * p;
        float sq = alpha * square_avg[i] + (1.0f - alpha) * g * g;
        square_avg[i] = sq;
        if (centered) {
            float ga = grad_avg[i] + (1.0f - alpha) * (g - grad_avg[i]);
            grad_avg[i] = ga;
            sq -= ga * ga;
        }
        float avg = sqrtf(sq) + eps;
        if (momentum > 0.0f) {
            float buf = momentum * momentum_buffer[i] + g / avg;
            momentum_buffer[i] = buf;
            store(param, i, p - lr * buf);
        } else {
            store(param, i, p - lr * (g / avg));
        }
    }
}

extern "C" __global__ void sgd_step_f32(float* param, const float* grad, float* momentum_buffer, long long n, float lr,
                                        float momentum, float dampening, float weight_decay, int nesterov, int maximize,
                                        int first_step) {
    sgd_step(param, grad, momentum_buffer, n, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step);
}
extern "C" __global__ void sgd_step_f16(wg_half* param, const wg_half* grad, float* momentum_buffer, long long n, float lr,
                                        float momentum, float dampening, float weight_decay, int nesterov, int maximize,
                                        int first_step) {
    sgd_step(param, grad, momentum_buffer, n, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step);
}

extern "C" __global__ void adam_step_f32(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                         float* max_exp_avg_sq, long long n, float lr, float beta1, float beta2, float eps,
                                         float weight_decay, long long step, int amsgrad, int decoupled_weight_decay,
                                         int maximize) {
    adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, step, amsgrad,
              decoupled_weight_decay, maximize);
}
extern "C" __global__ void adam_step_f16(wg_half* param, const wg_half* grad, float* exp_avg, float* exp_avg_sq,
                                         float* max_exp_avg_sq, long long n, float lr, float beta1, float beta2, float eps,
                                         float weight_decay, long long step, int amsgrad, int decoupled_weight_decay,
                                         int maximize) {
    adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, step, amsgrad,
              decoupled_weight_decay, maximize);
}

extern "C" __global__ void rmsprop_step_f32(float* param, const float* grad, float* square_avg, float* grad_avg,
                                            float* momentum_buffer, long long n, float lr, float alpha, float eps,
                                            float weight_decay, float momentum, int centered, int maximize) {
    rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, n, lr, alpha, eps, weight_decay, momentum,
                 centered, maximize);
}
extern "C" __global__ void rmsprop_step_f16(wg_half* param, const wg_half* grad, float* square_avg, float* grad_avg,
                                            float* momentum_buffer, long long n, float lr, float alpha, float eps,
                                            float weight_decay, float momentum, int centered, int maximize) {
    rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, n, lr, alpha, eps, weight_decay, momentum,
                 centered, maximize);
}
