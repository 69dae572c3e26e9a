"""Flatten and Unflatten (views when the input allows)."""

from __future__ import annotations

from .module import Module


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                f"unflattened_size must be a tuple of ints, but found type {type(unflattened_size).__name__}"
            )
        for i, n in enumerate(unflattened_size):
            if not isinstance(n, int):
                raise TypeError(
                    f"unflattened_size must be tuple of ints, but found element of type {type(n).__name__} "
                    f"at pos {i}"
                )
        self.dim = dim
        self.unflattened_size = unflattened_size  # kept as given (list or tuple), like PyTorch

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
