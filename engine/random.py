"""Random number generation: `Generator` over NumPy's PCG64, a default CPU generator and `manual_seed`."""
from __future__ import annotations

import json

import numpy as np

from . import dtypes as D


class Generator:
    """A seeded source of random numbers (PyTorch's torch.Generator). State round-trips bit for bit."""

    def __init__(self, device="cpu"):
        from .backend import as_device

        self.device = as_device(device)
        self._initial_seed = 67280421310721
        self._np = np.random.Generator(np.random.PCG64(self._initial_seed))

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:
            seed += 1 << 64
        self._initial_seed = seed
        self._np = np.random.Generator(np.random.PCG64(seed))
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy) % (1 << 63)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._initial_seed

    def get_state(self):
        from .ops.creation import tensor

        blob = json.dumps({"seed": self._initial_seed, "bit_generator": self._np.bit_generator.state},
                          sort_keys=True).encode()
        return tensor(np.frombuffer(blob, dtype=np.uint8).copy())

    def set_state(self, state) -> None:
        arr = state.numpy() if hasattr(state, "numpy") else np.asarray(state)
        try:
            d = json.loads(bytes(np.asarray(arr, dtype=np.uint8)).decode())
            bg = np.random.PCG64()
            bg.state = d["bit_generator"]
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"set_state: not a Wiregrad generator state ({e})") from None
        self._initial_seed = d["seed"]
        self._np = np.random.Generator(bg)

    # samplers used by the factories; they return NumPy arrays (a CUDA generator would return CuPy ones)
    def uniform(self, shape, np_dtype):
        if np.dtype(np_dtype) in D.LOW_FLOATS:  # NumPy draws float32 and float64 only
            return self._np.random(shape, dtype=np.float32).astype(np_dtype)
        return self._np.random(shape, dtype=np_dtype)

    def normal(self, shape, np_dtype):
        if np.dtype(np_dtype) in D.LOW_FLOATS:
            return self._np.standard_normal(shape, dtype=np.float32).astype(np_dtype)
        return self._np.standard_normal(shape, dtype=np_dtype)

    def integers(self, low, high, shape, np_dtype):
        return self._np.integers(low, high, size=shape, dtype=np_dtype)

    def permutation(self, n: int):
        return self._np.permutation(n).astype(np.int64)


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    default_generator.manual_seed(seed)
    from . import cuda

    cuda.manual_seed_all(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)
