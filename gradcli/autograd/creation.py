"""Constructors: new leaves of a shape, constants of the language (they need no gradient)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidValueError
from ..i18n import msg
from .backend import NUMPY
from .registry import Shape, public
from .state import check_size
from .tensor import Tensor, const, lift

_CONSTANT = "none (a constant)"


def shape_arg(shape: Any, what: str) -> tuple[int, ...]:
    """Dimensions as ints or as one tuple of ints (``zeros(2, 3)``, ``zeros((2, 3))``)."""
    if isinstance(shape, tuple) and len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    dims = (shape,) if isinstance(shape, (int, float)) or hasattr(shape, "dtype") else tuple(shape)
    out = []
    for d in dims:
        if isinstance(d, Tensor):
            d = d.item()
        fd = float(d)
        if not math.isfinite(fd) or not fd.is_integer() or fd < 0:
            raise InvalidValueError(
                msg("{what}: a dimension must be a whole number >= 0, not {d}", what=what, d=d)
            )
        out.append(int(fd))
    check_size(out, what)
    return tuple(out)


@public(None, "zeros of a shape", derivative=_CONSTANT, method=False)
def zeros(*shape: Shape, dtype: Any = NUMPY.float64, requires_grad: bool = False) -> Tensor:
    """Zeros of a shape (ints or one tuple)."""
    return const(NUMPY.zeros(shape_arg(shape, "zeros"), dtype=dtype), requires_grad)


@public(None, "ones of a shape", derivative=_CONSTANT, method=False)
def ones(*shape: Shape, dtype: Any = NUMPY.float64, requires_grad: bool = False) -> Tensor:
    """Ones of a shape (ints or one tuple)."""
    return const(NUMPY.ones(shape_arg(shape, "ones"), dtype=dtype), requires_grad)


def _like(x: Any, fill: float, dtype: Any, requires_grad: bool) -> Tensor:
    data = x.data if isinstance(x, Tensor) else lift(x).data
    return const(NUMPY.full(data.shape, fill, dtype=data.dtype if dtype is None else dtype),
                 requires_grad)  # fmt: skip


# torch's names: a tensor of x's shape and dtype, a new leaf (no gradient reaches x)
@public(None, "zeros of x's shape and dtype", derivative=_CONSTANT, method=False, language=False)
def zeros_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``x``'s shape and dtype (``dtype`` to choose another), as ``torch.zeros_like``."""
    return _like(x, 0.0, dtype, requires_grad)


@public(None, "ones of x's shape and dtype", derivative=_CONSTANT, method=False, language=False)
def ones_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones of ``x``'s shape and dtype (``dtype`` to choose another), as ``torch.ones_like``."""
    return _like(x, 1.0, dtype, requires_grad)


@public(None, "a shape filled with a value", derivative=_CONSTANT, method=False)
def full(
    shape: Shape, value: float, *, dtype: Any = NUMPY.float64, requires_grad: bool = False
) -> Tensor:
    """A shape filled with ``value``."""
    v = value.data if isinstance(value, Tensor) else value
    return const(NUMPY.full(shape_arg(shape, "full"), v, dtype=dtype), requires_grad)


@public(None, "identity matrix", derivative=_CONSTANT, method=False)
def eye(n: int, m: int | None = None, k: int = 0, *, dtype: Any = NUMPY.float64) -> Tensor:
    """The identity matrix (``m`` columns, ones on diagonal ``k``)."""
    rows, cols = shape_arg((n, n if m is None else m), "eye")
    return const(NUMPY.eye(rows, cols, int(k), dtype=dtype))


@public(None, "evenly spaced values in [start, stop)", derivative=_CONSTANT, method=False)
def arange(
    start: float,
    stop: float | None = None,
    step: float = 1,
    *,
    dtype: Any = NUMPY.float64,
) -> Tensor:
    """Evenly spaced values in ``[start, stop)``."""
    if stop is None:
        start, stop = 0.0, start
    if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
        raise InvalidValueError(msg("arange: start, stop and step must be finite and step nonzero"))
    n = max(0, math.ceil((stop - start) / step))
    check_size((n,), "arange")
    return const(NUMPY.arange(start, stop, step, dtype=dtype))


@public(None, "num evenly spaced values in [start, stop]", derivative=_CONSTANT, method=False)
def linspace(start: float, stop: float, num: int = 50, *, dtype: Any = NUMPY.float64) -> Tensor:
    """``num`` evenly spaced values in ``[start, stop]``."""
    (n,) = shape_arg((num,), "linspace")
    return const(NUMPY.linspace(start, stop, n, dtype=dtype))


# made on first use: importing numpy.random costs ~20 ms of start-up
_DEFAULT_RNG: list[Any] = []


def manual_seed(seed: int) -> None:
    """Reseed the generator ``rand``/``randn`` use when called without ``rng``."""
    _DEFAULT_RNG[:] = [NUMPY.default_rng(seed)]


def generator(seed: int) -> Any:
    """The random generator of one program (``numpy.random.default_rng``)."""
    return NUMPY.default_rng(seed)


def _default_rng() -> Any:
    if not _DEFAULT_RNG:
        manual_seed(0)
    return _DEFAULT_RNG[0]


@public(None, "uniform random numbers in [0, 1) (seeded)", derivative=_CONSTANT, method=False)
def rand(*shape: Shape, rng: Any = None, dtype: Any = NUMPY.float64) -> Tensor:
    """Uniform random numbers in [0, 1)."""
    gen = rng if rng is not None else _default_rng()
    return const(NUMPY.astype(gen.random(shape_arg(shape, "rand")), dtype))


@public(None, "standard normal random numbers (seeded)", derivative=_CONSTANT, method=False)
def randn(*shape: Shape, rng: Any = None, dtype: Any = NUMPY.float64) -> Tensor:
    """Standard normal random numbers."""
    gen = rng if rng is not None else _default_rng()
    return const(NUMPY.astype(gen.standard_normal(shape_arg(shape, "randn")), dtype))


def constant(value: float, dtype: Any = NUMPY.float64) -> Tensor:
    """A 0-d constant tensor (numbers of the language)."""
    return const(NUMPY.asarray(value, dtype=dtype))
