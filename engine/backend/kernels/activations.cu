// Elementwise activations, forward and backward side by side. Each forward is one pass over x;
// each backward fuses the local derivative with the multiply by the incoming gradient (dy * f'(.)),
// which would otherwise be two to five separate elementwise kernels.
// Backward takes what PyTorch saves: the output y for ReLU, sigmoid and tanh; the input x otherwise.
#include "wg_common.h"

#define WG_SQRT1_2 0.70710678118654752440f    // 1/sqrt(2)
#define WG_INV_SQRT_2PI 0.39894228040143267794f  // 1/sqrt(2*pi)
#define WG_SQRT_2_OVER_PI 0.79788456080286535588f
#define WG_GELU_TANH_COEF 0.044715f

template <typename T> __device__ void relu_forward(const T* x, T* y, long long n) {
    // written as torch does, so NaN and -0.0 pass through (v > 0 ? v : 0 would turn NaN into 0)
    GRID_STRIDE_LOOP(i, n) { float v = load(x, i); store(y, i, v < 0.0f ? 0.0f : v); }
}
template <typename T> __device__ void relu_backward(const T* dy, const T* y, T* dx, long long n) {
    // the gradient passes where y is NaN, as in torch's threshold backward
    GRID_STRIDE_LOOP(i, n) { store(dx, i, load(y, i) <= 0.0f ? 0.0f : load(dy, i)); }
}

template <typename T> __device__ void leaky_relu_forward(const T* x, T* y, long long n, float slope) {
    GRID_STRIDE_LOOP(i, n) { float v = load(x, i); store(y, i, v > 0.0f ? v : v * slope); }
}
template <typename T> __device__ void leaky_relu_backward(const T* dy, const T* x, T* dx, long long n, float slope) {
    GRID_STRIDE_LOOP(i, n) { float g = load(dy, i); store(dx, i, load(x, i) > 0.0f ? g : g * slope); }
}

// GELU, exact: x * Phi(x) with Phi the standard normal CDF.
template <typename T> __device__ void gelu_forward(const T* x, T* y, long long n) {
    GRID_STRIDE_LOOP(i, n) { float v = load(x, i); store(y, i, 0.5f * v * (1.0f + erff(v * WG_SQRT1_2))); }
}
template <typename T> __device__ void gelu_backward(const T* dy, const T* x, T* dx, long long n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = load(x, i);
        float cdf = 0.5f * (1.0f + erff(v * WG_SQRT1_2));
        float pdf = WG_INV_SQRT_2PI * expf(-0.5f * v * v);
        store(dx, i, load(dy, i) * (cdf + v * pdf));
    }
}

// GELU, approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename T> __device__ void gelu_tanh_forward(const T* x, T* y, long long n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = load(x, i);
        float t = tanhf(WG_SQRT_2_OVER_PI * (v + WG_GELU_TANH_COEF * v * v * v));
        store(y, i, 0.5f * v * (1.0f + t));
    }
}
template <typename T> __device__ void gelu_tanh_backward(const T* dy, const T* x, T* dx, long long n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = load(x, i);
        float t = tanhf(WG_SQRT_2_OVER_PI * (v + WG_GELU_TANH_COEF * v * v * v));
        float dinner = WG_SQRT_2_OVER_PI * (1.0f + 3.0f * WG_GELU_TANH_COEF * v * v);
        store(dx, i, load(dy, i) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner));
    }
}

// SiLU (swish): x * sigmoid(x).
template <typename T> __device__ void silu_forward(const T* x, T* y, long long n) {
    GRID_STRIDE_LOOP(i, n) { float v = load(x, i); store(y, i, v / (1.0f + expf(-v))); }
}
template <typename T> __device__ void silu_backward(const T* dy, const T* x, T* dx, long long n) {
    GRID_STRIDE_LOOP(i, n) {
        float v = load(x, i);
        float s = 1.0f / (1.0f + expf(-v));
        store(dx, i, load(dy, i) * s * (1.0f + v * (1.0f - s)));
    }
}

template <typename T> __device__ void sigmoid_forward(const T* x, T* y, long long n) {
    GRID_STRIDE_LOOP(i, n) { store(y, i, 1.0f / (1.0f + expf(-load(x, i)))); }
}
template <typename T> __device__ void sigmoid_backward(const T* dy, const T* y, T* dx, long long n) {
    GRID_STRIDE_LOOP(i, n) { float s = load(y, i); store(dx, i, load(dy, i) * s * (1.0f - s)); }
}

template <typename T> __device__ void tanh_forward(const T* x, T* y, long long n) {
    GRID_STRIDE_LOOP(i, n) { store(y, i, tanhf(load(x, i))); }
}
template <typename T> __device__ void tanh_backward(const T* dy, const T* y, T* dx, long long n) {
    GRID_STRIDE_LOOP(i, n) { float t = load(y, i); store(dx, i, load(dy, i) * (1.0f - t * t)); }
}

// Entry points: one per (op, direction, dtype). Written out, not macro-generated, so that a reader
// (and nvrtc.entry_points) sees every name.
extern "C" __global__ void relu_forward_f32(const float* x, float* y, long long n) { relu_forward(x, y, n); }
extern "C" __global__ void relu_forward_f16(const wg_half* x, wg_half* y, long long n) { relu_forward(x, y, n); }
extern "C" __global__ void relu_backward_f32(const float* dy, const float* y, float* dx, long long n) { relu_backward(dy, y, dx, n); }
extern "C" __global__ void relu_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long long n) { relu_backward(dy, y, dx, n); }

extern "C" __global__ void leaky_relu_forward_f32(const float* x, float* y, long long n, float slope) { leaky_relu_forward(x, y, n, slope); }
extern "C" __global__ void leaky_relu_forward_f16(const wg_half* x, wg_half* y, long long n, float slope) { leaky_relu_forward(x, y, n, slope); }
extern "C" __global__ void leaky_relu_backward_f32(const float* dy, const float* x, float* dx, long long n, float slope) { leaky_relu_backward(dy, x, dx, n, slope); }
extern "C" __global__ void leaky_relu_backward_f16(const wg_half* dy, const wg_half* x, wg_half* dx, long long n, float slope) { leaky_relu_backward(dy, x, dx, n, slope); }

extern "C" __global__ void gelu_forward_f32(const float* x, float* y, long long n) { gelu_forward(x, y, n); }
extern "C" __global__ void gelu_forward_f16(const wg_half* x, wg_half* y, long long n) { gelu_forward(x, y, n); }
extern "C" __global__ void gelu_backward_f32(const float* dy, const float* x, float* dx, long long n) { gelu_backward(dy, x, dx, n); }
extern "C" __global__ void gelu_backward_f16(const wg_half* dy, const wg_half* x, wg_half* dx, long long n) { gelu_backward(dy, x, dx, n); }

extern "C" __global__ void gelu_tanh_forward_f32(const float* x, float* y, long long n) { gelu_tanh_forward(x, y, n); }
extern "C" __global__ void gelu_tanh_forward_f16(const wg_half* x, wg_half* y, long long n) { gelu_tanh_forward(x, y, n); }
extern "C" __global__ void gelu_tanh_backward_f32(const float* dy, const float* x, float* dx, long long n) { gelu_tanh_backward(dy, x, dx, n); }
extern "C" __global__ void gelu_tanh_backward_f16(const wg_half* dy, const wg_half* x, wg_half* dx, long long n) { gelu_tanh_backward(dy, x, dx, n); }

extern "C" __global__ void silu_forward_f32(const float* x, float* y, long long n) { silu_forward(x, y, n); }
extern "C" __global__ void silu_forward_f16(const wg_half* x, wg_half* y, long long n) { silu_forward(x, y, n); }
extern "C" __global__ void silu_backward_f32(const float* dy, const float* x, float* dx, long long n) { silu_backward(dy, x, dx, n); }
extern "C" __global__ void silu_backward_f16(const wg_half* dy, const wg_half* x, wg_half* dx, long long n) { silu_backward(dy, x, dx, n); }

extern "C" __global__ void sigmoid_forward_f32(const float* x, float* y, long long n) { sigmoid_forward(x, y, n); }
extern "C" __global__ void sigmoid_forward_f16(const wg_half* x, wg_half* y, long long n) { sigmoid_forward(x, y, n); }
extern "C" __global__ void sigmoid_backward_f32(const float* dy, const float* y, float* dx, long long n) { sigmoid_backward(dy, y, dx, n); }
extern "C" __global__ void sigmoid_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long long n) { sigmoid_backward(dy, y, dx, n); }

extern "C" __global__ void tanh_forward_f32(const float* x, float* y, long long n) { tanh_forward(x, y, n); }
extern "C" __global__ void tanh_forward_f16(const wg_half* x, wg_half* y, long long n) { tanh_forward(x, y, n); }
extern "C" __global__ void tanh_backward_f32(const float* dy, const float* y, float* dx, long long n) { tanh_backward(dy, y, dx, n); }
extern "C" __global__ void tanh_backward_f16(const wg_half* dy, const wg_half* y, wg_half* dx, long long n) { tanh_backward(dy, y, dx, n); }
