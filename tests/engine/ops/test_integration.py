"""engine/ops/integration.py against torch: trapezoid's result dtype for integer input."""
import pytest
from torch_compare import same_outcome


# ----------------------------------------------------------------------------- trapezoid of integers
@pytest.mark.parametrize("build", [
    lambda lib: lib.trapz(lib.tensor([1, 2, 4])),
    lambda lib: lib.trapezoid(lib.tensor([1, 2, 4], dtype=lib.int16), lib.tensor([0, 1, 3], dtype=lib.int8)),
    lambda lib: lib.trapezoid(lib.tensor([1, 2, 4]), dx=2),
    lambda lib: lib.trapezoid(lib.tensor([], dtype=lib.int64)),
    lambda lib: lib.trapz(lib.tensor([], dtype=lib.int32), lib.tensor([], dtype=lib.float64)),
    lambda lib: lib.trapezoid(lib.zeros(2, 0, dtype=lib.uint8), dim=1),
    lambda lib: lib.trapezoid(lib.zeros(0, 3, dtype=lib.int32), dim=0),
    lambda lib: lib.trapezoid(lib.tensor([], dtype=lib.bool)),
    lambda lib: lib.trapezoid(lib.tensor([True, False])),
    lambda lib: lib.cumulative_trapezoid(lib.tensor([1, 2, 4], dtype=lib.int32)),
])
def test_trapezoid_result_dtype_for_integer_input_matches_torch(build):
    same_outcome(build)
