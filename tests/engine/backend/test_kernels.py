"""The CUDA kernels, verified without a GPU: each .cu compiles with NVRTC for sm_80/sm_90, and each
entry point runs in the CPU emulator on random inputs against a NumPy (or torch) reference.

Launches use a small grid (3 x 32 threads) on inputs larger than that, so every grid-stride loop
wraps around; sizes are odd so nothing divides the block size.
"""

from __future__ import annotations

import math
import zlib

import kernel_references as ref
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.backend import nvrtc
from engine.backend.kernel_emulator import kernel_module

GRID, BLOCK = (3,), (32,)
F16_TOL = {"rtol": 2e-3, "atol": 2e-3}
F32_TOL = {"rtol": 1e-5, "atol": 1e-6}
DTYPES = {"f32": np.float32, "f16": np.float16}

ACTIVATION_KERNELS = [
    f"{op}_{direction}_{dt}"
    for op in ref.ACTIVATIONS
    for direction in ("forward", "backward")
    for dt in DTYPES
]
SOFTMAX_KERNELS = [
    f"{op}_{direction}_{dt}"
    for op in ("softmax", "log_softmax")
    for direction in ("forward", "backward")
    for dt in DTYPES
]
CROSS_ENTROPY_KERNELS = [
    f"cross_entropy_{direction}_{dt}" for direction in ("forward", "backward") for dt in DTYPES
]
DROPOUT_KERNELS = [
    "dropout_forward_f32",
    "dropout_forward_f16",
    "dropout_backward_f32",
    "dropout_backward_f16",
    "philox4x32_10_blocks",
]
IM2COL_KERNELS = [  # "kn_": the channel-major column layout
    f"{op}_{layout}{dt}" for op in ("im2col", "col2im") for layout in ("", "kn_") for dt in DTYPES
]
POOL_KERNELS = [
    f"{op}_pool2d_{direction}_{dt}"
    for op in ("max", "avg")
    for direction in ("forward", "backward")
    for dt in DTYPES
]
NORM_KERNELS = [
    "batch_norm_backward_reduce_f32",
    "batch_norm_backward_elemt_f32",
    "layer_norm_forward_f32",
    "layer_norm_backward_f32",
    "layer_norm_backward_params_f32",
]
OPTIM_KERNELS = [f"{opt}_step_{dt}" for opt in ("sgd", "adam", "rmsprop") for dt in DTYPES]

# Which test file exercises which entry points; test_every_kernel_is_verified checks this against the sources.
VERIFIED = {
    "activations.cu": ACTIVATION_KERNELS,
    "softmax.cu": SOFTMAX_KERNELS + CROSS_ENTROPY_KERNELS,
    "dropout.cu": DROPOUT_KERNELS,
    "im2col.cu": IM2COL_KERNELS,
    "pool.cu": POOL_KERNELS,
    "norm.cu": NORM_KERNELS,
    "optim.cu": OPTIM_KERNELS,
}


# Kernels that reduce a row (or a channel) in a block: launched with 3 warps per block, so their
# cross-warp step (shared memory between warps) runs as well as the in-warp shuffles.
ROW_BLOCK = (96,)
ROW_KERNELS = tuple(SOFTMAX_KERNELS + CROSS_ENTROPY_KERNELS) + (
    "batch_norm_backward_reduce_f32", "layer_norm_forward_f32", "layer_norm_backward_f32")


def launch(file: str, kernel: str, *args) -> None:
    """Threads run in a shuffled order (seeded by the kernel's name), so a kernel whose threads depend on
    each other's writes fails its value checks instead of passing by the emulator's sequential luck."""
    assert kernel in VERIFIED[file], f"{kernel} is launched but not listed in VERIFIED[{file!r}]"
    kernel_module(file).launch(kernel, grid=GRID, block=ROW_BLOCK if kernel in ROW_KERNELS else BLOCK,
                               args=args, thread_order=zlib.crc32(kernel.encode()) | 1)


def rand(rng: np.random.Generator, *shape, dtype=np.float32, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ------------------------------------------------------------------------------------------ compilation


@pytest.mark.parametrize("arch", nvrtc.CI_ARCHES)
@pytest.mark.parametrize("filename", [path.name for path in nvrtc.kernel_files()])
def test_kernel_source_compiles_with_nvrtc_to_cubin_and_ptx(filename, arch):
    cubin = nvrtc.compile_kernel_file(filename, arch=arch, target="cubin")
    assert cubin[:4] == b"\x7fELF"
    ptx = nvrtc.compile_kernel_file(filename, arch=arch, target="ptx").decode()
    assert f".target {arch}" in ptx
    for name in nvrtc.entry_points(filename):
        assert f".entry {name}(" in ptx, f"{name} missing from the PTX of {filename}"


def test_broken_source_raises_an_error_naming_the_file_and_the_line():
    broken = 'extern "C" __global__ void oops(float* y, long n) { y[0] = undeclared_thing; }'
    with pytest.raises(nvrtc.NvrtcError) as error:
        nvrtc.compile_source(broken, "broken.cu", arch="sm_80")
    message = str(error.value)
    assert "broken.cu" in message and "undeclared_thing" in message and "undefined" in message
    assert error.value.filename == "broken.cu"


def test_every_kernel_is_verified():
    assert {file: sorted(names) for file, names in nvrtc.all_entry_points().items()} == {
        file: sorted(names) for file, names in VERIFIED.items()
    }


def test_no_kernel_takes_a_long_whose_width_depends_on_the_platform():
    # the launchers pass int64 scalars; `long` is 32 bits on Windows, where those would be misread
    for path in nvrtc.kernel_files():
        for entry in nvrtc.parse_entry_points(path.read_text()):
            assert not [p.name for p in entry.params if p.base_type == "long"], (path.name, entry.name)


def test_entry_point_parser_reads_types_and_names():
    (entry,) = nvrtc.parse_entry_points(
        '// extern "C" __global__ void commented_out(int n)\n'
        'extern "C" __global__ void k(const wg_half* __restrict__ x, unsigned long long seed, long* out) {}'
    )
    assert entry.name == "k"
    assert [(p.type, p.name) for p in entry.params] == [
        ("const wg_half*", "x"),
        ("unsigned long long", "seed"),
        ("long*", "out"),
    ]


# ------------------------------------------------------------------------------------------ activations


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ref.ACTIVATIONS)
def test_activation_forward_and_backward_match_numpy(op, dt):
    rng = np.random.default_rng(0)
    n = 1001
    dtype = DTYPES[dt]
    x, dy = rand(rng, n, dtype=dtype, scale=3.0), rand(rng, n, dtype=dtype)
    x[:5] = [0.0, -0.0, 1e-4, -1e-4, 8.0]
    slope = (ref.LEAKY_SLOPE,) if op == "leaky_relu" else ()
    forward, backward = ref.ACTIVATIONS[op]
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)

    y = np.empty_like(x)
    launch("activations.cu", f"{op}_forward_{dt}", x, y, n, *slope)
    tol = F16_TOL if dt == "f16" else F32_TOL
    np.testing.assert_allclose(y.astype(np.float64), forward(x64), **tol)

    dx = np.empty_like(x)
    saved = y if op in ("relu", "sigmoid", "tanh") else x
    launch("activations.cu", f"{op}_backward_{dt}", dy, saved, dx, n, *slope)
    expected = backward(dy64, x64, y.astype(np.float64))
    np.testing.assert_allclose(
        dx.astype(np.float64), expected, **(F16_TOL if dt == "f16" else {"rtol": 1e-5, "atol": 1e-5})
    )


@pytest.mark.parametrize("dt", DTYPES)
def test_relu_passes_nan_and_negative_zero_through_like_torch(dt):
    dtype = DTYPES[dt]
    x = np.array([np.nan, -np.inf, -2.0, -0.0, 0.0, 1e-4, 3.0, np.inf], dtype)
    dy = np.full(x.shape, 1.5, dtype)
    y, dx = np.empty_like(x), np.empty_like(x)
    launch("activations.cu", f"relu_forward_{dt}", x, y, x.size)
    launch("activations.cu", f"relu_backward_{dt}", dy, y, dx, x.size)
    tx = torch.tensor(x.astype(np.float32), requires_grad=True)
    ty = torch.relu(tx)
    ty.backward(torch.from_numpy(dy.astype(np.float32)))
    np.testing.assert_array_equal(y.astype(np.float32), ty.detach().numpy())
    np.testing.assert_array_equal(np.signbit(y), np.signbit(ty.detach().numpy()))  # relu(-0.0) is -0.0
    np.testing.assert_array_equal(dx.astype(np.float32), tx.grad.numpy())  # 1.5 at the NaN


def test_gelu_matches_torch_both_approximations():
    x = rand(np.random.default_rng(1), 257, scale=3.0)
    for kernel, approximate in (("gelu_forward_f32", "none"), ("gelu_tanh_forward_f32", "tanh")):
        y = np.empty_like(x)
        launch("activations.cu", kernel, x, y, x.size)
        np.testing.assert_allclose(
            y, F.gelu(torch.from_numpy(x), approximate=approximate).numpy(), rtol=1e-5, atol=1e-6
        )


# ------------------------------------------------------------------------------------------ softmax family


@pytest.mark.parametrize("shape", [(131, 17), (5, 203)])  # more rows than blocks; a row longer than a block
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_forward_and_backward_match_numpy_per_row(op, dt, shape):
    rng = np.random.default_rng(2)
    rows, cols = shape
    dtype = DTYPES[dt]
    x, dy = rand(rng, rows, cols, dtype=dtype, scale=4.0), rand(rng, rows, cols, dtype=dtype)
    x[0] += 1000.0 if dt == "f32" else 100.0  # a huge row: max subtraction keeps it finite
    forward, backward = (
        (ref.softmax, ref.softmax_backward)
        if op == "softmax"
        else (ref.log_softmax, ref.log_softmax_backward)
    )
    tol = F16_TOL if dt == "f16" else {"rtol": 1e-5, "atol": 1e-5}

    y = np.empty_like(x)
    launch("softmax.cu", f"{op}_forward_{dt}", x, y, rows, cols)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y.astype(np.float64), forward(x.astype(np.float64)), **tol)

    dx = np.empty_like(x)
    launch("softmax.cu", f"{op}_backward_{dt}", dy, y, dx, rows, cols)
    np.testing.assert_allclose(
        dx.astype(np.float64), backward(dy.astype(np.float64), y.astype(np.float64)), **tol
    )


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.15])
@pytest.mark.parametrize("classes", [7, 150])  # fewer classes than a warp; more than a block
def test_cross_entropy_matches_torch_with_ignore_index_and_label_smoothing(label_smoothing, dt, classes):
    rng = np.random.default_rng(3)
    rows, ignore_index = 133, -100
    logits = rand(rng, rows, classes, dtype=DTYPES[dt], scale=3.0)
    targets = rng.integers(0, classes, rows).astype(np.int64)
    targets[::9] = ignore_index
    n_valid = int((targets != ignore_index).sum())

    loss = np.empty(rows, np.float32)
    launch(
        "softmax.cu",
        f"cross_entropy_forward_{dt}",
        logits,
        targets,
        loss,
        rows,
        classes,
        ignore_index,
        label_smoothing,
    )
    t_logits = torch.from_numpy(logits.astype(np.float32)).requires_grad_()
    t_targets = torch.from_numpy(targets)
    per_row = F.cross_entropy(
        t_logits, t_targets, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none"
    )
    np.testing.assert_allclose(loss, per_row.detach().numpy(), rtol=1e-5, atol=1e-5)
    mean = F.cross_entropy(t_logits, t_targets, ignore_index=ignore_index, label_smoothing=label_smoothing)
    np.testing.assert_allclose(loss.sum() / n_valid, mean.item(), rtol=1e-5)

    mean.backward()
    grad_loss = np.full(rows, 1.0 / n_valid, np.float32)
    grad_logits = np.empty_like(logits)
    launch(
        "softmax.cu",
        f"cross_entropy_backward_{dt}",
        logits,
        targets,
        grad_loss,
        grad_logits,
        rows,
        classes,
        ignore_index,
        label_smoothing,
    )
    tol = {"rtol": 1e-2, "atol": 1e-5} if dt == "f16" else {"rtol": 1e-5, "atol": 1e-7}
    np.testing.assert_allclose(grad_logits.astype(np.float32), t_logits.grad.numpy(), **tol)
    assert (grad_logits[targets == ignore_index] == 0).all()


def test_cross_entropy_out_of_range_target_gives_nan_not_a_wild_read():
    logits, targets = np.zeros((2, 3), np.float32), np.array([1, 3], np.int64)
    loss = np.empty(2, np.float32)
    launch("softmax.cu", "cross_entropy_forward_f32", logits, targets, loss, 2, 3, -100, 0.0)
    assert loss[0] == pytest.approx(math.log(3)) and np.isnan(loss[1])


# ------------------------------------------------------------------------------------------ dropout


def test_philox_matches_published_known_answers():
    counters = np.array(
        [[0, 0, 0, 0], [0xFFFFFFFF] * 4, [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]], np.uint32
    )
    keys = np.array([[0, 0], [0xFFFFFFFF, 0xFFFFFFFF], [0xA4093822, 0x299F31D0]], np.uint32)
    expected = np.array(
        [
            [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8],
            [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD],
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
        ],
        np.uint32,
    )
    out = np.zeros((3, 4), np.uint32)
    launch("dropout.cu", "philox4x32_10_blocks", counters, keys, out, 3)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ref.philox4x32_10(counters, keys), expected)


def run_dropout(x, p, seed, offset, dt="f32"):
    y, mask = np.empty_like(x), np.empty(x.size, np.uint8)
    launch("dropout.cu", f"dropout_forward_{dt}", x, y, mask, x.size, p, seed, offset)
    return y, mask


@pytest.mark.parametrize("dt", DTYPES)
def test_dropout_mask_depends_only_on_seed_offset_and_index(dt):
    x = rand(np.random.default_rng(4), 5003, dtype=DTYPES[dt])
    p, seed = 0.3, 0x1234_5678_9ABC
    y, mask = run_dropout(x, p, seed, offset=7, dt=dt)
    np.testing.assert_array_equal(mask, ref.dropout_mask(x.size, p, seed, 7))
    np.testing.assert_allclose(
        y.astype(np.float32),
        np.where(mask, x.astype(np.float32) / (1 - p), 0.0),
        **(F16_TOL if dt == "f16" else F32_TOL),
    )
    # Same (seed, offset) => same mask, even with another launch shape; another seed or offset => another.
    again = np.empty(x.size, np.uint8)
    kernel_module("dropout.cu").launch(
        f"dropout_forward_{dt}", grid=(5,), block=(7,), args=(x, np.empty_like(x), again, x.size, p, seed, 7)
    )
    np.testing.assert_array_equal(again, mask)
    assert (run_dropout(x, p, seed + 1, 7, dt)[1] != mask).mean() > 0.2
    assert (run_dropout(x, p, seed, 8, dt)[1] != mask).mean() > 0.2


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate_is_within_five_sigma(p):
    n = 20011
    _, mask = run_dropout(np.ones(n, np.float32), p, seed=int(p * 1000) + 17, offset=0)
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(mask.sum() - n * (1 - p)) < 5 * sigma


def test_dropout_with_p_one_drops_everything_and_p_zero_keeps_everything():
    x = np.arange(1, 301, dtype=np.float32)
    y, mask = run_dropout(x, 1.0, 5, 0)
    assert not mask.any() and (y == 0).all()
    y, mask = run_dropout(x, 0.0, 5, 0)
    assert mask.all() and (y == x).all()


@pytest.mark.parametrize("dt", DTYPES)
def test_dropout_backward_uses_the_forward_mask(dt):
    rng = np.random.default_rng(5)
    x, dy = rand(rng, 1001, dtype=DTYPES[dt]), rand(rng, 1001, dtype=DTYPES[dt])
    p = 0.4
    _, mask = run_dropout(x, p, 99, 3, dt)
    dx = np.empty_like(dy)
    launch("dropout.cu", f"dropout_backward_{dt}", dy, mask, dx, dy.size, p)
    np.testing.assert_allclose(
        dx.astype(np.float32),
        np.where(mask, dy.astype(np.float32) / (1 - p), 0.0),
        **(F16_TOL if dt == "f16" else F32_TOL),
    )
    assert ((dx == 0) | mask.astype(bool)).all()


# ------------------------------------------------------------------------------------------ im2col / col2im

CONV_CASES = [  # (N, C, H, W), kernel, stride, padding, dilation
    ((2, 3, 9, 11), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 2, 10, 7), (3, 2), (2, 1), (1, 0), (1, 2)),
    ((3, 1, 8, 9), (2, 3), (3, 2), (2, 1), (2, 1)),
]


def conv_geometry(shape, kernel, stride, padding, dilation):
    OH, OW = (
        ref.conv_output_size(shape[2 + a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1)
    )
    return (*shape, *kernel, *stride, *padding, *dilation, OH, OW), (OH, OW)


# The column layouts of im2col.cu, as views of F.unfold's (N, C*KH*KW, OH*OW): "" is that layout, "kn_"
# (channel-major) has the first two axes swapped. Each maps the kernel's columns back to unfold's layout.
COLUMN_LAYOUTS = {"": lambda cols: cols, "kn_": lambda cols: cols.swapaxes(0, 1)}


@pytest.mark.parametrize("layout", COLUMN_LAYOUTS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_im2col_and_col2im_match_numpy_and_torch_unfold_fold(case, dt, layout):
    shape, kernel, stride, padding, dilation = case
    geometry, (OH, OW) = conv_geometry(*case)
    rng = np.random.default_rng(6)
    x = rand(rng, *shape, dtype=DTYPES[dt])
    tol = F16_TOL if dt == "f16" else F32_TOL
    as_unfold = COLUMN_LAYOUTS[layout]

    n, rows = shape[0], shape[1] * kernel[0] * kernel[1]
    cols = np.empty((rows, n, OH * OW) if layout == "kn_" else (n, rows, OH * OW), x.dtype)
    launch("im2col.cu", f"im2col_{layout}{dt}", x, cols, *geometry)
    np.testing.assert_array_equal(as_unfold(cols), ref.im2col(x, kernel, stride, padding, dilation))
    unfolded = F.unfold(torch.from_numpy(x.astype(np.float32)), kernel, dilation, padding, stride).numpy()
    np.testing.assert_array_equal(as_unfold(cols).astype(np.float32), unfolded)

    gcols = rand(rng, *cols.shape, dtype=DTYPES[dt])
    image = np.empty_like(x)
    launch("im2col.cu", f"col2im_{layout}{dt}", gcols, image, *geometry)
    np.testing.assert_allclose(
        image.astype(np.float64),
        ref.col2im(as_unfold(gcols).astype(np.float64), shape, kernel, stride, padding, dilation),
        **tol,
    )
    folded = F.fold(
        torch.from_numpy(np.ascontiguousarray(as_unfold(gcols), np.float32)), shape[2:], kernel, dilation,
        padding, stride,
    ).numpy()
    np.testing.assert_allclose(image.astype(np.float32), folded, **tol)


# ------------------------------------------------------------------------------------------ pooling

POOL_CASES = [  # (N, C, H, W), kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 9, 11), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((1, 4, 10, 7), (2, 3), (1, 2), (1, 1), (2, 1), True),
    ((3, 2, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_forward_and_backward_match_numpy_and_torch(case, dt):
    shape, kernel, stride, padding, dilation, ceil_mode = case
    rng = np.random.default_rng(7)
    x = rand(rng, *shape, dtype=DTYPES[dt])
    tol = F16_TOL if dt == "f16" else F32_TOL
    tx = torch.from_numpy(x).requires_grad_()  # float16 stays float16: torch's CPU pools it natively
    ty, tidx = F.max_pool2d(tx, kernel, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)
    OH, OW = ty.shape[2:]
    geometry = (*shape, *kernel, *stride, *padding, *dilation, OH, OW)

    y, argmax = np.empty(ty.shape, x.dtype), np.empty(ty.shape, np.int64)
    launch("pool.cu", f"max_pool2d_forward_{dt}", x, y, argmax, *geometry)
    ry, rargmax = ref.max_pool2d(x, kernel, stride, padding, dilation, (OH, OW))
    np.testing.assert_array_equal(y, ry)  # a maximum is one of the inputs: exact in either dtype
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(argmax, rargmax)
    np.testing.assert_array_equal(argmax, tidx.numpy())

    dy = rand(rng, *y.shape, dtype=x.dtype)
    dx = np.empty_like(x)
    launch("pool.cu", f"max_pool2d_backward_{dt}", dy, argmax, dx, *geometry)
    np.testing.assert_allclose(
        dx.astype(np.float64), ref.max_pool2d_backward(dy.astype(np.float64), argmax, shape), **tol
    )
    ty.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx.astype(np.float32), tx.grad.numpy().astype(np.float32), **tol)


@pytest.mark.parametrize("dt", DTYPES)
def test_max_pool2d_nan_wins_its_windows_with_torchs_indices(dt):
    x = rand(np.random.default_rng(11), 1, 2, 6, 7, dtype=DTYPES[dt])
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = x[0, 1, 5, 6] = np.nan  # two NaNs in some windows: the last one wins
    ty, tidx = F.max_pool2d(torch.from_numpy(x), 3, 2, 1, return_indices=True)
    y, argmax = np.empty(ty.shape, x.dtype), np.empty(ty.shape, np.int64)
    launch("pool.cu", f"max_pool2d_forward_{dt}", x, y, argmax, 1, 2, 6, 7, 3, 3, 2, 2, 1, 1, 1, 1,
           *ty.shape[2:])
    assert np.isnan(y).sum() == 5
    np.testing.assert_array_equal(y, ty.numpy())  # NaN positions equal too
    np.testing.assert_array_equal(argmax, tidx.numpy())


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("case", POOL_CASES)
def test_avg_pool2d_forward_and_backward_match_numpy_and_torch(case, count_include_pad, dt):
    shape, kernel, stride, padding, _, ceil_mode = case
    rng = np.random.default_rng(8)
    x = rand(rng, *shape, dtype=DTYPES[dt])
    tol = F16_TOL if dt == "f16" else F32_TOL
    tx = torch.from_numpy(x).requires_grad_()
    ty = F.avg_pool2d(tx, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    OH, OW = ty.shape[2:]
    geometry = (*shape, *kernel, *stride, *padding, OH, OW, int(count_include_pad), 0)

    y = np.empty(ty.shape, x.dtype)
    launch("pool.cu", f"avg_pool2d_forward_{dt}", x, y, *geometry)
    np.testing.assert_allclose(
        y.astype(np.float64),
        ref.avg_pool2d(x.astype(np.float64), kernel, stride, padding, (OH, OW), count_include_pad),
        **tol,
    )
    np.testing.assert_allclose(y.astype(np.float32), ty.detach().numpy().astype(np.float32), **tol)

    dy = rand(rng, *y.shape, dtype=x.dtype)
    dx = np.empty_like(x)
    launch("pool.cu", f"avg_pool2d_backward_{dt}", dy, dx, *geometry)
    np.testing.assert_allclose(
        dx.astype(np.float64),
        ref.avg_pool2d_backward(dy.astype(np.float64), shape, kernel, stride, padding, count_include_pad),
        **tol,
    )
    ty.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx.astype(np.float32), tx.grad.numpy().astype(np.float32), **tol)


@pytest.mark.parametrize("dt", DTYPES)
def test_avg_pool2d_divisor_override_replaces_the_window_size(dt):
    x = rand(np.random.default_rng(9), 1, 2, 7, 7, dtype=DTYPES[dt])
    tx = torch.from_numpy(x).requires_grad_()
    ty = F.avg_pool2d(tx, 3, 2, 1, divisor_override=5)
    geometry = (1, 2, 7, 7, 3, 3, 2, 2, 1, 1, *ty.shape[2:], 1, 5)
    tol = F16_TOL if dt == "f16" else F32_TOL
    y = np.empty(ty.shape, x.dtype)
    launch("pool.cu", f"avg_pool2d_forward_{dt}", x, y, *geometry)
    np.testing.assert_allclose(y.astype(np.float32), ty.detach().numpy().astype(np.float32), **tol)
    dy = np.ones_like(y)
    dx = np.empty_like(x)
    launch("pool.cu", f"avg_pool2d_backward_{dt}", dy, dx, *geometry)
    ty.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx.astype(np.float32), tx.grad.numpy().astype(np.float32), **tol)


# ------------------------------------------------------------------------------------------ normalisation


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_backward_matches_numpy_and_torch(affine):
    rng = np.random.default_rng(10)
    N, C, H, W, eps = 4, 101, 3, 5, 1e-5  # 101 channels > 96 threads
    x, dy = rand(rng, N, C, H, W, scale=2.0) + 0.5, rand(rng, N, C, H, W)
    weight = rand(rng, C) if affine else np.ones(C, np.float32)
    x3, dy3 = x.reshape(N, C, H * W), dy.reshape(N, C, H * W)
    rdx, rgw, rgb, mean, invstd = ref.batch_norm_backward(
        dy3.astype(np.float64), x3.astype(np.float64), weight.astype(np.float64), eps
    )
    mean, invstd = mean.astype(np.float32), invstd.astype(np.float32)

    gw, gb = np.empty(C, np.float32), np.empty(C, np.float32)
    launch("norm.cu", "batch_norm_backward_reduce_f32", dy, x, mean, invstd, gw, gb, N, C, H * W)
    np.testing.assert_allclose(gw, rgw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, rgb, rtol=1e-4, atol=1e-4)
    dx = np.empty_like(x)

    def backward_elemt(training: int) -> None:  # into dx; training=0: the statistics are constants
        launch("norm.cu", "batch_norm_backward_elemt_f32", dy, x, mean, invstd, weight if affine else None,
               gw, gb, dx, N, C, H * W, training)

    backward_elemt(1)
    np.testing.assert_allclose(dx.reshape(N, C, -1), rdx, rtol=1e-4, atol=1e-5)

    tx = torch.from_numpy(x).requires_grad_()
    tw = torch.from_numpy(weight).requires_grad_()
    tb = torch.zeros(C, requires_grad=True)
    F.batch_norm(tx, None, None, tw, tb, training=True, eps=eps).backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-4, atol=1e-4)

    # Eval mode: running statistics are constants, so dx = dy * weight * invstd.
    backward_elemt(0)
    np.testing.assert_allclose(dx, dy * (weight * invstd)[None, :, None, None], **F32_TOL)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(131, 19), (4, 211)])  # more rows than blocks; a row longer than a block
def test_layer_norm_forward_and_backward_match_numpy_and_torch(affine, shape):
    rng = np.random.default_rng(11)
    (rows, cols), eps = shape, 1e-5
    x, dy = rand(rng, rows, cols, scale=2.0) + 3.0, rand(rng, rows, cols)
    weight, bias = (rand(rng, cols), rand(rng, cols)) if affine else (None, None)
    w64 = weight.astype(np.float64) if affine else 1.0
    b64 = bias.astype(np.float64) if affine else 0.0

    y, mean, rstd = np.empty_like(x), np.empty(rows, np.float32), np.empty(rows, np.float32)
    launch("norm.cu", "layer_norm_forward_f32", x, weight, bias, y, mean, rstd, rows, cols, eps)
    ry, rmean, rrstd = ref.layer_norm(x.astype(np.float64), w64, b64, eps)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, rmean, rtol=1e-6)
    np.testing.assert_allclose(rstd, rrstd, rtol=1e-5)

    dx = np.empty_like(x)
    launch("norm.cu", "layer_norm_backward_f32", dy, x, mean, rstd, weight, dx, rows, cols)
    rdx, rgw, rgb = ref.layer_norm_backward(dy.astype(np.float64), x.astype(np.float64), w64, eps)
    np.testing.assert_allclose(dx, rdx, rtol=1e-4, atol=1e-5)
    gw, gb = np.empty(cols, np.float32), np.empty(cols, np.float32)
    launch("norm.cu", "layer_norm_backward_params_f32", dy, x, mean, rstd, gw, gb, rows, cols)
    np.testing.assert_allclose(gw, rgw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, rgb, rtol=1e-4, atol=1e-4)

    tx = torch.from_numpy(x).requires_grad_()
    tw = torch.from_numpy(weight).requires_grad_() if affine else None
    ty = F.layer_norm(tx, (cols,), tw, torch.from_numpy(bias) if affine else None, eps)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    ty.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    if affine:
        np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------ optimisers
# Each kernel steps the same parameters with the same gradients as torch.optim for a few steps.
# For _f16 the reference is torch in float32 with the parameter rounded to float16 after each step
# (what "float16 storage, float32 master math" means) and float16-representable gradients.

N_PARAMS, N_STEPS = 1003, 4

SGD_CONFIGS = [
    {"lr": 0.1},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    {"lr": 0.02, "momentum": 0.5, "maximize": True},
]
ADAM_CONFIGS = [  # (class, kwargs)
    ("Adam", {"lr": 1e-2}),
    ("Adam", {"lr": 1e-2, "betas": (0.8, 0.95), "weight_decay": 0.01, "amsgrad": True}),
    ("AdamW", {"lr": 1e-2, "weight_decay": 0.05}),
    ("AdamW", {"lr": 3e-3, "weight_decay": 0.1, "amsgrad": True, "maximize": True, "eps": 1e-6}),
]
RMSPROP_CONFIGS = [
    {"lr": 1e-2},
    {"lr": 1e-2, "alpha": 0.9, "centered": True, "momentum": 0.9, "weight_decay": 0.01},
    {"lr": 1e-2, "momentum": 0.5},
    {"lr": 5e-3, "centered": True, "maximize": True, "eps": 1e-6},
]


def optimiser_trajectories(torch_class, kwargs, dt):
    """Yields (step, param, grad, torch_param) for N_STEPS steps of torch_class on one parameter tensor."""
    rng = np.random.default_rng(12)
    dtype = DTYPES[dt]
    param = rand(rng, N_PARAMS, dtype=dtype)
    tparam = torch.tensor(param.astype(np.float32), requires_grad=True)
    optimiser = torch_class([tparam], **kwargs)
    for step in range(1, N_STEPS + 1):
        grad = rand(rng, N_PARAMS, dtype=dtype)
        tparam.grad = torch.from_numpy(grad.astype(np.float32))
        optimiser.step()
        if dt == "f16":
            with torch.no_grad():
                tparam.copy_(tparam.half().float())
        yield step, param, grad, tparam.detach().numpy()


def assert_param_close(param, expected, dt):
    tol = {"rtol": 1e-3, "atol": 1e-3} if dt == "f16" else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(param.astype(np.float32), expected, **tol)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("config", SGD_CONFIGS)
def test_sgd_step_matches_torch_optim_sgd(config, dt):
    momentum = config.get("momentum", 0.0)
    buffer = np.zeros(N_PARAMS, np.float32) if momentum else None
    for step, param, grad, expected in optimiser_trajectories(torch.optim.SGD, config, dt):
        launch(
            "optim.cu",
            f"sgd_step_{dt}",
            param,
            grad,
            buffer,
            N_PARAMS,
            config["lr"],
            momentum,
            config.get("dampening", 0.0),
            config.get("weight_decay", 0.0),
            int(config.get("nesterov", False)),
            int(config.get("maximize", False)),
            int(step == 1),
        )
        assert_param_close(param, expected, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("config", ADAM_CONFIGS, ids=lambda c: f"{c[0]}-{sorted(c[1])}")
def test_adam_step_matches_torch_optim_adam_and_adamw(config, dt):
    name, kwargs = config
    beta1, beta2 = kwargs.get("betas", (0.9, 0.999))
    exp_avg, exp_avg_sq = np.zeros(N_PARAMS, np.float32), np.zeros(N_PARAMS, np.float32)
    max_exp_avg_sq = np.zeros(N_PARAMS, np.float32) if kwargs.get("amsgrad") else None
    default_wd = 0.01 if name == "AdamW" else 0.0
    for step, param, grad, expected in optimiser_trajectories(getattr(torch.optim, name), kwargs, dt):
        launch(
            "optim.cu",
            f"adam_step_{dt}",
            param,
            grad,
            exp_avg,
            exp_avg_sq,
            max_exp_avg_sq,
            N_PARAMS,
            kwargs["lr"],
            beta1,
            beta2,
            kwargs.get("eps", 1e-8),
            kwargs.get("weight_decay", default_wd),
            step,
            int(kwargs.get("amsgrad", False)),
            int(name == "AdamW"),
            int(kwargs.get("maximize", False)),
        )
        assert_param_close(param, expected, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("config", RMSPROP_CONFIGS)
def test_rmsprop_step_matches_torch_optim_rmsprop(config, dt):
    square_avg = np.zeros(N_PARAMS, np.float32)
    grad_avg = np.zeros(N_PARAMS, np.float32) if config.get("centered") else None
    buffer = np.zeros(N_PARAMS, np.float32) if config.get("momentum") else None
    for _, param, grad, expected in optimiser_trajectories(torch.optim.RMSprop, config, dt):
        launch(
            "optim.cu",
            f"rmsprop_step_{dt}",
            param,
            grad,
            square_avg,
            grad_avg,
            buffer,
            N_PARAMS,
            config["lr"],
            config.get("alpha", 0.99),
            config.get("eps", 1e-8),
            config.get("weight_decay", 0.0),
            config.get("momentum", 0.0),
            int(config.get("centered", False)),
            int(config.get("maximize", False)),
        )
        assert_param_close(param, expected, dt)
