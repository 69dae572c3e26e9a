"""Synthetic toy datasets: 2-D classification shapes, a 1-D sine regression and a sequence task."""
from __future__ import annotations

import numpy as np

from app.datasets.split import Samples


def _class_counts(n: int, k: int) -> np.ndarray:
    """Split n samples over k classes as evenly as possible (the first n % k get one more)."""
    counts = np.full(k, n // k)
    counts[: n % k] += 1
    return counts


def _labels(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts).astype(np.int64)


def _points(xy: list[np.ndarray], noise: float, rng: np.random.Generator) -> np.ndarray:
    x = np.concatenate(xy).astype(np.float64)
    return (x + noise * rng.standard_normal(x.shape)).astype(np.float32)


def spirals(opts: dict, rng: np.random.Generator) -> Samples:
    n, k, noise, turns = opts["n_samples"], opts["n_classes"], opts["noise"], opts["turns"]
    counts = _class_counts(n, k)
    arms = []
    for c, m in enumerate(counts):
        t = np.linspace(0.0, 1.0, m) if m > 1 else np.zeros(m)
        radius = 0.1 + 0.9 * t  # start slightly off the centre so the arms do not all meet in a point
        angle = 2 * np.pi * (turns * t + c / k)
        arms.append(np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1))
    return Samples(_points(arms, noise, rng), _labels(counts), "classification", "flat",
                   tuple(f"arm {c}" for c in range(k)),
                   f"{k} interleaved spiral arms, {turns} turns, {n} points in 2-D.")


def moons(opts: dict, rng: np.random.Generator) -> Samples:
    n, noise = opts["n_samples"], opts["noise"]
    counts = _class_counts(n, 2)
    a = np.linspace(0.0, np.pi, counts[0])
    b = np.linspace(0.0, np.pi, counts[1])
    upper = np.stack([np.cos(a), np.sin(a)], axis=1)
    lower = np.stack([1.0 - np.cos(b), 0.5 - np.sin(b)], axis=1)
    return Samples(_points([upper, lower], noise, rng), _labels(counts), "classification", "flat",
                   ("upper moon", "lower moon"), f"Two interleaving half circles, {n} points in 2-D.")


def circles(opts: dict, rng: np.random.Generator) -> Samples:
    n, noise, factor = opts["n_samples"], opts["noise"], opts["factor"]
    counts = _class_counts(n, 2)
    rings = []
    for radius, m in zip((1.0, factor), counts):
        angle = np.linspace(0.0, 2 * np.pi, m, endpoint=False)
        rings.append(radius * np.stack([np.cos(angle), np.sin(angle)], axis=1))
    return Samples(_points(rings, noise, rng), _labels(counts), "classification", "flat",
                   ("outer circle", "inner circle"),
                   f"A small circle inside a large one (radius ratio {factor}), {n} points in 2-D.")


def xor(opts: dict, rng: np.random.Generator) -> Samples:
    n, noise = opts["n_samples"], opts["noise"]
    # One quarter of the points per quadrant keeps the two classes balanced exactly.
    per_quadrant = _class_counts(n, 4)
    quadrants = []
    for m, (sx, sy) in zip(per_quadrant, ((1, 1), (-1, -1), (1, -1), (-1, 1))):
        quadrants.append(rng.uniform(0.05, 1.0, size=(m, 2)) * np.array([sx, sy]))
    y = np.repeat(np.array([0, 0, 1, 1]), per_quadrant).astype(np.int64)
    return Samples(_points(quadrants, noise, rng), y, "classification", "flat",
                   ("same sign", "opposite sign"),
                   f"XOR: the class is whether x and y have the same sign; {n} points in 2-D.")


def blobs(opts: dict, rng: np.random.Generator) -> Samples:
    n, k, noise = opts["n_samples"], opts["n_classes"], opts["noise"]
    counts = _class_counts(n, k)
    # Centres evenly spaced on a circle of radius 3, so separation is controlled by `noise` alone.
    angle = 2 * np.pi * np.arange(k) / k
    centres = 3.0 * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    groups = [np.repeat(centres[c : c + 1], m, axis=0) for c, m in enumerate(counts)]
    return Samples(_points(groups, noise, rng), _labels(counts), "classification", "flat",
                   tuple(f"blob {c}" for c in range(k)),
                   f"{k} Gaussian blobs with standard deviation {noise}, {n} points in 2-D.")


def sine(opts: dict, rng: np.random.Generator) -> Samples:
    n, noise, freq = opts["n_samples"], opts["noise"], opts["frequency"]
    x = rng.uniform(-np.pi, np.pi, size=(n, 1))
    y = np.sin(freq * x) + noise * rng.standard_normal((n, 1))
    return Samples(x.astype(np.float32), y.astype(np.float32), "regression", "flat", (),
                   f"Regression y = sin({freq}·x) + noise({noise}) for x in [-π, π]; {n} samples.")


def sequence(opts: dict, rng: np.random.Generator) -> Samples:
    n, k, noise, t_len = opts["n_samples"], opts["n_classes"], opts["noise"], opts["seq_len"]
    counts = _class_counts(n, k)
    y = _labels(counts)
    cycles = (y + 1).astype(np.float64)[:, None]  # class c completes c + 1 cycles over the sequence
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, 1))
    amplitude = rng.uniform(0.7, 1.3, size=(n, 1))
    t = np.arange(t_len)[None, :] / t_len
    x = amplitude * np.sin(2 * np.pi * cycles * t + phase) + noise * rng.standard_normal((n, t_len))
    return Samples(x[:, :, None].astype(np.float32), y, "classification", "sequence",
                   tuple(f"{c + 1} cycle{'s' if c else ''}" for c in range(k)),
                   f"Sequence classification: which of {k} frequencies (1..{k} cycles per {t_len} steps) "
                   f"a noisy sine with random phase and amplitude has. Input (seq_len, 1).")


SHAPE_NAMES = ("circle", "square", "triangle", "cross")


def shapes(opts: dict, rng: np.random.Generator) -> Samples:
    """Colour images (3, size, size) of one shape each on a plain background; the class is the shape.
    A small stand-in for CIFAR-10 that is generated, so the ResNet example trains anywhere."""
    n, size, noise = opts["n_samples"], opts["size"], opts["noise"]
    counts = _class_counts(n, len(SHAPE_NAMES))
    y = _labels(counts)
    r = (rng.uniform(0.18, 0.3, n) * size)[:, None, None]
    cx = (rng.uniform(0.35, 0.65, n) * size)[:, None, None]
    cy = (rng.uniform(0.35, 0.65, n) * size)[:, None, None]
    fg, bg = rng.uniform(0.45, 1.0, (n, 3)), rng.uniform(0.0, 0.4, (n, 3))
    grid = np.arange(size) + 0.5
    dx, dy = grid[None, None, :] - cx, grid[None, :, None] - cy
    ax, ay = np.abs(dx), np.abs(dy)
    masks = (dx ** 2 + dy ** 2 <= r ** 2,
             np.maximum(ax, ay) <= 0.8 * r,
             (dy >= -r) & (dy <= 0.8 * r) & (ax <= 0.6 * (dy + r)),
             ((ax <= 0.25 * r) & (ay <= r)) | ((ay <= 0.25 * r) & (ax <= r)))
    mask = np.select([(y == c)[:, None, None] for c in range(len(masks))], masks)
    x = bg[:, :, None, None] + (fg - bg)[:, :, None, None] * mask[:, None]
    x = x + noise * rng.standard_normal(x.shape)
    return Samples(x.astype(np.float32), y, "classification", "image", SHAPE_NAMES,
                   f"{n} colour images (3, {size}, {size}), one shape each: {', '.join(SHAPE_NAMES)}.")
