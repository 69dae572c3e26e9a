"""The kernel emulator catches the bugs a sequential CPU run would hide. Each test compiles a kernel that is
broken on purpose (the bug classes seen in review: an off-by-one loop bound, a missing bounds check, a read
past the end, threads that depend on each other's writes, a wrong thread index) and asserts the harness
fails it, beside the correct kernel that passes."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backend.kernel_emulator import GUARD, EmulatedModule, KernelMemoryError

GOOD = """
extern "C" __global__ void scale(const float* x, float* y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x)
        y[i] = 2.0f * x[i];
}
"""
MUTANTS = {
    "off-by-one bound": GOOD.replace("i < n;", "i <= n;"),
    "missing bounds check": """
extern "C" __global__ void scale(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    y[i] = 2.0f * x[i];
}
""",
    "write before the start": GOOD.replace("y[i] = 2.0f * x[i];", "y[i - 1] = 2.0f * x[i];"),
}
READS_PAST_END = GOOD.replace("y[i] = 2.0f * x[i];", "y[i] = 2.0f * x[i + 1];")
WRONG_INDEX = GOOD.replace("blockIdx.x * (long)blockDim.x + threadIdx.x", "threadIdx.x")  # forgot the block
ORDER_DEPENDENT = """
extern "C" __global__ void scale(const float* x, float* y, long n) {
    // each thread reads its neighbour's output: correct only if thread i+1 has not run yet
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x)
        y[i] = 2.0f * x[i] + (i + 1 < n ? y[i + 1] : 0.0f);
}
"""


def _module(tmp_path, source, name="k"):
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return EmulatedModule(path)


def _run(module, n=100, grid=3, block=32, order=0):
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    module.launch("scale", (grid,), (block,), (x, y, n), thread_order=order)
    return x, y


def test_the_correct_kernel_passes_in_any_thread_order(tmp_path):
    m = _module(tmp_path, GOOD)
    for order in (0, 1, 7, 12345):
        x, y = _run(m, order=order)
        np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("bug", MUTANTS)
def test_a_write_outside_a_buffer_fails_the_launch_naming_kernel_and_parameter(tmp_path, bug):
    m = _module(tmp_path, MUTANTS[bug], bug.replace(" ", "_").replace("-", "_"))
    with pytest.raises(KernelMemoryError, match=r"scale wrote \d+ element\(s\) .* of `y` \(50 elements\)"):
        _run(m, n=50)  # 96 threads over 50 elements: the unguarded kernel writes 46 past the end


def test_a_write_far_past_the_end_is_caught_as_far_as_the_guard_reaches(tmp_path):
    m = _module(tmp_path, MUTANTS["missing bounds check"], "far")
    with pytest.raises(KernelMemoryError, match="past the end"):
        _run(m, n=96 - GUARD // 2)


def test_a_read_past_the_end_brings_nan_into_the_result(tmp_path):
    x, y = _run(_module(tmp_path, READS_PAST_END, "read"), n=50)
    assert np.isnan(y[-1]) and not np.isnan(y[:-1]).any()


def test_a_kernel_that_depends_on_thread_order_gives_different_results_when_shuffled(tmp_path):
    m = _module(tmp_path, ORDER_DEPENDENT, "order")
    results = {tuple(_run(m, order=o)[1].tolist()) for o in (0, 3, 5, 11)}
    assert len(results) > 1


def test_a_wrong_thread_index_leaves_elements_unwritten_on_a_multi_block_grid(tmp_path):
    x, y = _run(_module(tmp_path, WRONG_INDEX, "index"), n=100)
    # every block does block 0's elements: 32..95 are never written, which the value checks of
    # tests/engine/backend/test_kernels.py (3 blocks of 32 threads over larger, odd sizes) see
    assert (y[32:96] == 0).all() and not np.array_equal(y, 2 * x)


def test_guards_keep_the_callers_arrays_and_copy_results_back(tmp_path):
    m = _module(tmp_path, GOOD, "copyback")
    x = np.arange(10, dtype=np.float32)
    y = np.full(10, -1, np.float32)
    m.launch("scale", (1,), (32,), (x, y, 10))
    np.testing.assert_array_equal(x, np.arange(10))  # const input untouched
    np.testing.assert_array_equal(y, 2 * x)


# ------------------------------------------------------------------ cooperating threads: shared memory,
# barriers and warp shuffles, as the block-reduction kernels (softmax, layer norm, batch norm) use them
BLOCK_SUM = """
extern "C" __global__ void block_sums(const float* x, float* out, long n) {
    __shared__ float buf[64];
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
"""
WARP_SUM = """
extern "C" __global__ void block_sums(const float* x, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""


def _block_sums(module, order=0, block=64):
    x = np.arange(1, 4 * block + 1, dtype=np.float32)
    out = np.zeros(4, np.float32)
    module.launch("block_sums", (4,), (block,), (x, out, x.size), thread_order=order)
    return out, x.reshape(4, block).sum(1)


@pytest.mark.parametrize("order", [0, 1, 99])
def test_shared_memory_and_syncthreads_make_a_block_reduction_in_any_thread_order(tmp_path, order):
    got, want = _block_sums(_module(tmp_path, BLOCK_SUM, "blocksum"), order)
    np.testing.assert_array_equal(got, want)


def test_a_reduction_missing_its_syncthreads_gives_wrong_sums(tmp_path):
    broken = BLOCK_SUM.replace("        __syncthreads();\n    }", "    }")  # no barrier between the steps
    m = _module(tmp_path, broken, "nosync")
    outs = [_block_sums(m, order)[0] for order in (1, 2, 3)]
    want = _block_sums(m)[1]
    assert any(not np.array_equal(o, want) for o in outs)


def test_a_barrier_that_some_threads_skip_is_reported_as_a_deadlock(tmp_path):
    from engine.backend.kernel_emulator import KernelSyncError

    at_start = "    __syncthreads();\n    for"
    broken = BLOCK_SUM.replace(at_start, "    if (threadIdx.x < 16) __syncthreads();\n    for")
    with pytest.raises(KernelSyncError, match=r"block_sums: deadlock in block \(\d, 0, 0\): threads wait at "
                                              r"different __syncthreads \(lines \d+ and \d+"):
        _block_sums(_module(tmp_path, broken, "divergent"))
    early_exit = BLOCK_SUM.replace(at_start, "    if (threadIdx.x >= 16) return;\n    for")
    got, want = _block_sums(_module(tmp_path, early_exit, "early"))  # finished threads do not block a barrier
    assert not np.array_equal(got, want)  # but the sums miss their values


@pytest.mark.parametrize("order", [0, 5])
def test_warp_shuffles_reduce_a_warp(tmp_path, order):
    got, want = _block_sums(_module(tmp_path, WARP_SUM, "warpsum"), order, block=32)
    np.testing.assert_array_equal(got, want)


def test_a_shuffle_with_the_wrong_lane_offset_gives_wrong_sums(tmp_path):
    broken = WARP_SUM.replace("offset >>= 1", "offset >>= 2")  # skips half the butterfly steps
    got, want = _block_sums(_module(tmp_path, broken, "badshuffle"), block=32)
    assert not np.array_equal(got, want)
