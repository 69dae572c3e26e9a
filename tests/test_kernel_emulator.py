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
    # tests/test_kernels.py (3 blocks of 32 threads over larger, odd sizes) see
    assert (y[32:96] == 0).all() and not np.array_equal(y, 2 * x)


def test_guards_keep_the_callers_arrays_and_copy_results_back(tmp_path):
    m = _module(tmp_path, GOOD, "copyback")
    x = np.arange(10, dtype=np.float32)
    y = np.full(10, -1, np.float32)
    m.launch("scale", (1,), (32,), (x, y, 10))
    np.testing.assert_array_equal(x, np.arange(10))  # const input untouched
    np.testing.assert_array_equal(y, 2 * x)
