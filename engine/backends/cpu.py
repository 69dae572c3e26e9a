"""engine.backends.cpu: what the CPU offers, in torch's words."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """ "AVX512", "AVX2" or "DEFAULT": the widest SIMD level NumPy's compiled loops dispatch to here."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features
    if features.get("AVX512F") and features.get("AVX512_SKX"):
        return "AVX512"
    if features.get("AVX2"):
        return "AVX2"
    return "DEFAULT"
