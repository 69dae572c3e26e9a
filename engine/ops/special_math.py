"""Special functions (gamma family, inverse error function, modified Bessel functions, Hurwitz zeta):
NumPy kernels written from published series, and their autograd Functions with torch's node names.

Every kernel computes in float64 and is cast back to the input's dtype; edge values (poles, infinities,
NaN) follow torch's, including the few where torch's answer is an artifact of its own arithmetic."""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E

_EULER = 0.57721566490153286061  # Euler–Mascheroni constant
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _bernoulli_even(count: int) -> list[float]:
    """B_2, B_4, ..., B_2count, exactly (Akiyama–Tanigawa algorithm) and then rounded to floats."""
    a, out = [], []
    for m in range(2 * count + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        if m >= 2 and m % 2 == 0:
            out.append(float(a[0]))
    return out


_B2K = _bernoulli_even(13)


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _ieee(kernel):
    """Run a kernel without NumPy's floating-point warnings: its infinities and NaNs are intended."""
    @functools.wraps(kernel)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return kernel(*args)

    return quiet


def _sinpi(x):
    """sin(pi x), exact zeros at the integers: the argument is reduced exactly to [-1/2, 1/2] first."""
    r = x - 2.0 * np.round(0.5 * x)  # in [-1, 1], exact
    r = np.where(r > 0.5, 1.0 - r, np.where(r < -0.5, -1.0 - r, r))  # sin(pi r) = sin(pi (+-1 - r))
    return np.sin(np.pi * r)


def _cospi(x):
    """cos(pi x) = sin(pi (1/2 - |r|)), exact zeros at the half-integers."""
    r = x - 2.0 * np.round(0.5 * x)
    return np.sin(np.pi * (0.5 - np.abs(r)))


def _is_nonpositive_int(x):
    return (x <= 0) & (x == np.floor(x))


# ----------------------------------------------------------------------------- Hurwitz zeta
def _hurwitz_pos(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for s > 1, q > 0: Euler–Maclaurin summation (DLMF 25.11.5 with the
    sum shifted by N = 9 terms and 12 Bernoulli corrections; each correction is < 1e-17 of the sum)."""
    s, q = np.broadcast_arrays(_f64(s), _f64(q))
    total = np.zeros(s.shape)
    for k in range(9):
        total += (q + k) ** -s
    a = q + 9.0
    a_s = a**-s
    total += a ** (1.0 - s) / (s - 1.0) + 0.5 * a_s  # not a * a_s, which underflows first
    term = s * a_s / a  # s (s+1) ... (s+2j-2) a^(-s-2j+1), j = 1
    for j, b in enumerate(_B2K[:12], start=1):
        total += b / math.factorial(2 * j) * term
        term = term * (s + 2 * j - 1) * (s + 2 * j) / (a * a)
    return total


# ζ(k, 2) = ζ(k) - 1 for k = 2..31: the coefficients of lgamma's series about 1 and 2
_ZETA_M1 = _hurwitz_pos(np.arange(2.0, 32.0), 2.0)


def _cot_derivative_polys(n_max: int) -> list[list[int]]:
    """P_n with d^n/dz^n cot(z) = P_n(cot z): P_0(c) = c, P_(n+1)(c) = -(1 + c^2) P_n'(c)."""
    polys = [[0, 1]]  # coefficients, lowest power first
    for _ in range(n_max):
        p = polys[-1]
        d = [k * p[k] for k in range(1, len(p))]
        nxt = [0] * (len(d) + 2)
        for k, c in enumerate(d):
            nxt[k] -= c
            nxt[k + 2] -= c
        polys.append(nxt)
    return polys


def _polygamma_reflected(n: int, x):
    """psi^(n)(x) for x < 0 (not an integer), by differentiating the reflection formula
    psi(1 - x) - psi(x) = pi cot(pi x) n times:
    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot pi x)."""
    c = _cospi(x) / _sinpi(x)
    poly = _cot_derivative_polys(n)[n]
    acc = np.zeros_like(c)
    for coef in reversed(poly):
        acc = acc * c + float(coef)
    return (-1.0) ** n * _polygamma_pos(n, 1.0 - x) - math.pi ** (n + 1) * acc


def _polygamma_pos(n: int, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1, x > 0."""
    return (-1.0) ** (n + 1) * math.factorial(n) * _hurwitz_pos(n + 1.0, x)


@_ieee
def _zeta_np(s, q):
    """torch.special.zeta(s, q): Hurwitz zeta, NaN for s < 1, inf at s = 1 and at q a non-positive integer;
    for q < 0 only integer s are defined (the sum then runs through the reflection formula)."""
    s, q = np.broadcast_arrays(_f64(s), _f64(q))
    ok = (s > 1) & (q > 0) & np.isfinite(s) & np.isfinite(q)
    out = np.full(s.shape, np.nan)
    out[ok] = _hurwitz_pos(s[ok], q[ok])
    out[(s == np.inf) & (q > 0)] = (q ** -s)[(s == np.inf) & (q > 0)]  # 1 at q = 1, else 0 or inf
    neg = (s > 1) & (q < 0) & (s == np.floor(s)) & ~_is_nonpositive_int(q) & np.isfinite(s)
    for k in np.unique(s[neg]):  # zeta(k, q) = (-1)^k psi^(k-1)(q) / (k-1)!
        m = neg & (s == k)
        out[m] = (-1.0) ** k * _polygamma_reflected(int(k) - 1, q[m]) / math.factorial(int(k) - 1)
    out[(s == 1) & ~np.isnan(q)] = np.inf
    out[(s > 1) & _is_nonpositive_int(q)] = np.inf  # also q = -inf
    return out


# ----------------------------------------------------------------------------- lgamma
def _lgamma_series(z, about_two: bool):
    """lgamma(2 + z) = (1 - gamma) z + sum_k>=2 (-1)^k (zeta(k) - 1) z^k / k (A&S 6.1.33 plus log(1 + z)),
    for |z| <= 1/2; lgamma(1 + z) is that minus log1p(z)."""
    acc = np.zeros_like(z)
    for k in range(31, 1, -1):
        acc = (acc + (-1.0) ** k * _ZETA_M1[k - 2] / k) * z
    out = (acc + (1.0 - _EULER)) * z
    return out if about_two else out - np.log1p(z)


def _lgamma_stirling(x):
    """Stirling's series for x >= 8 (A&S 6.1.40), 9 terms: the truncation is < 1e-17 relative."""
    inv = 1.0 / x
    inv2 = inv * inv
    acc = np.zeros_like(x)
    for k in range(9, 0, -1):
        acc = acc * inv2 + _B2K[k - 1] / (2 * k * (2 * k - 1))
    return (x - 0.5) * np.log(x) - x + _HALF_LOG_2PI + acc * inv


def _lgamma_pos(x):
    """log|Gamma(x)| for x > 0: series about 1 or 2 (where its zeros are), below 8 the recurrence down to
    [1.5, 2.5), Stirling above."""
    out = np.empty_like(x)
    big = x >= 8
    out[big] = _lgamma_stirling(x[big])
    tiny = x < 0.5
    out[tiny] = _lgamma_series(x[tiny], False) - np.log(x[tiny])  # lgamma(x) = lgamma(1 + x) - log x
    near1 = (x >= 0.5) & (x < 1.5)
    out[near1] = _lgamma_series(x[near1] - 1.0, False)
    mid = (x >= 1.5) & (x < 8)
    y = x[mid]
    m = np.floor(y - 1.5)  # lgamma(y) = lgamma(y - m) + log((y - 1) ... (y - m))
    r = y - m
    prod = np.ones_like(y)
    for j in range(6):
        prod = np.where(m > j, prod * (r + j), prod)
    out[mid] = _lgamma_series(r - 2.0, True) + np.log(prod)
    return out


@_ieee
def _lgamma_np(a):
    x = _f64(a)
    out = np.full(x.shape, np.inf)  # poles: 0, negative integers, +-inf
    pos = (x > 0) & (x < np.inf)
    out[pos] = _lgamma_pos(x[pos])
    neg = (x < 0) & ~_is_nonpositive_int(x)  # reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x)
    xn = x[neg]
    out[neg] = np.log(np.pi / np.abs(_sinpi(xn))) - _lgamma_pos(1.0 - xn)
    out[np.isnan(x)] = np.nan
    return out.astype(a.dtype, copy=False)


# ----------------------------------------------------------------------------- digamma and polygamma
def _digamma_pos(x):
    """psi(x), x > 0: recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series
    psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k) (A&S 6.3.18)."""
    shift = np.zeros_like(x)
    y = x.copy()
    for _ in range(10):
        low = y < 10
        if not low.any():
            break
        shift = np.where(low, shift + 1.0 / y, shift)
        y = np.where(low, y + 1.0, y)
    inv2 = 1.0 / (y * y)
    acc = np.zeros_like(y)
    for k in range(8, 0, -1):
        acc = acc * inv2 + _B2K[k - 1] / (2 * k)
    return np.log(y) - 0.5 / y - acc * inv2 - shift


# psi's positive zero x0 = 1.46163214496836234126... as hi + lo, and the Taylor coefficients psi^(k)(x0) / k!
_PSI_ROOT_HI, _PSI_ROOT_LO = 1.4616321449683622, 9.549995429965697e-17
_PSI_ROOT_TAYLOR = [_polygamma_pos(k, np.array(_PSI_ROOT_HI)) / math.factorial(k) for k in range(1, 31)]


def _digamma_near_root(x):
    """psi(x) for |x - x0| <= 0.4 as its Taylor series about the zero x0 (ratio <= 0.4/1.46 to the pole at 0):
    full relative accuracy where the recurrence would cancel to an absolute 1e-16."""
    d = (x - _PSI_ROOT_HI) - _PSI_ROOT_LO
    acc = np.zeros_like(d)
    for c in reversed(_PSI_ROOT_TAYLOR):
        acc = (acc + c) * d
    return acc


@_ieee
def _digamma_np(a):
    x = _f64(a)
    out = np.full(x.shape, np.nan)  # negative integers and -inf
    pos = x > 0
    out[pos] = _digamma_pos(x[pos])
    root = np.abs(x - _PSI_ROOT_HI) <= 0.4
    out[root] = _digamma_near_root(x[root])
    neg = (x < 0) & ~_is_nonpositive_int(x)
    xn = x[neg]
    out[neg] = _digamma_pos(1.0 - xn) - np.pi * _cospi(xn) / _sinpi(xn)
    zero = x == 0
    out[zero] = np.copysign(np.inf, -x[zero])  # torch: -inf at +0, +inf at -0
    return out.astype(a.dtype, copy=False)


@_ieee
def _polygamma_np(n: int, a):
    if n == 0:
        return _digamma_np(a)
    x = _f64(a)
    sign = (-1.0) ** (n + 1)
    out = np.full(x.shape, np.nan)
    pos = (x > 0) & (x < np.inf)
    out[pos] = _polygamma_pos(n, x[pos])
    neg = (x < 0) & ~_is_nonpositive_int(x)
    out[neg] = _polygamma_reflected(n, x[neg])
    pole = _is_nonpositive_int(x)
    out[pole] = sign * np.inf
    if n == 1:
        # torch's trigamma reflects every x < 0 with sin(pi x) rounded in the input's precision (float32 for
        # float16/bfloat16), which is not 0 at a negative integer (a huge finite value there instead of inf)
        # and drifts from the exact value near poles and for large |x|: reproduced so results compare equal
        refl = (x < 0) & (x > -np.inf)
        prec = np.float64 if a.dtype == np.float64 else np.float32
        sin_pi_x = np.sin(prec(np.pi) * np.asarray(a)[refl].astype(prec)).astype(np.float64)
        out[refl] = np.pi**2 / sin_pi_x**2 - _polygamma_pos(1, 1.0 - x[refl])
        out[x == -np.inf] = np.nan
        out[x == np.inf] = 0.0
    return out.astype(a.dtype, copy=False)


# ----------------------------------------------------------------------------- erfinv and ndtri
def _erfc_np(x):
    return E._ERFC(x).astype(np.float64)  # libm's erfc, accurate relative to its (tiny) value


def _inv_erf(y, c):
    """x >= 0 with erf(x) = y, given y >= 0 and c = 1 - y exactly (c carries the digits y loses near 1).

    Start: M. Giles, "Approximating the erfinv function", GPU Computing Gems (2011), single-precision
    polynomials in w = -log((1 - y)(1 + y)), good to a few 1e-7 for w < 16; further out, the asymptotic
    erfc(x) ~ exp(-x^2) / (x sqrt(pi)) solved for x. Then Newton steps: on erf(x) - y for y < 1/2, and on
    log(erfc(x)) - log(c) = log(erfcx(x)) - x^2 - log(c) above, which keeps relative accuracy in the tail
    and is nearly linear in x^2 (so converges from the coarse asymptotic start too)."""
    w = -np.log(c * (2.0 - c))
    lo = w < 5.0
    wl, wh = w - 2.5, np.sqrt(np.where(lo, 5.0, w)) - 3.0
    pl = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
          -0.00417768164, 0.246640727, 1.50140941)
    ph = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
          0.00943887047, 1.00167406, 2.83297682)
    p_lo, p_hi = np.zeros_like(w), np.zeros_like(w)
    for a, b in zip(pl, ph):
        p_lo, p_hi = p_lo * wl + a, p_hi * wh + b
    x = np.where(lo, p_lo, p_hi) * y
    log_c = np.log(c)
    far = w >= 16
    x0 = np.sqrt(-log_c[far])
    x[far] = np.sqrt(-log_c[far] - np.log(x0 * math.sqrt(math.pi)))
    small = y < 0.5
    xs, ys = x[small], y[small]
    for _ in range(2):
        xs = xs - (E._erf_np(xs) - ys) / ((2.0 / math.sqrt(math.pi)) * np.exp(-xs * xs))
    x[small] = xs
    xt, log_ct = x[~small], log_c[~small]
    for _ in range(3):
        ex = _erfcx_pos(xt)
        xt = xt + (np.log(ex) - xt * xt - log_ct) * (0.5 * math.sqrt(math.pi)) * ex
    x[~small] = xt
    return x


@_ieee
def _erfinv_np(a):
    y = _f64(a)
    ay = np.abs(y)
    out = np.full(y.shape, np.nan)
    inside = ay < 1
    out[inside] = np.copysign(_inv_erf(ay[inside], 1.0 - ay[inside]), y[inside])
    out[ay == 1] = np.copysign(np.inf, y[ay == 1])
    return out.astype(a.dtype, copy=False)


@_ieee
def _ndtri_np(a):
    """The standard normal quantile, sqrt(2) erfinv(2p - 1), with c = 2 min(p, 1 - p) exact in the tails."""
    p = _f64(a)
    out = np.full(p.shape, np.nan)
    inside = (p > 0) & (p < 1)
    pi = p[inside]
    c = np.where(pi < 0.5, 2.0 * pi, 2.0 - 2.0 * pi)
    out[inside] = np.sign(pi - 0.5) * math.sqrt(2.0) * _inv_erf(np.abs(2.0 * pi - 1.0), c)
    out[p == 0] = -np.inf
    out[p == 1] = np.inf
    return out.astype(a.dtype, copy=False)


# ----------------------------------------------------------------------------- erfcx, log_ndtr, entr
def _exp_x2(x):
    """exp(x^2) with x^2 split into an exact part (Veltkamp: hi has 26 bits) and a small remainder."""
    t = x * 134217729.0
    hi = t - (t - x)
    lo = x - hi
    return np.exp(hi * hi) * np.exp(lo * (2.0 * hi + lo))


def _erfcx_pos(x):
    """erfcx(x) = exp(x^2) erfc(x) for x >= 0: directly below 3, above by Laplace's continued fraction
    erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))) (A&S 7.1.14), 60 levels."""
    out = np.empty_like(x)
    near = x < 3
    out[near] = _exp_x2(x[near]) * _erfc_np(x[near])
    xf = x[~near]
    f = xf.copy()
    for k in range(60, 0, -1):
        f = xf + (0.5 * k) / f
    out[~near] = 1.0 / (math.sqrt(math.pi) * f)
    return out


@_ieee
def _erfcx_np(a):
    x = _f64(a)
    out = np.empty(x.shape)
    pos = x >= 0
    out[pos] = _erfcx_pos(x[pos])
    xn = x[~pos]  # erfc(x) = 2 - erfc(-x): exp(x^2) erfc(x) = 2 exp(x^2) - erfcx(-x)
    out[~pos] = 2.0 * _exp_x2(xn) - _erfcx_pos(-xn)
    out[np.isnan(x)] = np.nan
    out[x == -np.inf] = np.inf
    return out.astype(a.dtype, copy=False)


@_ieee
def _log_ndtr_np(a):
    """log Phi(x): log1p(-Phi(-x)) for x >= 0; for x < 0, log(erfcx(t) / 2) - t^2 with t = -x/sqrt(2), which
    stays finite far past where Phi underflows."""
    x = _f64(a)
    out = np.empty(x.shape)
    pos = x >= 0
    out[pos] = np.log1p(-0.5 * _erfc_np(x[pos] * math.sqrt(0.5)))
    t = -x[~pos] * math.sqrt(0.5)
    out[~pos] = np.log(0.5 * _erfcx_pos(t)) - t * t
    out[np.isnan(x)] = np.nan
    return out.astype(a.dtype, copy=False)


@_ieee
def _entr_np(a):
    x = _f64(a)
    out = np.where(x > 0, -x * np.log(x), np.where(x == 0, 0.0, -np.inf))
    out[np.isnan(x)] = np.nan
    return out.astype(a.dtype, copy=False)


# ----------------------------------------------------------------------------- modified Bessel I0, I1
_SERIES_MAX = 20.0  # |x| at or below: the power series (all terms positive); above: the asymptotic series
_I_TERMS = 42


def _bessel_i_series(nu: int, x):
    """I_nu(x) for nu in (0, 1): (x/2)^nu sum_k (x^2/4)^k / (k! (k + nu)!) (A&S 9.6.10)."""
    t = 0.25 * x * x
    acc = np.zeros_like(x)
    for k in range(_I_TERMS, -1, -1):
        acc = acc * t + 1.0 / (math.factorial(k) * math.factorial(k + nu))
    return acc * (0.5 * x) ** nu


def _bessel_i_asymptotic(nu: int, x):
    """sqrt(2 pi x) exp(-x) I_nu(x) ~ sum_k (-1)^k a_k(nu) / x^k, a_k = prod_j<=k (4 nu^2 - (2j - 1)^2) /
    (k! 8^k) (A&S 9.7.1), for x > 20 where 30 terms leave an error below 1e-17."""
    acc = np.zeros_like(x)
    coefs, a = [1.0], 1.0
    for k in range(1, 31):
        a *= -(4 * nu * nu - (2 * k - 1) ** 2) / (k * 8.0)
        coefs.append(a)
    inv = 1.0 / x
    for c in reversed(coefs):
        acc = acc * inv + c
    return acc / (math.sqrt(2.0 * math.pi) * np.sqrt(x))  # 2 pi x alone overflows near 1e308


@_ieee
def _bessel_i(nu: int, a, scaled: bool):
    """I_nu(x), or exp(-|x|) I_nu(x) when scaled; I_0 is even and I_1 odd."""
    x = _f64(a)
    ax = np.abs(x)
    out = np.empty(x.shape)
    small = ax <= _SERIES_MAX
    s = _bessel_i_series(nu, ax[small])
    out[small] = s * np.exp(-ax[small]) if scaled else s
    big = ~small
    s = _bessel_i_asymptotic(nu, ax[big])
    out[big] = s if scaled else np.exp(ax[big]) * s  # inf * 0 = NaN at +-inf, as torch's
    if nu == 1:
        out = np.where(x < 0, -out, out)  # I1(-0) = +0, as torch
    out[np.isnan(x)] = np.nan
    return out.astype(a.dtype, copy=False)


# ----------------------------------------------------------------------------- autograd Functions
_SQRT_PI = math.sqrt(math.pi)


def _safe_nonzero(x: Tensor) -> Tensor:
    return E.where(x == 0, 1.0, x)


def _i1_grad(g, x, out):
    """I1' = I0 - I1/x, 1/2 at 0."""
    xs = _safe_nonzero(x)
    return g * E.where(x == 0, 0.5, i0(x) - i1(xs) / xs)


def _i1e_grad(g, x, out):
    """(e^-|x| I1)' = i0e - i1e (sgn x + 1/x), 1/2 at 0."""
    xs = _safe_nonzero(x)
    return g * E.where(x == 0, 0.5, i0e(x) - i1e(xs) * (x.sign() + xs.reciprocal()))


Lgamma, lgamma = E._unary("Lgamma", _lgamma_np, lambda g, x, out: g * digamma(x))
Digamma, digamma = E._unary("Digamma", _digamma_np, lambda g, x, out: g * polygamma(1, x))
Erfinv, erfinv = E._unary("Erfinv", _erfinv_np, lambda g, x, out: g * (_SQRT_PI / 2) * (out * out).exp(),
                          save_out=True)
I0, i0 = E._unary("I0", lambda a: _bessel_i(0, a, False), lambda g, x, out: g * i1(x))
I0e, i0e = E._unary("I0e", lambda a: _bessel_i(0, a, True),
                    lambda g, x, out: g * (i1e(x) - x.sign() * i0e(x)), node="SpecialI0EBackward0")
I1, i1 = E._unary("I1", lambda a: _bessel_i(1, a, False), _i1_grad, node="SpecialI1Backward0")
I1e, i1e = E._unary("I1e", lambda a: _bessel_i(1, a, True), _i1e_grad, node="SpecialI1EBackward0")
Ndtri, ndtri = E._unary("Ndtri", _ndtri_np,
                        lambda g, x, out: g * math.sqrt(2 * math.pi) * (out * out / 2).exp(),
                        save_out=True, node="SpecialNdtriBackward0")
Erfcx, erfcx = E._unary("Erfcx", _erfcx_np, lambda g, x, out: g * (x * erfcx(x) * 2 - 2 / _SQRT_PI),
                        node="SpecialErfcxBackward0")
# d/dx log Phi(x) = phi(x) / Phi(x) = sqrt(2/pi) / erfcx(-x/sqrt(2)), finite where Phi underflows
LogNdtr, log_ndtr = E._unary("LogNdtr", _log_ndtr_np,
                             lambda g, x, out: g * math.sqrt(2 / math.pi) / erfcx(x * -math.sqrt(0.5)),
                             node="SpecialLogNdtrBackward0")
Entr, entr = E._unary("Entr", _entr_np, lambda g, x, out: g * -(x.log() + 1), node="SpecialEntrBackward0")


class _WithOrder(Function):
    """A unary function with an integer order k (polygamma's n, mvlgamma's p): the subclass gives the kernel
    kernel(k, array) and the derivative derivative(k, x) in Tensor ops."""

    _raw = True

    @classmethod
    def forward(cls, ctx, x, k):  # classmethod: without a graph ctx is a stand-in
        arr, _ = E._as_float(x._arr, x._dtype)
        ctx.save_for_backward(x)
        ctx.k = k
        return cls.kernel(k, arr)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.derivative(ctx.k, x), None


class Polygamma(_WithOrder):
    """psi^(n)(x), the n-th derivative of digamma; its derivative is psi^(n+1)."""

    kernel = staticmethod(_polygamma_np)
    derivative = staticmethod(lambda n, x: polygamma(n + 1, x))


@_ieee
def _mvlgamma_np(p: int, a):
    out = sum(_lgamma_np(_f64(a) - 0.5 * j) for j in range(p)) + math.log(math.pi) * p * (p - 1) / 4
    return out.astype(a.dtype, copy=False)


class Mvlgamma(_WithOrder):
    """The multivariate log-gamma, log(pi) p (p - 1) / 4 + sum_j<p lgamma(x - j/2); derivative sum digamma."""

    kernel = staticmethod(_mvlgamma_np)
    derivative = staticmethod(lambda p, x: sum(digamma(x - 0.5 * j) for j in range(p)))


PolygammaBackward0 = torch_node(Polygamma, "PolygammaBackward0")
PolygammaBackward1 = torch_node(Polygamma, "PolygammaBackward1")  # the in-place form, x.polygamma_(n)
MvlgammaBackward0 = torch_node(Mvlgamma, "MvlgammaBackward0")


def polygamma(n: int, input: Tensor, _node=PolygammaBackward0) -> Tensor:
    """The n-th derivative of the digamma function (n = 0 is digamma itself)."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return _node.apply(input, int(n))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension p."""
    if input._dtype is D.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return MvlgammaBackward0.apply(input, int(p))


def _float_pair(input, other):
    """Both operands of a binary special function as tensors of its (floating) result dtype; a scalar becomes
    a 0-d tensor."""
    dt = D.result_type(input, other)
    if not dt.is_floating_point:
        dt = D.get_default_dtype()
    return tuple((t if E._is_t(t) else _wrap_array(np.asarray(t))).to(dt) for t in (input, other))


class Xlog1py(Function):
    """x log1p(y), 0 where x == 0 unless y is NaN. Gradients as torch's: xlog1py(g, y) for x (g log1p(y), 0
    where g is), zeroed where x == 0 and y <= -1; g x / (1 + y) for y."""

    _raw = True

    @staticmethod
    def forward(ctx, x, y):
        X, Y = x._arr, y._arr
        ctx.save_for_backward(x, y)
        with np.errstate(all="ignore"):
            out = X * np.log1p(Y)
        return np.where((X == 0) & ~np.isnan(Y), 0, out).astype(out.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nig = ctx.needs_input_grad
        gx = E.where((x == 0) & (y <= -1), 0.0, xlog1py(g, y)) if nig[0] else None
        gy = g * x / (y + 1) if nig[1] else None
        return gx, gy


# both tensors / a scalar x / a scalar y, as torch's three overloads
Xlog1pyBackward = [torch_node(Xlog1py, f"SpecialXlog1PyBackward{i}") for i in range(3)]
Xlog1pyBackward[1]._torch_edges, Xlog1pyBackward[2]._torch_edges = (1,), (0,)  # no edge for a number operand


def xlog1py(input, other) -> Tensor:
    """x * log1p(y), and 0 where x == 0 (unless y is NaN); integer inputs give floats."""
    node = Xlog1pyBackward[0 if E._is_t(input) and E._is_t(other) else 1 if E._is_t(other) else 2]
    return node.apply(*_float_pair(input, other))


class Zeta(Function):
    """The Hurwitz zeta function zeta(x, q); torch differentiates it in q only: -x zeta(x + 1, q)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, q):
        ctx.save_for_backward(x, q)
        return _zeta_np(x._arr, q._arr).astype(x._arr.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, q = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        return None, -g * x * zeta(x + 1, q)


ZetaBackward = [torch_node(Zeta, f"SpecialZetaBackward{i}") for i in range(3)]
ZetaBackward[1]._torch_edges, ZetaBackward[2]._torch_edges = (1,), (0,)  # no edge for a number operand


def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function sum_k (other + k)^-input."""
    node = ZetaBackward[0 if E._is_t(input) and E._is_t(other) else 1 if E._is_t(other) else 2]
    return node.apply(*_float_pair(input, other))


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, erfc(-x / sqrt(2)) / 2 (accurate far into the lower tail)."""
    return E.erfc(input * -math.sqrt(0.5)) * 0.5


# Tensor methods: x.polygamma(n) and the in-place forms
def tensor_polygamma(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)


lgamma_ = E._make_inplace(lgamma, "lgamma_")
digamma_ = E._make_inplace(digamma, "digamma_")
erfinv_ = E._make_inplace(erfinv, "erfinv_")
i0_ = E._make_inplace(i0, "i0_")
polygamma_ = E._make_inplace(lambda self, n: polygamma(n, self, PolygammaBackward1), "polygamma_")
mvlgamma_ = E._make_inplace(mvlgamma, "mvlgamma_")
