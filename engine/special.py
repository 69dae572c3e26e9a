"""engine.special: torch.special's functions, by torch's names (the kernels live in ops/special_math.py and
elsewhere in ops; this module only names them)."""
from __future__ import annotations

from .ops import composite as _CO
from .ops import elementwise as _E
from .ops import reduce as _R
from .ops import special_math as _SM

gammaln = _SM.lgamma
digamma = psi = _SM.digamma
polygamma = _SM.polygamma
multigammaln = _SM.mvlgamma
erf, erfc, erfcx, erfinv = _E.erf, _E.erfc, _SM.erfcx, _SM.erfinv
expit, logit = _E.sigmoid, _CO.logit
exp2, expm1, log1p = _E.exp2, _E.expm1, _E.log1p
xlogy, xlog1py, entr = _CO.xlogy, _SM.xlog1py, _SM.entr
sinc, round = _E.sinc, _E.round  # noqa: A001 - torch's name
ndtr, ndtri, log_ndtr = _SM.ndtr, _SM.ndtri, _SM.log_ndtr
i0, i0e, i1, i1e = _SM.i0, _SM.i0e, _SM.i1, _SM.i1e
zeta = _SM.zeta


# dim is required (axis=, its NumPy spelling, stands for it); torch names these special_*() in its errors
def logsumexp(input, dim=_R._UNSET, keepdim: bool = False, **aliases):
    dim, keepdim = _R._numpy_keywords("special_logsumexp", dim, keepdim, aliases, _R._UNSET)
    return _R.logsumexp(input, dim, keepdim)


def softmax(input, dim=_R._UNSET, dtype=None, **aliases):
    return _R.softmax(input, _R._axis_alias("special_softmax", dim, aliases, _R._UNSET), dtype=dtype)


def log_softmax(input, dim=_R._UNSET, dtype=None, **aliases):
    return _R.log_softmax(input, _R._axis_alias("special_log_softmax", dim, aliases, _R._UNSET), dtype=dtype)
