"""The tensor API against PyTorch itself, on many random cases (optional: needs torch).

Skipped when torch is not installed, so the default run never needs it. To run it, use a
Python that has both, e.g.::

    PYTHONPATH=. /path/to/torch-env/bin/python -m pytest tests/test_vs_torch.py -q

Every case is written once, as a function of a namespace ``m``: ``m`` is ``gradcli`` itself
or :class:`TorchNS`, which offers the same NumPy-style names on top of torch. The same
function runs on both, in float64, and values, gradients (and, for the second-order tests,
Hessian-vector products) must agree to 1e-10.

* ``test_function``: each function alone, on random shapes that broadcast.
* ``test_random_composition``: random programs of several functions (a DAG: a node may be
  used twice), every node's value and gradient compared (``retain_grad`` on intermediates).
* ``test_second_order``: ``backward(create_graph=True)`` / ``autograd.grad`` twice.
* clipping and the optimisers on random gradients and problems.

Domains are kept valid by composition (``log(|x| + 0.5)``, ``arcsin(0.9 tanh(x))``), and a
node whose values leave [-1e4, 1e4] is dropped, so the comparison is of the calculus, not of
round-off in ill-conditioned corners.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import gradcli as G

torch = pytest.importorskip("torch")

F64 = torch.float64
RTOL = 1e-10
LIMIT = 1e4  # nodes with larger values are dropped from a random program

Shape = tuple[int, ...]
Case = Callable[..., Any]  # (m, *tensors) -> tensor, the same code for both libraries


# --------------------------------------------------------------------------------------
# torch with gradcli's (NumPy's) names and signatures
# --------------------------------------------------------------------------------------


def _dims(x: Any, axis: Any) -> Any:
    return tuple(range(x.dim())) if axis is None else axis


class TorchNS:
    """The subset of the ``gradcli`` namespace the cases use, implemented with torch."""

    abs = staticmethod(torch.abs)
    sign = staticmethod(torch.sign)
    sqrt = staticmethod(torch.sqrt)
    square = staticmethod(torch.square)
    exp = staticmethod(torch.exp)
    expm1 = staticmethod(torch.expm1)
    log = staticmethod(torch.log)
    log2 = staticmethod(torch.log2)
    log10 = staticmethod(torch.log10)
    log1p = staticmethod(torch.log1p)
    sin = staticmethod(torch.sin)
    cos = staticmethod(torch.cos)
    tan = staticmethod(torch.tan)
    arcsin = staticmethod(torch.asin)
    arccos = staticmethod(torch.acos)
    arctan = staticmethod(torch.atan)
    sinh = staticmethod(torch.sinh)
    cosh = staticmethod(torch.cosh)
    tanh = staticmethod(torch.tanh)
    arcsinh = staticmethod(torch.asinh)
    arccosh = staticmethod(torch.acosh)
    arctanh = staticmethod(torch.atanh)
    sigmoid = staticmethod(torch.sigmoid)
    relu = staticmethod(torch.relu)
    softplus = staticmethod(torch.nn.functional.softplus)
    silu = staticmethod(torch.nn.functional.silu)
    erf = staticmethod(torch.erf)
    gelu = staticmethod(torch.nn.functional.gelu)
    leaky_relu = staticmethod(torch.nn.functional.leaky_relu)
    elu = staticmethod(torch.nn.functional.elu)
    softsign = staticmethod(torch.nn.functional.softsign)
    logaddexp = staticmethod(torch.logaddexp)
    floor = staticmethod(torch.floor)
    ceil = staticmethod(torch.ceil)
    round = staticmethod(torch.round)
    pow = staticmethod(torch.pow)
    maximum = staticmethod(torch.maximum)
    minimum = staticmethod(torch.minimum)
    arctan2 = staticmethod(torch.atan2)
    matmul = staticmethod(torch.matmul)
    dot = staticmethod(torch.dot)
    outer = staticmethod(torch.outer)
    trace = staticmethod(torch.trace)
    diag = staticmethod(torch.diag)
    det = staticmethod(torch.linalg.det)
    inv = staticmethod(torch.linalg.inv)
    solve = staticmethod(torch.linalg.solve)
    einsum = staticmethod(torch.einsum)
    slogdet = staticmethod(torch.linalg.slogdet)
    cholesky = staticmethod(torch.linalg.cholesky)
    pinv = staticmethod(torch.linalg.pinv)
    reshape = staticmethod(torch.reshape)

    @staticmethod
    def eye(n: int) -> Any:
        return torch.eye(n, dtype=F64)

    @staticmethod
    def where(cond: Any, x: Any, y: Any) -> Any:
        return torch.where(cond != 0, x, y)

    @staticmethod
    def clip(x: Any, lo: Any, hi: Any) -> Any:
        return torch.clamp(x, lo, hi)

    @staticmethod
    def greater(x: Any, y: Any) -> Any:
        return (x > y).to(F64)

    @staticmethod
    def less_equal(x: Any, y: Any) -> Any:
        return (x <= y).to(F64)

    @staticmethod
    def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.sum(x, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.mean(x, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.amax(x, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.amin(x, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is None:
            p = torch.prod(x)
            return p.reshape((1,) * x.dim()) if keepdims else p
        return torch.prod(x, dim=axis, keepdim=keepdims)

    @staticmethod
    def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.logsumexp(x, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def norm(x: Any, ord: float = 2, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.linalg.vector_norm(x, ord=ord, dim=_dims(x, axis), keepdim=keepdims)

    @staticmethod
    def var(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        return torch.var(x, dim=_dims(x, axis), correction=ddof, keepdim=keepdims)

    @staticmethod
    def std(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        return torch.std(x, dim=_dims(x, axis), correction=ddof, keepdim=keepdims)

    @staticmethod
    def softmax(x: Any, axis: int = -1) -> Any:
        return torch.softmax(x, dim=axis)

    @staticmethod
    def log_softmax(x: Any, axis: int = -1) -> Any:
        return torch.log_softmax(x, dim=axis)

    @staticmethod
    def cumsum(x: Any, axis: Any = None) -> Any:  # None: the flattened elements, as NumPy
        return torch.cumsum(x.reshape(-1), 0) if axis is None else torch.cumsum(x, dim=axis)

    @staticmethod
    def cumprod(x: Any, axis: Any = None) -> Any:
        return torch.cumprod(x.reshape(-1), 0) if axis is None else torch.cumprod(x, dim=axis)

    @staticmethod
    def tril(x: Any, k: int = 0) -> Any:
        return torch.tril(x, diagonal=k)

    @staticmethod
    def triu(x: Any, k: int = 0) -> Any:
        return torch.triu(x, diagonal=k)

    @staticmethod
    def transpose(x: Any, axes: Any = None) -> Any:
        return x.permute(*(reversed(range(x.dim())) if axes is None else axes))

    @staticmethod
    def flip(x: Any, axis: Any = None) -> Any:
        dims = _dims(x, axis)
        return torch.flip(x, dims=(dims,) if isinstance(dims, int) else dims)

    @staticmethod
    def concatenate(seq: Sequence[Any], axis: int = 0) -> Any:
        return torch.cat(list(seq), dim=axis)

    @staticmethod
    def stack(seq: Sequence[Any], axis: int = 0) -> Any:
        return torch.stack(list(seq), dim=axis)

    @staticmethod
    def expand_dims(x: Any, axis: int) -> Any:
        return torch.unsqueeze(x, axis)

    @staticmethod
    def squeeze(x: Any, axis: int) -> Any:
        return torch.squeeze(x, dim=axis)

    @staticmethod
    def tensor(a: Any) -> Any:
        return torch.tensor(a, dtype=F64)

    # losses: broadcast first, as torch.nn.functional does after its warning
    @staticmethod
    def mse_loss(x: Any, y: Any, reduction: str = "mean") -> Any:
        return torch.nn.functional.mse_loss(*torch.broadcast_tensors(x, y), reduction=reduction)

    @staticmethod
    def l1_loss(x: Any, y: Any, reduction: str = "mean") -> Any:
        return torch.nn.functional.l1_loss(*torch.broadcast_tensors(x, y), reduction=reduction)

    @staticmethod
    def huber_loss(x: Any, y: Any, reduction: str = "mean", delta: float = 1.0) -> Any:
        x, y = torch.broadcast_tensors(x, y)
        return torch.nn.functional.huber_loss(x, y, reduction=reduction, delta=delta)

    binary_cross_entropy = staticmethod(torch.nn.functional.binary_cross_entropy)
    binary_cross_entropy_with_logits = staticmethod(
        torch.nn.functional.binary_cross_entropy_with_logits
    )

    @staticmethod
    def cross_entropy(x: Any, t: Any, **kw: Any) -> Any:
        """Class indices (a target not of the input's shape) as torch's int64."""
        t = t if t.shape == x.shape else t.long()
        return torch.nn.functional.cross_entropy(x, t, **kw)

    @staticmethod
    def nll_loss(x: Any, t: Any, **kw: Any) -> Any:
        return torch.nn.functional.nll_loss(x, t.long(), **kw)


# --------------------------------------------------------------------------------------
# The functions: each `make(rng, *shapes)` returns a case for operands of those shapes, or
# None when the function does not apply to them. Parameters (axes, ...) are drawn here, so
# both libraries run exactly the same case.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fn:
    name: str
    arity: int
    make: Callable[..., Case | None]


FNS: list[Fn] = []


def unary(name: str, case: Case) -> None:
    FNS.append(Fn(name, 1, lambda rng, s: case))


def binary(name: str, case: Case) -> None:
    """An elementwise function of two operands whose shapes broadcast."""

    def make(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
        try:
            np.broadcast_shapes(s1, s2)
        except ValueError:
            return None
        return case

    FNS.append(Fn(name, 2, make))


# Elementwise, one operand (kept inside each function's domain by composition)
unary("neg", lambda m, x: -x)
unary("abs", lambda m, x: m.abs(x))
unary("sign", lambda m, x: m.sign(x) * x)
unary("sqrt", lambda m, x: m.sqrt(x * x + 0.25))
unary("square", lambda m, x: m.square(x))
unary("exp", lambda m, x: m.exp(x))
unary("expm1", lambda m, x: m.expm1(x))
unary("log", lambda m, x: m.log(m.abs(x) + 0.5))
unary("log2", lambda m, x: m.log2(x * x + 0.5))
unary("log10", lambda m, x: m.log10(x * x + 0.5))
unary("log1p", lambda m, x: m.log1p(x * x))
unary("sin", lambda m, x: m.sin(x))
unary("cos", lambda m, x: m.cos(x))
unary("tan", lambda m, x: m.tan(m.tanh(x)))
unary("arcsin", lambda m, x: m.arcsin(m.tanh(x) * 0.9))
unary("arccos", lambda m, x: m.arccos(m.tanh(x) * 0.9))
unary("arctan", lambda m, x: m.arctan(x))
unary("sinh", lambda m, x: m.sinh(x))
unary("cosh", lambda m, x: m.cosh(x))
unary("tanh", lambda m, x: m.tanh(x))
unary("arcsinh", lambda m, x: m.arcsinh(x))
unary("arccosh", lambda m, x: m.arccosh(x * x + 1.5))
unary("arctanh", lambda m, x: m.arctanh(m.tanh(x) * 0.9))
unary("sigmoid", lambda m, x: m.sigmoid(x))
unary("relu", lambda m, x: m.relu(x))
# torch's softplus is linear above 20 (an approximation); compare below it.
unary("softplus", lambda m, x: m.softplus(m.tanh(x) * 15.0))
unary("silu", lambda m, x: m.silu(x * 3.0))
unary("erf", lambda m, x: m.erf(x))
unary("gelu", lambda m, x: m.gelu(x * 2.0))
unary("gelu-tanh", lambda m, x: m.gelu(x * 2.0, approximate="tanh"))
unary("leaky_relu", lambda m, x: m.leaky_relu(x, 0.2))
unary("elu", lambda m, x: m.elu(x * 2.0, alpha=1.5))
unary("softsign", lambda m, x: m.softsign(x * 2.0))
unary("cumsum-flat", lambda m, x: m.cumsum(x))
unary("cumprod-flat", lambda m, x: m.cumprod(m.tanh(x) + 1.2))
unary("floor", lambda m, x: m.floor(x) + x)
unary("ceil", lambda m, x: m.ceil(x) * x)
unary("round", lambda m, x: m.round(x * 3.0) * x)
unary("pow-int", lambda m, x: x**3 - x**2)
unary("pow-float", lambda m, x: (x * x + 1.0) ** 0.75)
unary("rpow", lambda m, x: 2.0 ** m.tanh(x))
unary("scalars", lambda m, x: (x * 2.5 - 1.0) / 3.0 + 1.0 / (x * x + 1.0) - (4.0 - x))
unary("clip", lambda m, x: m.clip(x, -0.5, 0.7))
unary("concatenate", lambda m, x: m.concatenate([x, m.tanh(x)], axis=0) if x.ndim else x)

# Elementwise, two operands, with broadcasting
binary("add", lambda m, x, y: x + y)
binary("sub", lambda m, x, y: x - y)
binary("mul", lambda m, x, y: x * y)
binary("div", lambda m, x, y: x / (y * y + 0.5))
binary("pow", lambda m, x, y: m.pow(m.abs(x) + 0.5, m.tanh(y) * 2.0))
binary("maximum", lambda m, x, y: m.maximum(x, y))
binary("minimum", lambda m, x, y: m.minimum(x, y))
binary("arctan2", lambda m, x, y: m.arctan2(x, y))
binary("logaddexp", lambda m, x, y: m.logaddexp(x, y * 3.0))
binary("where", lambda m, x, y: m.where(m.greater(x, y), x * 2.0, y))
binary("clip-tensor", lambda m, x, y: m.clip(x, y - 0.5, y + 0.5))
binary("compare", lambda m, x, y: m.less_equal(x, y) * x + y)


def _axis(rng: np.random.Generator, ndim: int, *, several: bool = True) -> Any:
    """None, one axis (maybe negative) or, when allowed, a tuple of two."""
    choices: list[Any] = [None, int(rng.integers(ndim)), -1]
    if several and ndim >= 2:
        a, b = rng.choice(ndim, size=2, replace=False)
        choices.append((int(a), int(b)))
    return choices[rng.integers(len(choices))]


def reduction(name: str, call: Callable[..., Any], *, several: bool = True, ddof: int = 0) -> None:
    def make(rng: np.random.Generator, s: Shape) -> Case | None:
        if not s:
            return None
        axis = _axis(rng, len(s), several=several)
        axes = range(len(s)) if axis is None else [axis] if isinstance(axis, int) else axis
        if math.prod(s[a] for a in axes) <= ddof:
            return None  # (ddof = 1 over one element: a division by zero in both)
        keepdims = bool(rng.integers(2))
        return lambda m, x: call(m, x, axis, keepdims)

    FNS.append(Fn(name, 1, make))


reduction("sum", lambda m, x, a, k: m.sum(x, axis=a, keepdims=k))
reduction("mean", lambda m, x, a, k: m.mean(x, axis=a, keepdims=k))
reduction("prod", lambda m, x, a, k: m.prod(m.tanh(x) + 1.5, axis=a, keepdims=k), several=False)
reduction("max", lambda m, x, a, k: m.max(x, axis=a, keepdims=k))
reduction("min", lambda m, x, a, k: m.min(x, axis=a, keepdims=k))
reduction("max-ties", lambda m, x, a, k: m.max(m.clip(x, -0.3, 0.3), axis=a, keepdims=k))
reduction("logsumexp", lambda m, x, a, k: m.logsumexp(x, axis=a, keepdims=k))
for _p in (1.0, 2.0, 3.0, math.inf):
    reduction(f"norm-{_p:g}", lambda m, x, a, k, p=_p: m.norm(x, ord=p, axis=a, keepdims=k))
for _ddof in (0, 1):
    reduction(
        f"var-{_ddof}",
        lambda m, x, a, k, d=_ddof: m.var(x, axis=a, ddof=d, keepdims=k),
        ddof=_ddof,
    )
    reduction(
        f"std-{_ddof}",
        lambda m, x, a, k, d=_ddof: m.std(x, axis=a, ddof=d, keepdims=k),
        ddof=_ddof,
    )


def along_axis(name: str, call: Callable[..., Any]) -> None:
    def make(rng: np.random.Generator, s: Shape) -> Case | None:
        if not s:
            return None
        axis = int(rng.integers(-len(s), len(s)))
        return lambda m, x: call(m, x, axis)

    FNS.append(Fn(name, 1, make))


along_axis("softmax", lambda m, x, a: m.softmax(x, axis=a))
along_axis("log_softmax", lambda m, x, a: m.log_softmax(x, axis=a))
along_axis("cumsum", lambda m, x, a: m.cumsum(x, axis=a))
along_axis("cumprod", lambda m, x, a: m.cumprod(x, axis=a))
# exact zeros where x <= 0 (x - x.detach(): 0 with derivative 1), as many as half of them
along_axis(
    "cumprod-zeros",
    lambda m, x, a: m.cumprod(m.where(m.greater(x, 0.0), x, x - x.detach()), axis=a),
)
along_axis("flip", lambda m, x, a: m.flip(x, axis=a))
along_axis("concatenate-axis", lambda m, x, a: m.concatenate([x, x * x, m.sin(x)], axis=a))


Make = Callable[..., Case | None]


def shape_fn(arity: int) -> Callable[[Make], Make]:
    """Register ``make(rng, *shapes)`` under its own name (``_`` read as ``-``)."""

    def register(make: Make) -> Make:
        FNS.append(Fn(make.__name__.replace("_", "-").strip("-"), arity, make))
        return make

    return register


@shape_fn(1)
def reshape_flat(rng: np.random.Generator, s: Shape) -> Case | None:
    return lambda m, x: m.reshape(x, (-1,))


@shape_fn(1)
def reshape_reversed(rng: np.random.Generator, s: Shape) -> Case | None:
    return lambda m, x: m.reshape(x, tuple(reversed(s)))


@shape_fn(1)
def transpose(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.transpose(x)) if len(s) >= 2 else None


@shape_fn(1)
def transpose_axes(rng: np.random.Generator, s: Shape) -> Case | None:
    if len(s) < 2:
        return None
    axes = tuple(int(i) for i in rng.permutation(len(s)))
    return lambda m, x: m.transpose(x, axes)


@shape_fn(1)
def expand_dims_(rng: np.random.Generator, s: Shape) -> Case | None:
    axis = int(rng.integers(-len(s) - 1, len(s) + 1))
    return lambda m, x: m.expand_dims(x, axis)


@shape_fn(1)
def squeeze(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.squeeze(x, s.index(1))) if 1 in s else None


@shape_fn(1)
def stack(rng: np.random.Generator, s: Shape) -> Case | None:
    axis = int(rng.integers(len(s) + 1))
    return lambda m, x: m.stack([x, m.cos(x)], axis=axis)


@shape_fn(1)
def getitem(rng: np.random.Generator, s: Shape) -> Case | None:
    if not s:
        return None
    keys: list[Any] = [0, -1, slice(None, None, 2), slice(1, None), [0, 0, -1], None]
    if len(s) >= 2:
        keys += [(slice(None), 0), (Ellipsis, slice(None, None, 2)), ([0, -1], slice(1, None))]
    key = keys[rng.integers(len(keys))]
    return lambda m, x: x[key]


# Linear algebra


@shape_fn(2)
def matmul(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    if not s1 or not s2:
        return None
    try:
        np.matmul(np.zeros(s1), np.zeros(s2))
    except ValueError:
        return None
    return lambda m, x, y: m.matmul(x, y)


@shape_fn(1)
def matmul_self(rng: np.random.Generator, s: Shape) -> Case | None:
    """x @ x for a vector, x @ x^T (batched) for a matrix or a stack of them."""
    if not s:
        return None
    if len(s) == 1:
        return lambda m, x: x @ x
    swap = (*range(len(s) - 2), len(s) - 1, len(s) - 2)
    return lambda m, x: x @ m.transpose(x, swap)


@shape_fn(2)
def dot(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    return (lambda m, x, y: m.dot(x, y)) if len(s1) == 1 and s1 == s2 else None


@shape_fn(2)
def outer(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    return (lambda m, x, y: m.outer(x, y)) if len(s1) == 1 and len(s2) == 1 else None


@shape_fn(1)
def trace(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.trace(x)) if len(s) == 2 else None


@shape_fn(1)
def tril(rng: np.random.Generator, s: Shape) -> Case | None:
    k = int(rng.integers(-2, 3))
    return (lambda m, x: m.tril(x, k)) if len(s) >= 2 else None


@shape_fn(1)
def triu(rng: np.random.Generator, s: Shape) -> Case | None:
    k = int(rng.integers(-2, 3))
    return (lambda m, x: m.triu(x, k)) if len(s) >= 2 else None


@shape_fn(1)
def diag(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.diag(x)) if len(s) in (1, 2) else None


def _spd(m: Any, x: Any) -> Any:
    """A well-conditioned square matrix made from a 2-D x: x x^T / n + I."""
    n = x.shape[0]
    return (x @ m.transpose(x)) / float(x.shape[1]) + m.eye(n)


@shape_fn(1)
def det(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.det(_spd(m, x))) if len(s) == 2 else None


@shape_fn(1)
def inv(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.inv(_spd(m, x))) if len(s) == 2 else None


@shape_fn(2)
def solve(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    if len(s1) == 2 and len(s2) in (1, 2) and s2[0] == s1[0]:
        return lambda m, a, b: m.solve(_spd(m, a), b)
    return None


@shape_fn(1)
def einsum_one(rng: np.random.Generator, s: Shape) -> Case | None:
    """One operand: a transpose, a sum over a subscript found once, a trace, a diagonal."""
    forms = {
        0: ["->", ""],
        1: ["i->", "i->i", "i"],
        2: ["ij->ji", "ij->i", "ij->j", "ij->", "ji", "...j->...", "i...->...i"],
        3: ["bij->bji", "...ij->...j", "bij->", "...ij->ij", "b...->..."],
    }.get(len(s), [])
    if len(s) == 2 and s[0] == s[1]:
        forms = [*forms, "ii->", "ii->i", "ii"]
    if len(s) == 3 and s[1] == s[2]:
        forms = [*forms, "bii->b", "bii->bi", "...ii->..."]
    if not forms:
        return None
    subs = forms[rng.integers(len(forms))]
    return lambda m, x: m.einsum(subs, x)


@shape_fn(2)
def einsum_two(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    """Two operands: products, batched products, outer products, broadcasting."""
    forms = []
    if len(s1) == 1 and len(s2) == 1:
        forms += ["i,j->ij", "i,j", "i,j->ji"]
        if s2[0] in (1, s1[0]) or s1[0] == 1:
            forms += ["i,i->", "i,i->i", "i,i"]
    if len(s1) == 2 and len(s2) == 2 and s1[1] == s2[0]:
        forms += ["ij,jk->ik", "ij,jk", "ij,jk->ki", "ij,jk->"]
    if len(s1) >= 2 and len(s2) == 2 and s2[0] in (1, s1[-1]):
        forms += ["...ij,jk->...ik", "...ij,jk->ik"]
    if len(s1) == 3 and len(s2) == 3 and s1[0] == s2[0] and s1[2] == s2[1]:
        forms += ["bij,bjk->bik"]
    if len(s1) == 2 and len(s2) == 1 and s2[0] in (1, s1[1]):
        forms += ["ij,j->i", "ij,j->ij"]
    if len(s2) == 0:
        forms += ["...,->..."]
    if not forms:
        return None
    subs = forms[rng.integers(len(forms))]
    return lambda m, x, y: m.einsum(subs, x, y)


@shape_fn(1)
def einsum_three(rng: np.random.Generator, s: Shape) -> Case | None:
    """Three operands (a chain and a bilinear form), as one contraction."""
    if len(s) != 2:
        return None
    return lambda m, x: m.einsum("ij,kj,kl->il", x, x, x) + m.einsum("i,ij,j->", x[:, 0], x, x[0])


@shape_fn(1)
def slogdet(rng: np.random.Generator, s: Shape) -> Case | None:
    """log|det| (index 1 of the pair) of a positive and of a negated matrix, and the signs."""
    if len(s) != 2:
        return None
    return lambda m, x: (
        m.slogdet(_spd(m, x))[1] * 2.0
        + m.slogdet(-_spd(m, x)).logabsdet * m.slogdet(-_spd(m, x))[0]
    )


@shape_fn(1)
def cholesky(rng: np.random.Generator, s: Shape) -> Case | None:
    return (lambda m, x: m.cholesky(_spd(m, x))) if len(s) == 2 else None


@shape_fn(1)
def pinv(rng: np.random.Generator, s: Shape) -> Case | None:
    """Of a matrix of full rank whatever x is: [x x^T / n + I, the rest of x's columns]."""
    if len(s) != 2:
        return None

    def case(m: Any, x: Any) -> Any:
        wide = x.shape[0] <= x.shape[1]
        a = x if wide else m.transpose(x)
        r = a.shape[0]
        full = m.concatenate([_spd(m, a), a[:, r:]], axis=1)
        return m.pinv(full if wide else m.transpose(full))

    return case


# Losses (each with a reduction drawn here; targets of class indices drawn as constants)


def _reduction(rng: np.random.Generator) -> str:
    return ("mean", "sum", "none")[rng.integers(3)]


def _broadcasting(s1: Shape, s2: Shape, case: Case) -> Case | None:
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        return None
    return case


@shape_fn(2)
def mse_loss(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    r = _reduction(rng)
    return _broadcasting(s1, s2, lambda m, x, y: m.mse_loss(x, y, reduction=r))


@shape_fn(2)
def l1_loss(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    r = _reduction(rng)
    return _broadcasting(s1, s2, lambda m, x, y: m.l1_loss(x, y, reduction=r))


@shape_fn(2)
def huber_loss(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    r, delta = _reduction(rng), float(rng.uniform(0.3, 2.0))
    return _broadcasting(s1, s2, lambda m, x, y: m.huber_loss(x, y, reduction=r, delta=delta))


@shape_fn(2)
def binary_cross_entropy(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    """Probabilities kept in [0.12, 0.88]: torch's second derivative adds 1e-12 to x and
    1 - x (gradcli's is exact), which moves it by 1e-12 / x."""
    if s1 != s2:
        return None
    r = _reduction(rng)
    w = rng.uniform(0.5, 2.0, s1[-1:]) if rng.integers(2) else None

    def case(m: Any, x: Any, y: Any) -> Any:
        p = m.sigmoid(m.tanh(x) * 2.0)
        weight = None if w is None else m.tensor(w)
        return m.binary_cross_entropy(p, m.sigmoid(y), weight, reduction=r)

    return case


@shape_fn(2)
def binary_cross_entropy_with_logits(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    if s1 != s2:
        return None
    r = _reduction(rng)
    w = rng.uniform(0.5, 2.0, s1[-1:]) if rng.integers(2) else None
    pw = rng.uniform(0.2, 3.0, s1[-1:]) if rng.integers(2) else None

    def case(m: Any, x: Any, y: Any) -> Any:
        weight = None if w is None else m.tensor(w)
        pos = None if pw is None else m.tensor(pw)
        return m.binary_cross_entropy_with_logits(
            x * 3.0, m.sigmoid(y), weight, reduction=r, pos_weight=pos
        )

    return case


def _classes(rng: np.random.Generator, s: Shape, ignore: bool) -> tuple[int, np.ndarray]:
    """The class axis of an input of shape ``s``, and class indices for it (one ignored)."""
    axis = 0 if len(s) == 1 else 1
    t = rng.integers(0, s[axis], s[:axis] + s[axis + 1 :]).astype(float)
    if ignore and t.size > 1:
        t.flat[int(rng.integers(t.size))] = -100.0
    return axis, t


@shape_fn(1)
def cross_entropy(rng: np.random.Generator, s: Shape) -> Case | None:
    if not s:
        return None
    axis, t = _classes(rng, s, bool(rng.integers(2)))
    w = rng.uniform(0.5, 2.0, s[axis]) if rng.integers(2) else None
    kw = {"reduction": _reduction(rng), "label_smoothing": float(rng.choice([0.0, 0.15]))}

    def case(m: Any, x: Any) -> Any:
        return m.cross_entropy(x, m.tensor(t), weight=None if w is None else m.tensor(w), **kw)

    return case


@shape_fn(2)
def cross_entropy_probabilities(rng: np.random.Generator, s1: Shape, s2: Shape) -> Case | None:
    if s1 != s2 or not s1:
        return None
    axis = 0 if len(s1) == 1 else 1
    kw = {"reduction": _reduction(rng), "label_smoothing": float(rng.choice([0.0, 0.15]))}
    return lambda m, x, y: m.cross_entropy(x, m.softmax(y, axis=axis), **kw)


@shape_fn(1)
def nll_loss(rng: np.random.Generator, s: Shape) -> Case | None:
    if not s:
        return None
    axis, t = _classes(rng, s, bool(rng.integers(2)))
    w = rng.uniform(0.5, 2.0, s[axis]) if rng.integers(2) else None
    r = _reduction(rng)

    def case(m: Any, x: Any) -> Any:
        weight = None if w is None else m.tensor(w)
        return m.nll_loss(m.log_softmax(x, axis=axis), m.tensor(t), weight=weight, reduction=r)

    return case


NAMES = [f.name for f in FNS]
assert len(NAMES) == len(set(NAMES)), "duplicate case names"
BY_NAME = {f.name: f for f in FNS}

SHAPES: list[Shape] = [(), (1,), (3,), (4,), (3, 1), (1, 4), (3, 4), (4, 4), (2, 3, 4), (2, 1, 4)]


# --------------------------------------------------------------------------------------
# Comparison helpers
# --------------------------------------------------------------------------------------


@dataclass
class Node:
    g: Any  # gradcli tensor
    t: Any  # torch tensor
    label: str


def leaf(value: np.ndarray, label: str) -> Node:
    return Node(
        G.tensor(value, requires_grad=True),
        torch.tensor(value, dtype=F64, requires_grad=True),
        label,
    )


def numpy_of(t: Any) -> np.ndarray:
    if isinstance(t, G.Tensor):
        return np.asarray(t.detach().numpy(), dtype=float)
    return t.detach().numpy(force=True)  # (force: torch's ZeroTensor gradients)


def assert_close(ours: Any, theirs: Any, what: str) -> None:
    a, b = numpy_of(ours), numpy_of(theirs)
    assert a.shape == b.shape, f"{what}: shape {a.shape}, torch {b.shape}"
    finite = np.isfinite(b)
    scale = float(np.max(np.abs(b[finite]), initial=1.0))
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def in_range(t: Any) -> bool:
    a = numpy_of(t)
    return bool(np.all(np.isfinite(a)) and np.all(np.abs(a) <= LIMIT))


def weights(rng: np.random.Generator, shape: Shape) -> tuple[Any, Any]:
    w = rng.standard_normal(shape)
    return G.tensor(w), torch.tensor(w, dtype=F64)


def weighted_loss(rng: np.random.Generator, nodes: Sequence[Node]) -> tuple[Any, Any]:
    """sum over the nodes of sum(node * random weights): every node gets a gradient."""
    lg: Any = 0.0
    lt: Any = 0.0
    for n in nodes:
        if not n.t.requires_grad:
            continue
        wg, wt = weights(rng, tuple(n.t.shape))
        lg = lg + G.sum(n.g * wg)
        lt = lt + torch.sum(n.t * wt)
    return lg, lt


def apply(fn: Fn, case: Case, operands: Sequence[Node]) -> Node:
    g = case(G, *(o.g for o in operands))
    t = case(TorchNS, *(o.t for o in operands))
    label = f"{fn.name}({', '.join(o.label for o in operands)})"
    assert g.requires_grad == t.requires_grad, f"{label}: requires_grad"
    assert_close(g, t, f"value of {label}")
    return Node(g, t, label)


def random_operands(rng: np.random.Generator, fn: Fn, tries: int = 200) -> tuple[list[Node], Case]:
    for _ in range(tries):
        shapes = [SHAPES[rng.integers(len(SHAPES))] for _ in range(fn.arity)]
        case = fn.make(rng, *shapes)
        if case is not None:
            nodes = [
                leaf(rng.standard_normal(s) * 1.5, f"x{i}{list(s)}") for i, s in enumerate(shapes)
            ]
            return nodes, case
    raise AssertionError(f"no shapes found for {fn.name}")


def compare_grads(nodes: Sequence[Node], context: str) -> None:
    for n in nodes:
        if not n.t.requires_grad:
            continue
        tg = n.t.grad
        if tg is None:
            assert n.g.grad is None or not np.any(numpy_of(n.g.grad)), f"{n.label}: grad"
            continue
        assert n.g.grad is not None, f"grad of {n.label} is None ({context})"
        assert_close(n.g.grad, tg, f"grad of {n.label} in {context}")


# --------------------------------------------------------------------------------------
# One function at a time
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", NAMES)
def test_function(name: str, seed: int) -> None:
    fn = BY_NAME[name]
    rng = np.random.default_rng([seed, *name.encode()])
    ins, case = random_operands(rng, fn)
    out = apply(fn, case, ins)
    if not out.t.requires_grad:
        return
    lg, lt = weighted_loss(rng, [out])
    lg.backward()
    lt.backward()
    compare_grads(ins, out.label)


# --------------------------------------------------------------------------------------
# Random compositions: a DAG of several functions, every node compared
# --------------------------------------------------------------------------------------


def random_program(rng: np.random.Generator, n_ops: int) -> tuple[list[Node], list[Node]]:
    """(leaves, intermediates) of a random program; values compared as it is built."""
    leaves = [
        leaf(rng.standard_normal(s) * 1.5, f"x{i}{list(s)}")
        for i, s in enumerate(SHAPES[k] for k in rng.integers(len(SHAPES), size=3))
    ]
    pool = list(leaves)
    inner: list[Node] = []
    attempts = 0
    while len(inner) < n_ops and attempts < 20 * n_ops:
        attempts += 1
        fn = FNS[rng.integers(len(FNS))]
        operands = [pool[rng.integers(len(pool))] for _ in range(fn.arity)]
        case = fn.make(rng, *(tuple(o.t.shape) for o in operands))
        if case is None:
            continue
        node = apply(fn, case, operands)
        if not in_range(node.t) or any(node.g is o.g for o in operands):
            # (gradcli returns its operand itself for a no-op reshape/flip/transpose, where
            # torch makes a view: the same values, but retained grads would be merged.)
            continue
        if node.t.requires_grad:
            node.g.retain_grad()
            node.t.retain_grad()
        pool.append(node)
        inner.append(node)
    return leaves, inner


@pytest.mark.parametrize("seed", range(150))
def test_random_composition(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    leaves, inner = random_program(rng, n_ops=int(rng.integers(3, 12)))
    lg, lt = weighted_loss(rng, [*leaves, *inner])
    if not isinstance(lt, torch.Tensor) or not lt.requires_grad:
        return
    lg.backward()
    lt.backward()
    program = " ; ".join(n.label for n in inner)
    compare_grads([*leaves, *inner], program)


@pytest.mark.parametrize("seed", range(30))
def test_random_composition_backward_twice_accumulates(seed: int) -> None:
    rng = np.random.default_rng(5000 + seed)
    leaves, inner = random_program(rng, n_ops=6)
    lg, lt = weighted_loss(rng, [*leaves, *inner])
    if not isinstance(lt, torch.Tensor) or not lt.requires_grad:
        return
    lg.backward(retain_graph=True)  # both free what the graph saved without it
    lg.backward()
    lt.backward(retain_graph=True)
    lt.backward()
    compare_grads(leaves, "two backwards of " + " ; ".join(n.label for n in inner))


# --------------------------------------------------------------------------------------
# Second order: differentiate the backward pass (Hessian-vector products)
# --------------------------------------------------------------------------------------


def hvp(lib: Any, loss: Any, xs: Sequence[Any], vs: Sequence[Any]) -> list[Any]:
    """d/dx of sum_i <dloss/dx_i, v_i>, with ``lib`` gradcli or torch."""
    gs = lib.autograd.grad(loss, list(xs), create_graph=True, allow_unused=True)
    total: Any = 0.0
    for g, v in zip(gs, vs, strict=True):
        if g is not None and g.requires_grad:
            total = total + lib.sum(g * v)
    if not getattr(total, "requires_grad", False):
        return [None] * len(xs)
    return list(lib.autograd.grad(total, list(xs), allow_unused=True))


def compare_hvp(rng: np.random.Generator, ins: Sequence[Node], lg: Any, lt: Any, what: str) -> None:
    vs = [weights(rng, tuple(n.t.shape)) for n in ins]
    ours = hvp(G, lg, [n.g for n in ins], [v[0] for v in vs])
    theirs = hvp(torch, lt, [n.t for n in ins], [v[1] for v in vs])
    for n, a, b in zip(ins, ours, theirs, strict=True):
        # None (no path, or a backward that does not depend on x) means zeros, in both.
        a = G.zeros(tuple(n.t.shape)) if a is None else a
        b = torch.zeros(n.t.shape, dtype=F64) if b is None else b
        assert_close(a, b, f"Hessian-vector product, {n.label}, in {what}")


@pytest.mark.parametrize("name", NAMES)
def test_function_second_order(name: str) -> None:
    fn = BY_NAME[name]
    rng = np.random.default_rng([77, *name.encode()])
    ins, case = random_operands(rng, fn)
    out = apply(fn, case, ins)
    if not out.t.requires_grad:
        return
    lg, lt = weighted_loss(rng, [out])
    compare_hvp(rng, ins, lg, lt, out.label)


@pytest.mark.parametrize("seed", range(40))
def test_random_composition_second_order(seed: int) -> None:
    rng = np.random.default_rng(9000 + seed)
    leaves, inner = random_program(rng, n_ops=int(rng.integers(2, 7)))
    lg, lt = weighted_loss(rng, [*leaves, *inner])
    if not isinstance(lt, torch.Tensor) or not lt.requires_grad:
        return
    compare_hvp(rng, leaves, lg, lt, " ; ".join(n.label for n in inner))


@pytest.mark.parametrize("ord", [1.0, 2.0, 3.0, math.inf])
@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_norm_of_zeros(ord: float, shape: Shape) -> None:
    """docs/conventions.md: the norm of an all-zero group has gradient 0, as torch's."""
    x = leaf(np.zeros(shape), "zeros")
    yg = G.norm(x.g, ord=ord, axis=-1)
    yt = torch.linalg.vector_norm(x.t, ord=ord, dim=-1)
    assert_close(yg, yt, "norm of zeros")
    G.sum(yg).backward()
    torch.sum(yt).backward()
    assert_close(x.g.grad, x.t.grad, f"grad of the {ord}-norm of zeros")


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_create_graph_like_torch() -> None:
    rng = np.random.default_rng(3)
    x = leaf(rng.standard_normal(4), "x")
    (G.sum(G.sin(x.g) * x.g**2)).backward(create_graph=True)
    torch.sum(torch.sin(x.t) * x.t**2).backward(create_graph=True)
    assert_close(x.g.grad, x.t.grad, "first derivative")
    gg, gt = x.g.grad, x.t.grad
    x.g.grad = None
    x.t.grad = None
    G.sum(gg).backward()
    torch.sum(gt).backward()
    assert_close(x.g.grad, x.t.grad, "second derivative")


# --------------------------------------------------------------------------------------
# The tensor API's torch spellings, as methods
# --------------------------------------------------------------------------------------

METHODS: dict[str, Case] = {
    "sum-dim-keepdim": lambda x: x.sum(dim=1, keepdim=True),
    "sum-positional": lambda x: x.sum(0),
    "mean-dim": lambda x: x.mean(dim=-1),
    "prod-dim": lambda x: x.prod(1),
    "amax-dim": lambda x: x.amax(dim=0),
    "logsumexp": lambda x: x.logsumexp(1),
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(0),
    "norm": lambda x: x.norm(),
    "tanh-exp": lambda x: x.tanh().exp(),
    "sigmoid-relu": lambda x: x.sigmoid() + x.relu(),
    "abs-sqrt-log": lambda x: (x.abs() + 0.5).sqrt().log(),
    "pow": lambda x: x.pow(2) + x.pow(3),
    "clip": lambda x: x.clip(-0.5, 0.5),
    "maximum": lambda x: x.maximum(x * 0.5),
    "reshape-varargs": lambda x: x.reshape(4, 3),
    "reshape-tuple": lambda x: x.reshape((2, -1)),
    "flatten": lambda x: x.flatten(),
    "T": lambda x: x.T,
    "transpose-swap": lambda x: x.transpose(0, 1),
    "matmul": lambda x: x.matmul(x.T),
    "matmul-op": lambda x: x @ x.T,
    "rmatmul": lambda x: x.T @ x,
    "flip": lambda x: x.flip(0),
    "cumsum-dim": lambda x: x.cumsum(dim=1) + x.cumprod(0),
    "tril-triu": lambda x: x.tril(diagonal=1) + x.triu(-1),
    "erf-logaddexp": lambda x: x.erf().logaddexp(x * 0.5),
    "getitem": lambda x: x[1:, ::2] * x[0, 1::2] + x[[0, 0, 2]].sum(),
    "arith": lambda x: (2 - x) * 3 / (x * x + 1) + x**2 - (-x),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_method_spellings(name: str) -> None:
    rng = np.random.default_rng([11, *name.encode()])
    x = leaf(rng.standard_normal((3, 4)), "x")
    f = METHODS[name]
    yg, yt = f(x.g), f(x.t)
    assert_close(yg, yt, f"value of {name}")
    wg, wt = weights(rng, tuple(yt.shape))
    G.sum(yg * wg).backward()
    torch.sum(yt * wt).backward()
    assert_close(x.g.grad, x.t.grad, f"grad of {name}")


# --------------------------------------------------------------------------------------
# Clipping and the optimisers
# --------------------------------------------------------------------------------------


def params_with_grads(rng: np.random.Generator, n: int = 3) -> tuple[list[Any], list[Any]]:
    ours, theirs = [], []
    for i in range(n):
        shape = SHAPES[rng.integers(len(SHAPES))]
        p = rng.standard_normal(shape)
        g = rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2)
        a = G.tensor(p, requires_grad=True)
        b = torch.tensor(p, dtype=F64, requires_grad=True)
        if i == 1 and rng.integers(3) == 0:
            ours.append(a)  # a parameter without a gradient: skipped by both
            theirs.append(b)
            continue
        G.sum(a * G.tensor(g)).backward()
        torch.sum(b * torch.tensor(g, dtype=F64)).backward()
        ours.append(a)
        theirs.append(b)
    return ours, theirs


@pytest.mark.parametrize("seed", range(40))
def test_clip_grad_norm(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ours, theirs = params_with_grads(rng)
    norm_type = [0.5, 1.0, 2.0, 3.0, math.inf, "inf"][seed % 6]
    max_norm = float(10.0 ** rng.uniform(-1, 2))
    total_g = G.nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    total_t = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert_close(total_g, total_t, "total norm")
    for a, b in zip(ours, theirs, strict=True):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            assert_close(a.grad, b.grad, f"clipped grad ({norm_type=}, {max_norm=})")


@pytest.mark.parametrize("seed", range(20))
def test_clip_grad_value(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    ours, theirs = params_with_grads(rng)
    v = float(10.0 ** rng.uniform(-2, 1))
    G.nn.utils.clip_grad_value_(ours, v)
    torch.nn.utils.clip_grad_value_(theirs, v)
    for a, b in zip(ours, theirs, strict=True):
        if b.grad is not None:
            assert_close(a.grad, b.grad, "clipped grad")


OPTIMIZERS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "sgd": (lambda p: G.optim.SGD(p, lr=0.01), lambda p: torch.optim.SGD(p, lr=0.01)),
    "momentum": (
        lambda p: G.optim.SGD(p, lr=0.01, momentum=0.9),
        lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    ),
    "nesterov": (
        lambda p: G.optim.SGD(p, lr=0.01, momentum=0.8, nesterov=True),
        lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.8, nesterov=True),
    ),
    "sgd-dampening-decay": (
        lambda p: G.optim.SGD(p, lr=0.01, momentum=0.7, dampening=0.3, weight_decay=0.01),
        lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.7, dampening=0.3, weight_decay=0.01),
    ),
    "adam": (lambda p: G.optim.Adam(p, lr=0.05), lambda p: torch.optim.Adam(p, lr=0.05)),
    "adam-options": (
        lambda p: G.optim.Adam(p, lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
        lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    ),
    "amsgrad": (
        lambda p: G.optim.Adam(p, lr=0.05, amsgrad=True),
        lambda p: torch.optim.Adam(p, lr=0.05, amsgrad=True),
    ),
}


def rosenbrock_like(m: Any, w: Any, v: Any) -> Any:
    return m.sum((w[1:] - w[:-1] ** 2) ** 2 * 10.0 + (1.0 - w[:-1]) ** 2) + m.sum(m.tanh(v) * w)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer(name: str, seed: int) -> None:
    rng = np.random.default_rng([seed, *name.encode()])
    w0, v0 = rng.standard_normal(5), rng.standard_normal(5)
    make_g, make_t = OPTIMIZERS[name]
    wg, vg = G.tensor(w0, requires_grad=True), G.tensor(v0, requires_grad=True)
    wt = torch.tensor(w0, dtype=F64, requires_grad=True)
    vt = torch.tensor(v0, dtype=F64, requires_grad=True)
    opt_g, opt_t = make_g([wg, vg]), make_t([wt, vt])
    for step in range(8):
        opt_g.zero_grad()
        opt_t.zero_grad()
        loss_g = rosenbrock_like(G, wg, vg)
        loss_t = rosenbrock_like(torch, wt, vt)
        assert_close(loss_g, loss_t, f"loss at step {step}")
        loss_g.backward()
        loss_t.backward()
        # Clipping between backward and step, as a training loop does (it also keeps the
        # steep problem from diverging).
        p = [2.0, math.inf][step % 2]
        G.nn.utils.clip_grad_norm_([wg, vg], 5.0, norm_type=p)
        torch.nn.utils.clip_grad_norm_([wt, vt], 5.0, norm_type=p)
        opt_g.step()
        opt_t.step()
        assert in_range(wt), "the problem diverged: a smaller lr compares better"
        assert_close(wg, wt, f"w after step {step}")
        assert_close(vg, vt, f"v after step {step}")
    opt_g.zero_grad()
    opt_t.zero_grad()
    assert wg.grad is None and wt.grad is None
