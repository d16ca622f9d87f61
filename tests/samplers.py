"""Input samplers shared by the first- and second-derivative sweeps: values inside each
function's smooth domain, away from kinks and ties, and well-conditioned matrices."""

from __future__ import annotations

import zlib

import numpy as np


def rng_for(*key) -> np.random.Generator:
    """A generator seeded from the test case's identity, so each case is reproducible."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def as_f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def real(lo=-2.0, hi=2.0):
    def sample(rng, shape):
        return as_f64(rng.uniform(lo, hi, size=shape))

    return sample


def away0(lo=0.3, hi=2.0):
    """Magnitudes in [lo, hi] with random signs: away from the kink at 0."""

    def sample(rng, shape):
        mag = rng.uniform(lo, hi, size=shape)
        sgn = rng.choice([-1.0, 1.0], size=shape)
        return as_f64(mag * sgn)

    return sample


def avoiding(points, margin=0.15, lo=-2.0, hi=2.0):
    """Uniform in [lo, hi], but at least ``margin`` away from every one of ``points``."""

    def sample(rng, shape):
        x = as_f64(rng.uniform(lo, hi, size=shape))
        for _ in range(1000):
            bad = np.zeros(x.shape, dtype=bool)
            for p in points:
                bad |= np.abs(x - p) < margin
            if not bad.any():
                return x
            x = as_f64(np.where(bad, rng.uniform(lo, hi, size=shape), x))
        raise RuntimeError("could not sample away from the given points")

    return sample


def distinct(rng, *shapes, lo=-2.0, hi=2.0):
    """Arrays whose elements are all pairwise well separated, within and across arrays."""
    sizes = [int(np.prod(s, dtype=int)) for s in shapes]
    n = sum(sizes)
    spacing = (hi - lo) / max(n - 1, 1)
    vals = rng.permutation(np.linspace(lo, hi, n)) + rng.uniform(-0.2, 0.2, n) * spacing
    out, start = [], 0
    for s, k in zip(shapes, sizes, strict=True):
        out.append(as_f64(vals[start : start + k].reshape(s)))
        start += k
    return out


def distinct_sampler(lo=-2.0, hi=2.0):
    def sample(rng, shape):
        return distinct(rng, shape, lo=lo, hi=hi)[0]

    return sample


def distinct_abs_sampler(rng, shape):
    """Pairwise distinct magnitudes in [0.3, 2] with random signs (for norm ord=inf)."""
    mag = distinct(rng, shape, lo=0.3, hi=2.0)[0]
    return mag * rng.choice([-1.0, 1.0], size=shape)


def well_conditioned(rng, shape):
    """Random matrices (or stacks of them) plus 3*I: far from singular."""
    n = shape[-1]
    return as_f64(rng.uniform(-1.0, 1.0, size=shape) + 3.0 * np.eye(n))


def independent(sa, sb):
    """A sampler of two inputs drawn independently by ``sa`` and ``sb``."""

    def sample(rng, shape_a, shape_b):
        return sa(rng, shape_a), sb(rng, shape_b)

    return sample


def joint_distinct(rng, shape_a, shape_b):
    """Two inputs whose elements are all well separated, within and across them (no ties)."""
    return tuple(distinct(rng, shape_a, shape_b))
