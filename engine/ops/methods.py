"""The Tensor method table: binds each op (defined once in its ops module) as a method and operator."""
from __future__ import annotations

from .. import linalg as LA
from ..tensor import Tensor
from . import composite as CO
from . import creation as C
from . import elementwise as E
from . import indexing as I
from . import matmul as L
from . import numeric as NU
from . import reduce as R
from . import scatter as SC
from . import shape as SH
from . import sort as SO
from . import special_math as SM
from . import statistics as ST
from . import views as V


def _rev(fn):
    def r(self, other):
        return fn(other, self)

    return r


def _rdiv(self, other):
    """`2 / x` is torch's Tensor.__rdiv__: x.reciprocal() * 2 (so MulBackward0, and its rounding)."""
    return E.mul(E.reciprocal(self), other)


def _pow_rev(self, other):
    return E.pow(other, self)


def _tile(self, *sizes, dims=None):
    """Tensor.tile takes the dims as numbers too (x.tile(2, 3)); torch.tile takes a tuple only."""
    if dims is None:
        dims = sizes[0] if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
    return SH.tile(self, dims)


def _is_nonzero(self) -> bool:
    if self.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if not self.numel() else
                           "Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


def _tensor_other(fn, name: str):
    """A method whose `other` torch types as Tensor: a number is a TypeError naming position 1 (self is not
    counted), where the function form says position 2."""

    def method(self, other):
        if not isinstance(other, Tensor):
            E._tensor_arg(name, other)
        return fn(self, other)

    method.__name__ = name
    return method


_TENSOR_OTHER = {"maximum": E.maximum, "minimum": E.minimum, "fmax": E.fmax, "fmin": E.fmin,
                 "atan2": E.atan2, "arctan2": E.atan2, "hypot": CO.hypot, "logaddexp": CO.logaddexp,
                 "logaddexp2": CO.logaddexp2, "ldexp": NU.ldexp, "logical_and": E.logical_and,
                 "logical_or": E.logical_or, "logical_xor": E.logical_xor}


def _iop(fn):
    def op(self, other):
        return fn(self, other)

    return op


METHODS = {
    # arithmetic
    "add": E.add, "sub": E.sub, "subtract": E.sub, "mul": E.mul, "multiply": E.mul, "div": E.div,
    "divide": E.div, "true_divide": E.div, "floor_divide": E.floor_divide, "remainder": E.remainder,
    "fmod": E.fmod, "pow": E.pow, "maximum": E.maximum, "minimum": E.minimum, "lerp": E.lerp,
    "addcmul": E.addcmul, "addcdiv": E.addcdiv, "atan2": E.atan2, "fmax": E.fmax, "fmin": E.fmin,
    "add_": E.add_, "sub_": E.sub_, "mul_": E.mul_, "div_": E.div_, "pow_": E.pow_, "copy_": E.copy_,
    "fill_": E.fill_, "zero_": E.zero_, "clamp_": E.clamp_, "clamp_min_": E.clamp_min_,
    "clamp_max_": E.clamp_max_,
    "exp_": E.exp_, "log_": E.log_, "sqrt_": E.sqrt_, "neg_": E.neg_, "abs_": E.abs_, "relu_": E.relu_,
    "sigmoid_": E.sigmoid_, "tanh_": E.tanh_, "floor_": E.floor_, "ceil_": E.ceil_, "round_": E.round_,
    "reciprocal_": E.reciprocal_, "sign_": E.sign_, "lerp_": E.lerp_, "addcmul_": E.addcmul_,
    "addcdiv_": E.addcdiv_, "maximum_": E.maximum_, "clip_": E.clamp_,
    # unary
    "exp": E.exp, "exp2": E.exp2, "expm1": E.expm1, "log": E.log, "log2": E.log2, "log10": E.log10,
    "log1p": E.log1p, "sqrt": E.sqrt, "rsqrt": E.rsqrt, "abs": E.abs, "absolute": E.abs, "neg": E.neg,
    "negative": E.neg, "sin": E.sin, "cos": E.cos, "tan": E.tan, "asin": E.asin, "acos": E.acos,
    "atan": E.atan,
    "sinh": E.sinh, "cosh": E.cosh, "tanh": E.tanh, "sigmoid": E.sigmoid, "relu": E.relu, "erf": E.erf,
    "erfc": E.erfc, "asinh": E.asinh, "acosh": E.acosh, "atanh": E.atanh, "arcsinh": E.asinh,
    "arccosh": E.acosh, "arctanh": E.atanh, "arcsin": E.asin, "arccos": E.acos, "arctan": E.atan,
    "arctan2": E.atan2, "fix": E.trunc, "sinc": E.sinc, "signbit": E.signbit,
    "hypot": CO.hypot, "logaddexp": CO.logaddexp, "logaddexp2": CO.logaddexp2, "copysign": CO.copysign,
    "xlogy": CO.xlogy, "logit": CO.logit, "float_power": CO.float_power, "deg2rad": CO.deg2rad,
    "rad2deg": CO.rad2deg, "dist": CO.dist, "vdot": CO.vdot, "hsplit": CO.hsplit, "vsplit": CO.vsplit,
    "dsplit": CO.dsplit, "kron": CO.kron, "cummax": R.cummax, "cummin": R.cummin,
    "logcumsumexp": R.logcumsumexp,
    # special functions (special_math.py)
    "lgamma": SM.lgamma, "digamma": SM.digamma, "polygamma": SM.tensor_polygamma, "mvlgamma": SM.mvlgamma,
    "erfinv": SM.erfinv, "i0": SM.i0, "lgamma_": SM.lgamma_, "digamma_": SM.digamma_,
    "polygamma_": SM.polygamma_, "mvlgamma_": SM.mvlgamma_, "erfinv_": SM.erfinv_, "i0_": SM.i0_,
    "reciprocal": E.reciprocal, "square": E.square, "sign": E.sign, "floor": E.floor, "ceil": E.ceil,
    "trunc": E.trunc, "frac": E.frac, "round": E.round, "clamp": E.clamp, "clip": E.clamp,
    "clamp_min": E.clamp_min, "clamp_max": E.clamp_max, "nan_to_num": E.nan_to_num,
    # comparison and logic
    "eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge, "greater": E.gt, "less": E.lt,
    "greater_equal": E.ge, "less_equal": E.le, "not_equal": E.ne, "equal": E.equal,
    "logical_and": E.logical_and, "logical_or": E.logical_or, "logical_xor": E.logical_xor,
    "logical_not": E.logical_not, "bitwise_not": E.bitwise_not, "isnan": E.isnan, "isinf": E.isinf,
    "isfinite": E.isfinite, "isclose": E.isclose, "allclose": E.allclose,
    # reductions
    "sum": R.sum, "mean": R.mean, "var": R.var, "std": R.std, "prod": R.prod, "max": R.max, "min": R.min,
    "amax": R.amax, "amin": R.amin, "argmax": R.argmax, "argmin": R.argmin, "logsumexp": R.logsumexp,
    "norm": R.norm, "all": R.all, "any": R.any, "cumsum": R.cumsum, "cumprod": R.cumprod,
    "softmax": R.softmax, "log_softmax": R.log_softmax, "sum_to_size": lambda self, *s: R.sum_to_size(
        self, s[0] if len(s) == 1 and isinstance(s[0], (tuple, list)) else s),
    "count_nonzero": R.count_nonzero, "nansum": R.nansum, "nanmean": R.nanmean, "aminmax": R.aminmax,
    # views
    "view": V.view, "reshape": V.reshape, "view_as": V.view_as, "reshape_as": V.reshape_as,
    "permute": V.permute, "transpose": V.transpose, "swapaxes": V.transpose, "swapdims": V.transpose,
    "t": V.t, "expand": V.expand, "expand_as": V.expand_as, "broadcast_to": V.broadcast_to,
    "squeeze": V.squeeze, "unsqueeze": V.unsqueeze, "flatten": V.flatten, "unflatten": V.unflatten,
    "ravel": V.ravel, "narrow": V.narrow, "select": V.select, "split": V.split, "chunk": V.chunk,
    "tensor_split": V.tensor_split, "unbind": V.unbind, "movedim": V.movedim, "moveaxis": V.movedim,
    "as_strided": V.as_strided, "unfold": V.unfold, "diagonal": V.diagonal,
    # indexing
    "__getitem__": I.getitem, "__setitem__": I.setitem, "gather": I.gather, "scatter": I.scatter,
    "scatter_": I.scatter_, "scatter_add": I.scatter_add, "scatter_add_": I.scatter_add_,
    "index_select": I.index_select, "index_add": I.index_add, "index_add_": I.index_add_,
    "index_fill": SC.index_fill, "index_put_": I.index_put_, "index_put": I.index_put,
    "masked_fill": I.masked_fill, "masked_fill_": I.masked_fill_, "masked_select": I.masked_select,
    "masked_scatter": I.masked_scatter, "nonzero": I.nonzero, "argwhere": I.argwhere, "take": I.take,
    "take_along_dim": I.take_along_dim,
    # joining, sorting, linear algebra
    "flip": SH.flip, "fliplr": SH.fliplr, "flipud": SH.flipud, "roll": SH.roll, "repeat": SH.repeat,
    "tile": _tile, "repeat_interleave": SH.repeat_interleave, "tril": SH.tril, "triu": SH.triu,
    "diag": SH.diag, "diff": SH.diff, "rot90": SH.rot90,
    "tril_": lambda self, diagonal=0: E.inplace(self, lambda s: SH.tril(s, diagonal), op_name="tril_"),
    "triu_": lambda self, diagonal=0: E.inplace(self, lambda s: SH.triu(s, diagonal), op_name="triu_"),
    "sort": SO.sort, "argsort": SO.argsort, "topk": SO.topk, "kthvalue": SO.kthvalue, "median": SO.median,
    "unique": SO.unique, "unique_consecutive": SO.unique_consecutive,
    "bincount": SO.bincount,
    "matmul": L.matmul, "mm": L.mm, "bmm": L.bmm, "mv": L.mv, "dot": L.dot, "outer": L.outer,
    "addmm": L.addmm, "baddbmm": L.baddbmm, "inner": L.inner, "ger": L.ger, "trace": L.trace,
    "det": LA.det, "inverse": LA.inv, "cholesky": LA._torch_cholesky, "qr": LA._torch_qr,
    "svd": LA._torch_svd, "matrix_power": LA.matrix_power, "matrix_exp": LA.matrix_exp, "logdet": LA.logdet,
    "slogdet": LA._torch_slogdet, "pinverse": LA.pinverse, "cross": LA._torch_cross,
    "msort": SO.msort,
    "where": lambda self, condition, other: E.where(condition, self, other),
    "bitwise_and": E.bitwise_and, "bitwise_or": E.bitwise_or, "bitwise_xor": E.bitwise_xor,
    "bitwise_left_shift": E.bitwise_left_shift, "bitwise_right_shift": E.bitwise_right_shift,
    "bitwise_left_shift_": E.bitwise_left_shift_, "bitwise_right_shift_": E.bitwise_right_shift_,
    "index_fill_": SC.index_fill_, "masked_scatter_": I.masked_scatter_,
    "short": lambda self: self.to("int16"), "char": lambda self: self.to("int8"),
    "get_device": lambda self: self.device.index if self.is_cuda else -1,
    "is_same_size": lambda self, other: self._shape == other._shape,
    "is_nonzero": _is_nonzero,
    # less common math, statistics, products and index writes
    "cov": ST.cov, "corrcoef": ST.corrcoef, "histc": ST.histc, "histogram": ST.histogram,
    "isneginf": NU.isneginf, "isposinf": NU.isposinf, "isreal": NU.isreal, "heaviside": NU.heaviside,
    "gcd": NU.gcd, "lcm": NU.lcm, "ldexp": NU.ldexp, "frexp": NU.frexp, "nextafter": NU.nextafter,
    "quantile": ST.quantile, "nanquantile": ST.nanquantile, "nanmedian": ST.nanmedian, "mode": ST.mode,
    "renorm": CO.renorm, "addmv": L.addmv, "addr": L.addr, "addbmm": L.addbmm, "positive": NU.positive,
    "heaviside_": NU.heaviside_, "gcd_": NU.gcd_, "lcm_": NU.lcm_, "ldexp_": NU.ldexp_,
    "nextafter_": NU.nextafter_, "renorm_": CO.renorm_, "addmv_": L.addmv_, "addr_": L.addr_,
    "addbmm_": L.addbmm_,
    "index_copy": SC.index_copy, "index_reduce": SC.index_reduce, "scatter_reduce": SC.scatter_reduce,
    "select_scatter": SC.select_scatter, "slice_scatter": SC.slice_scatter,
    "diagonal_scatter": SC.diagonal_scatter, "diag_embed": SC.diag_embed, "diagflat": SC.diagflat,
    "put": SC.put, "put_": SC.put_, "index_copy_": SC.index_copy_, "index_reduce_": SC.index_reduce_,
    "scatter_reduce_": SC.scatter_reduce_,
    # random in-place
    "uniform_": C.uniform_, "normal_": C.normal_, "random_": C.random_, "bernoulli_": C.bernoulli_,
    "exponential_": C.exponential_, "bernoulli": C.bernoulli, "multinomial": C.multinomial,
    # operators; torch's reflected + and * are self.add(other) and self.mul(other) (the tensor's edge first),
    # its reflected - is rsub(self, other)
    "__add__": E.add, "__radd__": E.add, "__sub__": E.sub, "__rsub__": E.rsub,
    "__mul__": E.mul, "__rmul__": E.mul, "__truediv__": E.div, "__rtruediv__": _rdiv,
    "__floordiv__": E.floor_divide, "__rfloordiv__": _rev(E.floor_divide), "__mod__": E.remainder,
    "__rmod__": _rev(E.remainder), "__pow__": E.pow, "__rpow__": _pow_rev, "__matmul__": L.matmul,
    "__rmatmul__": _rev(L.matmul), "__neg__": E.neg, "__pos__": lambda self: self, "__abs__": E.abs,
    "__eq__": E.eq, "__ne__": E.ne, "__lt__": E.lt, "__le__": E.le, "__gt__": E.gt, "__ge__": E.ge,
    "__and__": lambda a, b: E.bitwise_and(a, b), "__or__": lambda a, b: E.bitwise_or(a, b),
    "__xor__": lambda a, b: E.bitwise_xor(a, b), "__rand__": lambda a, b: E.bitwise_and(b, a),
    "__ror__": lambda a, b: E.bitwise_or(b, a), "__rxor__": lambda a, b: E.bitwise_xor(b, a),
    "__invert__": E.invert,
    "__lshift__": E.bitwise_left_shift, "__rshift__": E.bitwise_right_shift,
    "__rlshift__": _rev(E.bitwise_left_shift), "__rrshift__": _rev(E.bitwise_right_shift),
    "__ilshift__": _iop(E.bitwise_left_shift_), "__irshift__": _iop(E.bitwise_right_shift_),
    "__iadd__": _iop(E.add_), "__isub__": _iop(E.sub_), "__imul__": _iop(E.mul_),
    "__itruediv__": _iop(E.div_), "__ifloordiv__": lambda self, other: self.floor_divide_(other),
    "__imod__": lambda self, other: self.remainder_(other), "__ipow__": lambda self, other: self.pow_(other),
    "__iand__": lambda self, other: self.bitwise_and_(other),
    "__ior__": lambda self, other: self.bitwise_or_(other),
    "__ixor__": lambda self, other: self.bitwise_xor_(other),
}

METHODS.update({name: _tensor_other(fn, name) for name, fn in _TENSOR_OTHER.items()})

PROPERTIES = {"T": V.T, "mT": V.mT, "H": V.T, "mH": V.mT, "itemsize": lambda self: self._dtype.itemsize,
              "nbytes": lambda self: self.numel() * self._dtype.itemsize}


def install(cls) -> None:
    for name, fn in METHODS.items():
        setattr(cls, name, fn)
    for name, fn in PROPERTIES.items():
        setattr(cls, name, property(fn))
    cls.__hash__ = lambda self: id(self)
