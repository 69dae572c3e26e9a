"""User-caused errors raise torch's exception types with messages that name the shapes involved."""
from __future__ import annotations

import functools

from torch_compare import both_raise

# the engine's messages must name the shapes exactly as written here
raises_in_both = functools.partial(both_raise, match_case=True)


def test_matmul_shape_mismatch_names_both_shapes():
    raises_in_both(lambda m: m.ones(2, 3) @ m.ones(4, 5), RuntimeError, "2x3", "4x5")
    raises_in_both(lambda m: m.ones(2, 3).mm(m.ones(2, 3)), RuntimeError, "2x3")
    raises_in_both(lambda m: m.ones(3) @ m.ones(4), RuntimeError, "3", "4")
    raises_in_both(lambda m: m.ones(2, 2, 3).bmm(m.ones(2, 4, 3)), RuntimeError)
    raises_in_both(lambda m: m.ones(2, 3, 4) @ m.ones(3, 4, 5), RuntimeError)


def test_broadcast_mismatch_names_the_sizes():
    raises_in_both(lambda m: m.ones(2, 3) + m.ones(4), RuntimeError, "(3)", "(4)")
    raises_in_both(lambda m: m.ones(2, 3) * m.ones(3, 3), RuntimeError, "(2)", "(3)")
    raises_in_both(lambda m: m.ones(2, 3).expand(4, 4), RuntimeError, "3", "4")
    raises_in_both(lambda m: m.where(m.ones(2, dtype=m.bool), m.ones(3), m.ones(2)), RuntimeError)


def test_bad_dims_raise_index_error_with_the_valid_range():
    raises_in_both(lambda m: m.ones(2, 3).sum(2), IndexError, "[-2, 1]", "2")
    raises_in_both(lambda m: m.ones(2, 3).transpose(0, 3), IndexError, "[-2, 1]")
    raises_in_both(lambda m: m.ones(2, 3).softmax(-3), IndexError, "[-2, 1]")
    raises_in_both(lambda m: m.ones(2, 3).unsqueeze(4), IndexError, "[-3, 2]")
    raises_in_both(lambda m: m.ones(2, 3).permute(0, 0), RuntimeError)
    raises_in_both(lambda m: m.ones(2, 3).permute(0), RuntimeError)


def test_bad_view_and_reshape_sizes_name_the_shape():
    raises_in_both(lambda m: m.ones(2, 3).view(4), RuntimeError, "[4]", "6")
    raises_in_both(lambda m: m.ones(2, 3).reshape(-1, 4), RuntimeError, "[-1, 4]", "6")
    raises_in_both(lambda m: m.ones(2, 3).view(-1, -1), RuntimeError, "one dimension")


def test_indexing_out_of_range_raises_index_error_naming_size():
    raises_in_both(lambda m: m.ones(2, 3)[2], IndexError, "2", "size 2")
    raises_in_both(lambda m: m.ones(2, 3)[:, 5], IndexError, "5", "size 3")
    raises_in_both(lambda m: m.ones(2, 3)[m.tensor([0, 4])], IndexError, "4")
    raises_in_both(lambda m: m.ones(2, 3)[0, 0, 0], IndexError, "too many indices")
    raises_in_both(lambda m: m.ones(2, 3)[m.ones(3, dtype=m.bool)], IndexError, "[3]")


def test_bad_dtypes_raise_runtime_errors():
    raises_in_both(lambda m: m.ones(2, dtype=m.int64).requires_grad_(), RuntimeError, "floating point")
    raises_in_both(lambda m: m.ones(2, 3).gather(1, m.ones(2, 1)), RuntimeError, "int64")
    raises_in_both(lambda m: m.ones(2).index_select(0, m.ones(1)), (RuntimeError, IndexError))
    raises_in_both(lambda m: m.ones(2, 3)[m.ones(2)], IndexError)
    raises_in_both(lambda m: m.ones(2, dtype=m.bool) - m.ones(2, dtype=m.bool), RuntimeError, "bool")


def test_cat_and_stack_mismatches_name_the_sizes():
    raises_in_both(lambda m: m.cat([m.ones(2, 3), m.ones(2, 4)], 0), RuntimeError, "3", "4")
    raises_in_both(lambda m: m.stack([m.ones(2, 3), m.ones(3, 2)]), RuntimeError, "[2, 3]", "[3, 2]")
    raises_in_both(lambda m: m.cat([]), (RuntimeError, ValueError))


def test_backward_shape_mismatch_names_both_shapes():
    raises_in_both(lambda m: (m.ones(2, 3, requires_grad=True) * 2).backward(m.ones(3, 2)), RuntimeError,
                   "[3, 2]", "[2, 3]")


def test_scalar_conversions_of_multi_element_tensors_raise():
    raises_in_both(lambda m: m.ones(2).item(), RuntimeError, "2 elements")
    raises_in_both(lambda m: bool(m.ones(2)), RuntimeError, "ambiguous")


def test_numpy_of_a_tensor_that_requires_grad_raises():
    raises_in_both(lambda m: m.ones(2, requires_grad=True).numpy(), RuntimeError, "detach")


def test_split_and_chunk_bad_arguments():
    raises_in_both(lambda m: m.ones(4).split([1, 2]), RuntimeError, "4")
    raises_in_both(lambda m: m.ones(4).chunk(0), RuntimeError)
    raises_in_both(lambda m: m.ones(4).narrow(0, 3, 2), (RuntimeError, IndexError))


def test_inf_and_nan_results_come_silently_like_torch_but_anomaly_warnings_still_show():
    """log(0), x / 0 and sqrt(-1) give torch's -inf, inf and nan without NumPy's RuntimeWarnings (the doctor
    reports NaN/Inf in training); detect_anomaly's own warning still shows. In a fresh interpreter: pytest
    undoes warning filters that a module installs while tests are being collected."""
    import subprocess
    import sys

    script = (
        "import engine\n"
        "x = engine.tensor([0.0, -1.0])\n"
        "print(x.log().tolist(), (x / 0).tolist(), x.sqrt().tolist())\n"
        "leaf = engine.tensor([0.0], requires_grad=True)\n"
        "with engine.autograd.detect_anomaly():\n"
        "    try:\n"
        "        (leaf.sqrt() * 0).sum().backward()\n"
        "    except RuntimeError as exc:\n"
        "        print('raised', exc)\n"
    )
    proc = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[-inf, nan] [nan, -inf] [0.0, nan]" in proc.stdout
    assert "encountered in" not in proc.stderr  # NumPy's floating-point warnings
    assert "Error detected in SqrtBackward0" in proc.stderr
    assert "raised Function 'SqrtBackward0'" in proc.stdout
