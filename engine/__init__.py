"""Wiregrad's deep-learning engine: PyTorch's API on our own strided tensors, autograd and backends."""
from __future__ import annotations

import warnings as _warnings

from . import _strides

# NumPy's floating-point warnings (log(0), x / 0, sqrt(-1), overflow) from inside the engine's kernels: the
# results are IEEE inf/nan exactly as torch gives them, and torch says nothing; the training doctor is what
# reports NaN/Inf to the user. Only these messages and only from engine code are silenced.
_warnings.filterwarnings("ignore", message=r"(divide by zero|invalid value|overflow|underflow) encountered",
                         category=RuntimeWarning, module=r"engine(\.|$)")
from ._memory_format import channels_last, contiguous_format, memory_format, preserve_format
from .autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .backend import device
from .dtypes import (
    bfloat16,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from .dtypes import bool_ as bool
from .dtypes import result_type as _result_type
from .tensor import Size, Storage, Tensor

half = float16
float = float32  # noqa: A001 - PyTorch's alias
double = float64
long = int64
int = int32  # noqa: A001
short = int16

Tensor.__module__ = "engine"
from .tensor import _install_methods  # noqa: E402

_install_methods()

from . import (
    autograd,  # noqa: E402
    cuda,  # noqa: E402
)
from .ops.composite import (  # noqa: E402
    atleast_1d,
    atleast_2d,
    atleast_3d,
    cdist,
    column_stack,
    copysign,
    deg2rad,
    dist,
    dsplit,
    dstack,
    float_power,
    hsplit,
    hypot,
    kron,
    logaddexp,
    logaddexp2,
    logit,
    rad2deg,
    tensordot,
    tril_indices,
    triu_indices,
    vdot,
    vsplit,
    xlogy,
)
from .ops.creation import *  # noqa: E402
from .ops.creation import (  # noqa: E402
    arange,
    as_tensor,
    asarray,
    bernoulli,
    empty,
    empty_like,
    empty_strided,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    logspace,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    scalar_tensor,
    tensor,
    zeros,
    zeros_like,
)
from .ops.elementwise import (  # noqa: E402  # noqa: E402
    abs,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    allclose,
    arctan2,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    clone,
    cos,
    cosh,
    div,
    divide,
    eq,
    equal,
    erf,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    frac,
    ge,
    greater,
    greater_equal,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    lerp,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    multiply,
    nan_to_num,
    ne,
    neg,
    negative,
    not_equal,
    pow,
    reciprocal,
    relu,
    remainder,
    round,
    rsqrt,
    rsub,
    sigmoid,
    sign,
    signbit,
    sin,
    sinc,
    sinh,
    sqrt,
    square,
    sub,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
    where,
)
from .ops.indexing import (  # noqa: E402
    argwhere,
    gather,
    index_add,
    index_put,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
    take,
    take_along_dim,
)
from .ops.matmul import addmm, baddbmm, bmm, dot, einsum, inner, matmul, mm, mv, outer, trace  # noqa: E402
from .ops.reduce import (  # noqa: E402
    all,
    amax,
    amin,
    aminmax,
    any,
    argmax,
    argmin,
    count_nonzero,
    cummax,
    cummin,
    cumprod,
    cumsum,
    log_softmax,
    logcumsumexp,
    logsumexp,
    max,
    mean,
    min,
    nanmean,
    nansum,
    norm,
    prod,
    softmax,
    std,
    std_mean,
    sum,
    var,
    var_mean,
)
from .ops.shape import (  # noqa: E402
    cat,
    concat,
    concatenate,
    diag,
    diff,
    flip,
    fliplr,
    flipud,
    hstack,
    meshgrid,
    repeat_interleave,
    roll,
    rot90,
    stack,
    tile,
    tril,
    triu,
    vstack,
)
from .ops.sort import (  # noqa: E402
    argsort,
    bincount,
    kthvalue,
    median,
    searchsorted,
    sort,
    topk,
    unique,
    unique_consecutive,
)

# NumPy-style spellings torch also accepts
absolute, arccos, arcsin, arctan, fix, sgn = abs, acos, asin, atan, trunc, sign  # noqa: E402
arcsinh, arccosh, arctanh = asinh, acosh, atanh  # noqa: E402
from . import special  # noqa: E402  (engine.special, like torch.special)
from .ops.special_math import digamma, erfinv, i0, i0_, lgamma, mvlgamma, polygamma  # noqa: E402
from .ops.views import (  # noqa: E402
    as_strided,
    broadcast_tensors,
    broadcast_to,
    chunk,
    diagonal,
    expand_as,
    flatten,
    moveaxis,
    movedim,
    narrow,
    permute,
    ravel,
    reshape,
    select,
    split,
    squeeze,
    swapaxes,
    swapdims,
    t,
    tensor_split,
    transpose,
    unbind,
    unflatten,
    unsqueeze,
)
from .random import (  # noqa: E402
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

negative = neg  # noqa: F811


def broadcast_shapes(*shapes):
    return Size(_strides.broadcast_shapes(*(tuple(s) if not isinstance(s, builtins_int) else (s,)
                                            for s in shapes)))


import builtins as _builtins  # noqa: E402

builtins_int = _builtins.int


def is_tensor(obj) -> _builtins.bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> builtins_int:
    return input.numel()


def is_floating_point(input: Tensor) -> _builtins.bool:
    return input.is_floating_point()


def result_type(a, b):
    return _result_type(a, b)


def can_cast(from_, to) -> _builtins.bool:
    return from_._cat <= to._cat


from ._runtime import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    compile,
    detach,
    fill,
    finfo,
    get_default_device,
    get_num_interop_threads,
    get_num_threads,
    iinfo,
    is_complex,
    is_conj,
    is_deterministic_algorithms_warn_only_enabled,
    is_inference,
    is_nonzero,
    is_same_size,
    is_signed,
    set_default_device,
    set_num_interop_threads,
    set_num_threads,
    set_printoptions,
    typename,
    use_deterministic_algorithms,
)


def _function_from_method(name: str):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): the same as input.{name}(...)."
    return fn


from .ops import tensor_surface as _tensor_surface  # noqa: E402  (in-place methods, resize_, layouts...)
from .ops.inplace_methods import sgn  # noqa: E402,F811  (sgn: torch's node)
from .ops.tensor_surface import layout, sparse_coo, strided  # noqa: E402

_tensor_surface.install(Tensor)

# torch's top-level spellings of in-place methods: engine.relu_(x) is x.relu_()
for _name in (
    "abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_ ceil_ "
    "clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ detach_ erf_ erfc_ exp2_ exp_ expm1_ fix_ floor_ "
    "frac_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ relu_ round_ "
    "rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ zero_ index_put_ as_strided_"
).split():
    if hasattr(Tensor, _name) and _name not in globals():
        globals()[_name] = _function_from_method(_name)


from . import linalg  # noqa: E402  (engine.linalg, like torch.linalg)
from .linalg import _torch_cholesky as cholesky  # noqa: E402
from .linalg import _torch_cross as cross  # noqa: E402
from .linalg import _torch_qr as qr  # noqa: E402
from .linalg import _torch_slogdet as slogdet  # noqa: E402
from .linalg import _torch_svd as svd  # noqa: E402
from .linalg import (  # noqa: E402  (torch's top-level spellings of linalg functions)
    chain_matmul,
    cholesky_inverse,
    cholesky_solve,
    det,
    logdet,
    matrix_exp,
    matrix_power,
    pinverse,
)
from .linalg import inv as inverse  # noqa: E402
from .ops.composite import renorm  # noqa: E402
from .ops.indexing import unravel_index  # noqa: E402
from .ops.integration import cumulative_trapezoid, trapezoid, trapz  # noqa: E402
from .ops.matmul import addbmm, addmv, addr, ger  # noqa: E402
from .ops.numeric import (  # noqa: E402
    frexp,
    gcd,
    heaviside,
    isin,
    isneginf,
    isposinf,
    isreal,
    lcm,
    ldexp,
    nextafter,
    positive,
)
from .ops.scatter import (  # noqa: E402
    diag_embed,
    diagflat,
    diagonal_scatter,
    index_copy,
    index_fill,
    index_reduce,
    put,
    scatter_reduce,
    select_scatter,
    slice_scatter,
)
from .ops.shape import block_diag, cartesian_prod, combinations, row_stack  # noqa: E402
from .ops.sort import msort  # noqa: E402
from .ops.statistics import (  # noqa: E402
    bucketize,
    corrcoef,
    cov,
    histc,
    histogram,
    mode,
    nanmedian,
    nanquantile,
    quantile,
)

__version__ = "0.1.0"

from . import _cuda_amp as _cuda_amp  # noqa: E402  (registers engine.cuda.amp, torch.cuda.amp's spelling)
from . import _out, amp, func, nn, optim, utils  # noqa: E402  (after the core: they build on it)
from .amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402  (engine.autocast, like torch.autocast)
from .serialization import load, save  # noqa: E402
from .utils import data as _data  # noqa: E402,F401  (engine.utils.data importable as an attribute)

_out.install(globals())  # torch's out= on the top-level functions that lack it (engine.sum(x, out=y))

# torch.accelerator, torch.backends, torch.distributed: what scripts touch at start-up (engine/backends/...)
from . import accelerator, backends, distributed  # noqa: E402,F401
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402,F401
