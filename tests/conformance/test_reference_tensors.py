"""Tensor behaviours the study texts teach (creation, strides, views, broadcasting, indexing, in-place,
reprs), each run with torch and with the engine."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conformance_helpers import LIBS
from torch_compare import both, both_raise, same_repr

import engine

RNG = np.random.default_rng(0)
A34 = RNG.standard_normal((3, 4)).astype(np.float32)
B45 = RNG.standard_normal((4, 5)).astype(np.float32)
A234 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
A105 = RNG.standard_normal((10, 5)).astype(np.float32)


# ref 000 §2.2 "Tensor Creation": ranks, shapes and default dtypes of literals
def test_creation_from_python_data_has_expected_rank_and_dtype():
    def ex(T):
        return [
            T.tensor(5.0),
            T.tensor([1.0, 2.0, 3.0]),
            T.tensor([[1, 2], [3, 4]]),
            T.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]]),
            T.tensor([True, False]),
        ]

    obs = both(ex)
    assert [o["shape"] for o in obs] == [(), (3,), (2, 2), (2, 2, 2), (2,)]
    assert [o["dtype"] for o in obs] == ["float32", "float32", "int64", "int64", "bool"]


# ref 000 §2.2 "Factory functions"
def test_factory_functions_shapes_dtypes_and_values():
    def ex(T):
        return {
            "zeros": T.zeros(3, 4),
            "ones": T.ones(2, 3, 4),
            "eye": T.eye(4),
            "arange": T.arange(0, 10, 2),
            "linspace": T.linspace(0, 1, 100),
            "empty": T.empty(2, 3).shape,
            "empty_dtype": T.empty(2, 3).dtype,
            "rand": (T.rand(5, 5).shape, T.rand(5, 5).dtype),
            "randn": (T.randn(5, 5).shape, T.randn(5, 5).dtype),
        }

    obs = both(ex)
    np.testing.assert_array_equal(obs["arange"]["values"], [0, 2, 4, 6, 8])
    assert obs["arange"]["dtype"] == "int64"


@LIBS
def test_rand_is_uniform_in_zero_one(T):
    # ref 000 §2.2: rand -> "Uniform [0, 1)"
    r = T.rand(50, 50)
    assert float(r.min()) >= 0.0 and float(r.max()) < 1.0
    assert 0.4 < float(r.mean()) < 0.6


# ref 000 §2.2 "From NumPy": from_numpy shares memory, tensor() copies
def test_from_numpy_shares_memory_and_tensor_copies():
    def ex(T):
        np_array = np.array([[1, 2], [3, 4]])
        shared = T.from_numpy(np_array)
        copied = T.tensor(np_array)
        np_array[0, 0] = 100
        return shared, copied

    shared, copied = both(ex)
    assert shared["values"][0, 0] == 100 and copied["values"][0, 0] == 1
    assert shared["dtype"] == "int64"


# ref 000 §2.2 "With specific dtype"
def test_explicit_dtypes():
    def ex(T):
        return [
            T.tensor([1.0, 2.0], dtype=T.float32).dtype,
            T.tensor([1.0, 2.0], dtype=T.float64).dtype,
            T.tensor([1, 2], dtype=T.int64).dtype,
            T.tensor([True, False], dtype=T.bool).dtype,
        ]

    assert both(ex) == [("dtype", n) for n in ("float32", "float64", "int64", "bool")]


# ref 000 §2.3 "Tensor Attributes and Properties" (CPU path; the CUDA path is in test_reference_devices)
def test_attributes_of_a_3d_tensor():
    def ex(T):
        x = T.randn(3, 4, 5, dtype=T.float32)
        return [x.shape, x.stride(), x.storage_offset(), x.dtype, x.device, x.numel(), x.ndim,
                x.requires_grad]

    obs = both(ex)
    assert obs == [("Size", (3, 4, 5)), (20, 5, 1), 0, ("dtype", "float32"), ("device", "cpu"), 60, 3, False]


def test_attributes_print_like_the_text():
    # ref 000 §2.3: print(f"Shape: {x.shape}") -> torch.Size([3, 4, 5]); Dtype: torch.float32; Device
    same_repr(lambda T: f"{T.zeros(3, 4, 5).shape} {T.zeros(1).dtype} {T.zeros(1).device}")


# ref 000 §2.4 "Element-wise operations": values and printed reprs from the comments
@pytest.mark.parametrize(
    "expr, printed",
    [
        (lambda T, a, b: a + b, "tensor([5., 7., 9.])"),
        (lambda T, a, b: a * b, "tensor([ 4., 10., 18.])"),
        (lambda T, a, b: a ** 2, "tensor([1., 4., 9.])"),
        (lambda T, a, b: T.exp(a), "tensor([ 2.7183,  7.3891, 20.0855])"),
        (lambda T, a, b: T.log(b), "tensor([1.3863, 1.6094, 1.7918])"),
    ],
    ids=["add", "mul", "pow", "exp", "log"],
)
def test_elementwise_values_and_printed_form(expr, printed):
    def ex(T):
        return expr(T, T.tensor([1.0, 2.0, 3.0]), T.tensor([4.0, 5.0, 6.0]))

    both(ex)
    assert same_repr(ex) == printed


# ref 000 §2.4 "Matrix operations": @, mm and matmul agree, (3,4)x(4,5) -> (3,5)
def test_matmul_mm_and_at_operator_agree():
    def ex(T):
        A, B = T.tensor(A34), T.tensor(B45)
        return [A @ B, T.mm(A, B), T.matmul(A, B)]

    obs = both(ex)
    assert obs[0]["shape"] == (3, 5)
    np.testing.assert_allclose(obs[0]["values"], obs[1]["values"])
    np.testing.assert_allclose(obs[0]["values"], obs[2]["values"])


def test_matmul_shape_mismatch_error_names_the_shapes():
    # ref 000 §2.4: (3,4) x (4,5) works; the inner sizes must agree
    both_raise(lambda T: T.ones(3, 4) @ T.ones(5, 4), RuntimeError, "3x4", "5x4")


# ref 000 §2.4 "Reduction operations"
def test_reductions_values_shapes_and_reprs():
    def ex(T):
        x = T.tensor(A34)
        return [x.sum(), x.sum(dim=0), x.sum(dim=1), x.mean(), x.std(), x.max(), x.argmax()]

    obs = both(ex)
    assert [o["shape"] for o in obs] == [(), (4,), (3,), (), (), (), ()]
    assert obs[-1]["dtype"] == "int64"
    same_repr(lambda T: T.tensor([[1.0, 5.0], [3.0, 2.0]]).max())
    same_repr(lambda T: T.tensor([[1.0, 5.0], [3.0, 2.0]]).argmax())
    same_repr(lambda T: T.tensor([[1.0, 5.0], [3.0, 2.0]]).sum(dim=0))


# ref 000 §2.4 "Reshaping operations": view shares storage, unsqueeze/squeeze shapes
def test_reshaping_shapes_and_view_shares_storage():
    def ex(T):
        x = T.arange(12)
        y, z = x.view(3, 4), x.reshape(3, 4)
        w = x.unsqueeze(0)
        v = w.squeeze(0)
        u = x.view(2, 2, 3)
        y[0, 0] = 100  # the view writes through to x
        return [x, y, z, w, v, u]

    obs = both(ex)
    assert [o["shape"] for o in obs] == [(12,), (3, 4), (3, 4), (1, 12), (12,), (2, 2, 3)]
    assert obs[0]["values"][0] == 100 and obs[-1]["values"][0, 0, 0] == 100


# ref 000 §2.4 "Permutation and transposition"
def test_permute_and_transpose_shapes_and_strides():
    def ex(T):
        x = T.tensor(A234)
        return [x.permute(2, 0, 1), x.transpose(0, 2)]

    p, t = both(ex)
    assert p["shape"] == (4, 2, 3) and p["stride"] == (1, 12, 4)
    assert t["shape"] == (4, 3, 2) and t["stride"] == (1, 4, 12)


# ref 000 §2.4 "Broadcasting" and ref 003 "Broadcasting and Reshaping"
@pytest.mark.parametrize(
    "sa, sb, expected",
    [((3, 1), (1, 4), (3, 4)), ((8, 1, 6, 1), (7, 1, 5), (8, 7, 6, 5)), ((3, 1, 4), (1, 5, 4), (3, 5, 4))],
)
def test_broadcasting_shapes(sa, sb, expected):
    def ex(T):
        return T.ones(*sa) + T.ones(*sb)

    assert both(ex)["shape"] == expected


def test_incompatible_broadcast_raises_naming_the_sizes():
    # ref 000 §2.4 rule 2: only size-1 dimensions stretch
    both_raise(lambda T: T.ones(3, 2) + T.ones(4, 2), RuntimeError, "(3)", "(4)", "dimension 0")


# ref 000 §2.5 "Advanced Indexing and Slicing"
def test_indexing_examples():
    def ex(T):
        x = T.arange(24).reshape(2, 3, 4)
        mask = x > 10
        indices = T.tensor([[0, 2], [1, 2]])
        return [x[0], x[:, 1, :], x[..., -1], x[mask], x[0, indices], x[0][:, T.tensor([[0, 2], [1, 3]])]]

    obs = both(ex)
    assert [o["shape"] for o in obs] == [(3, 4), (2, 4), (2, 3), (13,), (2, 2, 4), (3, 2, 2)]
    # the text's x[0, [[0, 2], [1, 3]]] indexes a dimension of size 3 with 3: both libraries refuse
    both_raise(lambda T: T.arange(24).reshape(2, 3, 4)[0, T.tensor([[0, 2], [1, 3]])], IndexError,
               "index 3 is out of bounds", "size 3")
    for fn in (lambda T: T.arange(24).reshape(2, 3, 4)[..., -1],
               lambda T: (lambda x: x[x > 10])(T.arange(24).reshape(2, 3, 4))):
        same_repr(fn)


def test_where_is_relu_like():
    # ref 000 §2.5 "Where (conditional selection)"
    def ex(T):
        x = T.tensor(A34)
        return T.where(x > 0, x, T.zeros_like(x))

    out = both(ex)
    np.testing.assert_allclose(out["values"], np.maximum(A34, 0))


# ref 003 "Indexing and Selection": basic indexing is a view, fancy/mask indexing copies
def test_basic_indexing_views_and_fancy_indexing_copies():
    def ex(T):
        x = T.tensor(A105)
        first_row, first_col, subset = x[0], x[:, 0], x[2:5, 1:4]
        gathered = x[T.tensor([0, 2, 4])]
        positive = x[x > 0]
        x.fill_(7.0)  # views see this, fancy-index copies do not
        return [first_row, first_col, subset, gathered.shape, bool((gathered == 7).all()),
                bool((positive == 7).all())]

    obs = both(ex)
    assert [o["shape"] for o in obs[:3]] == [(5,), (10,), (3, 3)]
    assert obs[1]["stride"] == (5,) and obs[2]["stride"] == (5, 1)
    assert (obs[2]["values"] == 7).all() and obs[4] is False and obs[5] is False


# ref 000 §2.6 "In-place Operations": trailing underscore mutates and returns the same tensor
def test_inplace_ops_chain_and_return_self():
    def ex(T):
        x = T.tensor(A34.copy())
        same = [x.zero_() is x, x.add_(5) is x, x.mul_(2) is x]
        x.sub_(20).clamp_(min=0)
        return same, x

    same, x = both(ex)
    assert same == [True, True, True]
    assert (x["values"] == 0).all()


# ref 002 §1 "Tensor Internals": arange(12).reshape(3, 4) prints, has strides (4, 1), offset 0
def test_arange_matrix_print_strides_and_offset():
    printed = same_repr(lambda T: T.arange(12, dtype=T.float32).reshape(3, 4))
    assert printed.startswith("tensor([[ 0.,  1.,  2.,  3.],")

    def ex(T):
        x = T.arange(12, dtype=T.float32).reshape(3, 4)
        return [x.stride(), x.storage_offset()]

    assert both(ex) == [(4, 1), 0]


# ref 002 §1: transpose swaps strides, is not contiguous; contiguous() copies to C order
def test_transpose_is_a_noncontiguous_view_and_contiguous_copies():
    def ex(T):
        x = T.arange(12, dtype=T.float32).reshape(3, 4)
        x_t = x.T
        x_t_cont = x_t.contiguous()
        x_t_cont[0, 0] = -1.0  # a copy: x is untouched
        return [x_t.shape, x_t.stride(), x.is_contiguous(), x_t.is_contiguous(), x_t_cont.stride(),
                x_t_cont.is_contiguous(), x, x_t.contiguous() is not x_t, x.contiguous() is x]

    obs = both(ex)
    assert obs[:6] == [("Size", (4, 3)), (1, 4), True, False, (3, 1), True]
    assert obs[6]["values"][0, 0] == 0 and obs[7] is True and obs[8] is True


def test_view_of_a_transpose_raises_and_reshape_copies():
    # ref 002 §1: x_t.view(-1) -> "view size is not compatible with input tensor's size and stride"
    both_raise(
        lambda T: T.arange(12, dtype=T.float32).reshape(3, 4).T.view(-1),
        RuntimeError,
        "view size is not compatible with input tensor's size and stride",
        ".reshape(...)",
    )

    def ex(T):
        x = T.arange(12, dtype=T.float32).reshape(3, 4)
        flat = x.T.reshape(-1)
        flat[0] = 99.0  # reshape had to copy, so x is unchanged
        return flat, x

    flat, x = both(ex)
    np.testing.assert_array_equal(flat["values"][:4], [99, 4, 8, 1])
    assert x["values"][0, 0] == 0


def test_storage_has_the_flat_data_and_is_shared_by_the_transpose():
    # ref 002 §1 prints x.storage()[:]; in PyTorch 2.x TypedStorage iterates, but slicing raises
    def ex(T):
        x = T.arange(12, dtype=T.float32).reshape(3, 4)
        s = x.storage()
        return [len(s), list(s), s[5], x.T.storage().data_ptr() == s.data_ptr()]

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obs = both(ex)
        both_raise(lambda T: T.arange(4.0).storage()[:], RuntimeError, "slice")
    assert obs[0] == 12 and obs[1] == [float(i) for i in range(12)] and obs[3] is True


# ref 002 §1 "Memory sharing": writing to a slice modifies the original; clone() is independent
def test_slice_writes_through_and_clone_does_not():
    def ex(T):
        a = T.ones(4)
        b = a[:2]
        b[0] = 99.0
        after_slice = repr(a)
        c = a[:2].clone()
        c[0] = 0.0
        return after_slice, a

    printed, a = both(ex)
    assert printed == "tensor([99.,  1.,  1.,  1.])"
    assert a["values"][0] == 99


# ref 003 "Creation and Basic Properties": shape, dtype, device, float()/long() conversions
def test_basic_properties_and_dtype_conversions():
    def ex(T):
        x = T.tensor([1.0, 2.0, 3.0])
        y = T.randn(32, 128)
        return [x.shape, x.dtype, y.device, x.float().dtype, y.long().dtype, x.float() is x,
                x.double().dtype, x.int().dtype, x.bool().dtype, x.half().dtype]

    obs = both(ex)
    assert obs[:5] == [("Size", (3,)), ("dtype", "float32"), ("device", "cpu"), ("dtype", "float32"),
                       ("dtype", "int64")]


def test_randn_with_named_dimensions_is_a_type_error():
    # ref 003 writes torch.randn(batch_size=32, features=128): real PyTorch rejects it
    both_raise(lambda T: T.randn(batch_size=32, features=128), TypeError, "randn()")


# ref 003 "View vs reshape": view(2, 3) and reshape(3, 2) of arange(6); t() is non-contiguous
def test_view_reshape_and_t_of_arange6():
    def ex(T):
        x = T.arange(6)
        y, z = x.view(2, 3), x.reshape(3, 2)
        z_t = z.t()
        z_c = z_t.contiguous()
        return [y, z, z_t, z_t.is_contiguous(), z_c, z_c.is_contiguous()]

    obs = both(ex)
    assert obs[2]["stride"] == (1, 2) and obs[3] is False and obs[4]["stride"] == (3, 1) and obs[5] is True


# brief: numpy() shares memory with the tensor; item() gives a Python number
def test_numpy_shares_memory_and_item_gives_python_scalars():
    def ex(T):
        t = T.zeros(3)
        n = t.numpy()
        n[1] = 5.0
        t.add_(1)
        return [t, n.tolist(), T.tensor(2.5).item(), T.tensor(3).item(), T.tensor([7]).item(),
                type(T.randn(4, 8).mean().item()).__name__]

    obs = both(ex)
    assert obs[1] == [1.0, 6.0, 1.0] and obs[2:] == [2.5, 3, 7, "float"]


def test_item_of_many_elements_raises():
    # ref 004: x.mean().item() is fine; item() on more than one element is an error
    both_raise(lambda T: T.ones(3).item(), RuntimeError, "3 elements", "scalar")


def test_numpy_of_a_tensor_requiring_grad_raises_and_detach_fixes_it():
    # ref 003 table: "Forgetting .detach() when converting to NumPy"
    both_raise(lambda T: T.ones(2, requires_grad=True).numpy(), RuntimeError, "requires grad",
               "detach().numpy()")

    def ex(T):
        return T.ones(2, requires_grad=True).detach().numpy().tolist()

    assert both(ex) == [1.0, 1.0]


# brief: dtype promotion rules users meet in these examples
def test_dtype_promotion():
    def ex(T):
        i = T.tensor([1, 2])
        f = T.tensor([1.0, 2.0])
        d = T.tensor([1.0], dtype=T.float64)
        b = T.tensor([True, False])
        return [(i + f).dtype, (i / 2).dtype, (i * 2).dtype, (i * 2.5).dtype, (f + d).dtype,
                (b + 1).dtype, (b + b).dtype, (i > 1).dtype, (T.tensor(1.0, dtype=T.float64) + f).dtype,
                (T.tensor([1], dtype=T.int32) + T.tensor([1], dtype=T.int64)).dtype, (i // 2).dtype]

    assert [o[1] for o in both(ex)] == ["float32", "float32", "int64", "float32", "float64", "int64", "bool",
                                        "bool", "float32", "int64", "int64"]


# ref 003 "Indexing": fancy indexing with an out-of-range index raises an IndexError
def test_out_of_range_index_raises_index_error():
    both_raise(lambda T: T.zeros(10, 5)[10], IndexError, "10", "size 10")


def test_setting_requires_grad_on_an_int_tensor_raises():
    # ref 000 §3.2: gradients need floating point tensors
    both_raise(lambda T: T.tensor([1, 2], requires_grad=True), RuntimeError, "floating point")


def test_engine_size_and_dtype_print_with_the_engine_name():
    assert repr(engine.Size([3, 4])) == "engine.Size([3, 4])"
    assert repr(torch.Size([3, 4])) == "torch.Size([3, 4])"


# every printed tensor in the texts reads "tensor(...)": the engine prints like torch for any shape, scale,
# dtype and suffix (the suffix may wrap one position differently since "engine." is longer than "torch.")
@pytest.mark.parametrize("kind", ["float32", "float64", "float16", "int64", "bool", "whole_floats"])
def test_repr_matches_torch_across_shapes_scales_and_dtypes(kind):
    import re

    def norm(s: str) -> str:
        s = s.replace("engine.", "torch.")
        return re.sub(r",\n\s+(dtype|grad_fn|requires_grad|size)=", r", \1=", s)

    rng = np.random.default_rng(0)
    shapes = [(), (1,), (7,), (100,), (3, 4), (2, 3, 4), (40, 30), (1001,), (5, 300), (0,), (3, 0)]
    for shape in shapes:
        for scale in (1.0, 1e-5, 1e5, 1e9, 0.001):
            a = np.asarray(rng.standard_normal(shape) * scale)
            a = {"float32": a.astype(np.float32), "float64": a, "int64": (a * 10).astype(np.int64),
                 "float16": (np.clip(a, -6e4, 6e4) / 4).astype(np.float16), "bool": a > 0,
                 "whole_floats": np.round(a * 10).astype(np.float32)}[kind]
            for grad in ([False, True] if a.dtype.kind == "f" else [False]):
                t, e = torch.tensor(a, requires_grad=grad), engine.tensor(a, requires_grad=grad)
                if grad:
                    t, e = t * 2, e * 2
                assert norm(repr(e)) == norm(repr(t)), (shape, scale)


def test_numpy_scalars_keep_their_dtype():
    # torch.tensor(np.float64(...)) is float64; in lists NumPy scalars promote with Python numbers
    def ex(T):
        return [T.tensor(np.float64(1.5)), T.tensor(np.float16(1.5)), T.tensor(np.int32(3)),
                T.tensor([np.float64(1.0), 2.0]), T.tensor([np.int32(1), 2]), T.tensor([np.float16(1), 2.0]),
                T.tensor([True, np.int8(3)]), T.tensor(A34.mean())]

    expected = ["float64", "float16", "int32", "float64", "int64", "float32", "int8", "float32"]
    assert [o["dtype"] for o in both(ex)] == expected
