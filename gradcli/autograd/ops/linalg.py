"""Linear algebra: matrix products, determinant, inverse, solve, and the products built on
them (dot, outer, trace, diag)."""

from __future__ import annotations

import builtins
from typing import Any

from ...errors import DomainError, ShapeError
from ..backend import NUMPY
from ..registry import Primitive, primitive, public
from ..shapes import broadcast_shape
from ..state import check_size
from ..tensor import Tensor, lift, record
from .indexing import getitem, scatter
from .reduce import sum
from .shape import flatten, reshape


def swap(xp: Any, x: Any) -> Any:
    """Swap the last two axes (the batched matrix transpose)."""
    return xp.swapaxes(x, -1, -2)


MATMUL = primitive(
    "matmul",
    lambda xp, x, y: xp.matmul(x, y),
    lambda xp, g, ans, ctx, x, y: xp.matmul(g, swap(xp, y)),
    lambda xp, g, ans, ctx, x, y: xp.matmul(swap(xp, x), g),
    saves=("x", "y"),
    inputs=("x", "y"),
    broadcasts=True,
    doc="dA = g B^T, dB = A^T g (batch axes summed back)",
)


def adjugate_t(xp: Any, x: Any) -> Any:
    """Transpose of the adjugate (the gradient of det), valid for singular matrices too."""
    u, s, vt = xp.svd(x)
    n = s.shape[-1]
    others = xp.stack([xp.prod(xp.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = xp.det(u) * xp.det(vt)
    adj = xp.matmul(swap(xp, vt) * others[..., None, :], swap(xp, u))
    return swap(xp, adj * sign[..., None, None])


def _det_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    ge = xp.expand_dims(xp.expand_dims(g, -1), -1)
    ae = xp.expand_dims(xp.expand_dims(ans, -1), -1)
    if isinstance(x, Tensor):
        return ge * ae * swap(xp, xp.inv(x))
    try:
        return ge * (ae * swap(xp, xp.inv(x)))
    except xp.LinAlgError:
        return ge * adjugate_t(xp, x)


DET = primitive(
    "det",
    lambda xp, x: xp.det(x),
    _det_vjp,
    saves=("x", "ans"),
    doc="g det(A) A^-T (the adjugate for singular A)",
)
INV = primitive(
    "inv",
    lambda xp, x: xp.inv(x),
    lambda xp, g, ans, ctx: -xp.matmul(xp.matmul(swap(xp, ans), g), swap(xp, ans)),
    saves=("ans",),
    doc="-A^-T g A^-T",
)


def _solve_vjp_b(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, b: Any) -> Any:
    if b.ndim == 1:
        return xp.solve(swap(xp, a), xp.expand_dims(g, -1))[..., 0]
    return xp.solve(swap(xp, a), g)


def _solve_vjp_a(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, b: Any) -> Any:
    gb = _solve_vjp_b(xp, g, ans, ctx, a, b)
    if b.ndim == 1:
        return -(xp.expand_dims(gb, -1) * xp.expand_dims(ans, -2))
    return -xp.matmul(gb, swap(xp, ans))


SOLVE = primitive(
    "solve",
    lambda xp, a, b: xp.solve(a, b),
    _solve_vjp_a,
    _solve_vjp_b,
    saves=("a", "b", "ans"),
    inputs=("a", "b"),
    broadcasts=True,
    doc="db = A^-T g, dA = -db x^T",
)


def _matmul2(prim: Primitive, x: Tensor, y: Tensor) -> Tensor:
    xs, ys = x.data.shape, y.data.shape
    if xs[-1] != ys[-2]:
        raise ShapeError(
            f"matmul: shapes {xs} and {ys} do not fit (inner dimensions {xs[-1]} and {ys[-2]})"
        )
    try:
        batch = broadcast_shape(xs[:-2], ys[:-2])
    except ValueError:
        raise ShapeError(f"matmul: batch shapes of {xs} and {ys} cannot be broadcast") from None
    check_size((*batch, xs[-2], ys[-1]), "matmul")
    return record(NUMPY.matmul(x.data, y.data), prim, (x, y), (x.data, y.data), (xs, ys))


@public(MATMUL, "matrix product (NumPy's rules); also a @ b")
def matmul(prim: Primitive, a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with NumPy's rules (1-D operands are promoted, then squeezed)."""
    x = lift(a, b if isinstance(b, Tensor) else None)
    y = lift(b, x)
    if x.data.ndim == 0 or y.data.ndim == 0:
        raise ShapeError(
            f"matmul: needs tensors of at least one dimension, got shapes {x.data.shape} and "
            f"{y.data.shape} (use * for scalars)"
        )
    xv, yv = x.data.ndim == 1, y.data.ndim == 1
    if xv and yv:
        if x.data.shape != y.data.shape:
            raise ShapeError(f"matmul: shapes {x.data.shape} and {y.data.shape} do not fit")
        return sum(x * y)
    xm = reshape(x, (1, x.data.shape[0])) if xv else x
    ym = reshape(y, (y.data.shape[0], 1)) if yv else y
    try:
        out = _matmul2(prim, xm, ym)
    except ShapeError:
        raise ShapeError(f"matmul: shapes {x.data.shape} and {y.data.shape} do not fit") from None
    if xv:
        out = reshape(out, out.data.shape[:-2] + out.data.shape[-1:])
    elif yv:
        out = reshape(out, out.data.shape[:-1])
    return out


Tensor.__matmul__ = lambda self, other: matmul(self, other)  # type: ignore[method-assign]
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)  # type: ignore[method-assign]


@public(None, "dot product of 1-D or 2-D tensors", derivative=MATMUL.doc)
def dot(a: Tensor, b: Tensor) -> Tensor:
    """Dot product of 1-D or 2-D tensors (a scalar operand multiplies)."""
    x = lift(a, b if isinstance(b, Tensor) else None)
    y = lift(b, x)
    if x.data.ndim == 0 or y.data.ndim == 0:
        return x * y
    if x.data.ndim > 2 or y.data.ndim > 2:
        raise ShapeError(
            f"dot: supports 1-D and 2-D tensors, got shapes {x.data.shape} and {y.data.shape}"
            " (use matmul for batches)"
        )
    return matmul(x, y)


@public(None, "outer product", derivative="da = g b, db = g^T a")
def outer(a: Tensor, b: Tensor) -> Tensor:
    """Outer product of the flattened inputs."""
    x, y = flatten(lift(a)), flatten(lift(b))
    check_size((x.data.size, y.data.size), "outer")
    return reshape(x, (-1, 1)) * reshape(y, (1, -1))


def _diag_indices(n_rows: int, n_cols: int, k: int) -> tuple[Any, Any]:
    length = builtins.min(n_rows, n_cols - k) if k >= 0 else builtins.min(n_rows + k, n_cols)
    i = NUMPY.arange(builtins.max(0, length))
    return (i, i + k) if k >= 0 else (i - k, i)


@public(None, "sum of the diagonal", derivative="g on the diagonal")
def trace(x: Tensor) -> Tensor:
    """Sum of the main diagonal (over the first two axes, as NumPy)."""
    x = lift(x)
    if x.data.ndim < 2:
        raise ShapeError(f"trace: needs at least 2 dimensions, got shape {x.data.shape}")
    rows, cols = _diag_indices(x.data.shape[0], x.data.shape[1], 0)
    return sum(getitem(x, (rows, cols)), axis=0)


@public(None, "diagonal matrix of a vector, or diagonal of a matrix",
        derivative="g's diagonal / g on the diagonal")  # fmt: skip
def diag(x: Tensor, k: int = 0) -> Tensor:
    """NumPy's ``diag``: a 1-D tensor becomes a diagonal matrix; a 2-D one gives its diagonal."""
    x = lift(x)
    k = int(k)
    if x.data.ndim == 1:
        n = x.data.shape[0] + builtins.abs(k)
        check_size((n, n), "diag")
        rows, cols = _diag_indices(n, n, k)
        return scatter(x, (rows, cols), (n, n))
    if x.data.ndim == 2:
        rows, cols = _diag_indices(x.data.shape[0], x.data.shape[1], k)
        return getitem(x, (rows, cols))
    raise ShapeError(f"diag: needs a 1-D or 2-D tensor, got shape {x.data.shape}")


def _square_matrix(x: Tensor, what: str) -> None:
    s = x.data.shape
    if x.data.ndim < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{what}: needs a square matrix (or a batch of them), got shape {s}")


@public(DET, "determinant")
def det(prim: Primitive, x: Tensor) -> Tensor:
    """Determinant of a square matrix (batched over leading axes)."""
    x = lift(x)
    _square_matrix(x, "det")
    out = NUMPY.asarray(prim.fwd(NUMPY, x.data), dtype=x.data.dtype)
    return record(out, prim, (x,), (x.data,))


@public(INV, "matrix inverse")
def inv(prim: Primitive, x: Tensor) -> Tensor:
    """Inverse of a square matrix; a singular matrix is a domain error."""
    x = lift(x)
    _square_matrix(x, "inv")
    try:
        data = prim.fwd(NUMPY, x.data)
    except NUMPY.LinAlgError:
        raise DomainError("inv: the matrix is singular (it has no inverse)") from None
    return record(data, prim, (x,))


@public(SOLVE, "x with a @ x == b", method=False)
def solve(prim: Primitive, a: Tensor, b: Tensor) -> Tensor:
    """``x`` with ``a @ x == b`` (NumPy 2 rules: a 1-D ``b`` is a vector)."""
    a = lift(a, b if isinstance(b, Tensor) else None)
    b = lift(b, a)
    _square_matrix(a, "solve")
    n = a.data.shape[-1]
    if b.data.ndim == 0 or (b.data.shape[-1] if b.data.ndim == 1 else b.data.shape[-2]) != n:
        raise ShapeError(f"solve: shapes {a.data.shape} and {b.data.shape} do not fit")
    try:
        data = prim.fwd(NUMPY, a.data, b.data)
    except NUMPY.LinAlgError:
        raise DomainError("solve: the matrix is singular") from None
    except ValueError:
        raise ShapeError(f"solve: shapes {a.data.shape} and {b.data.shape} do not fit") from None
    return record(data, prim, (a, b), (a.data, b.data), (a.data.shape, b.data.shape))
