"""Linear algebra: matrix products, determinant, inverse, solve, and the products built on
them (dot, outer, trace, diag). slogdet, cholesky and pinv are in decompositions.py, einsum
in einsum.py."""

from __future__ import annotations

import builtins
import functools
from typing import Any

from ...errors import DomainError, ShapeError
from ...i18n import msg
from ..backend import NUMPY, eager_only
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


def _matrix_product(name: str) -> Primitive:
    return primitive(
        name,
        lambda xp, x, y: xp.matmul(x, y),
        lambda xp, g, ans, ctx, x, y: xp.matmul(g, swap(xp, y)),
        lambda xp, g, ans, ctx, x, y: xp.matmul(swap(xp, x), g),
        saves=("x", "y"),
        inputs=("x", "y"),
        broadcasts=True,
        doc="dA = g B^T, dB = A^T g (batch axes summed back)",
    )


#: products of matrices, named as torch names their nodes: ``MmBackward0`` for two
#: matrices, and (where torch makes several nodes) ``MatmulBackward0`` for batches
MATMUL = _matrix_product("matmul")
MM = _matrix_product("mm")


def _mv_dmatrix(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, v: Any) -> Any:
    return xp.expand_dims(g, -1) * v  # the outer product g v^T, per batch


def _mv_dvector(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, v: Any) -> Any:
    # A^T g per batch; backward sums the batch axes back down to v's shape
    return xp.matmul(xp.expand_dims(g, -2), a)[..., 0, :]


#: a matrix (or a batch of them) times a vector: one node, as torch's ``MvBackward0``
MV = primitive(
    "mv",
    lambda xp, a, v: xp.matmul(a, v),
    _mv_dmatrix,
    _mv_dvector,
    saves=("a", "v"),
    inputs=("a", "v"),
    broadcasts=True,
    doc="dA = g v^T, dv = A^T g",
)
#: the inner product of two vectors: one node, as torch's ``DotBackward0``
DOT = primitive(
    "dot",
    lambda xp, x, y: xp.matmul(x, y),
    "g * y",
    "g * x",
    saves=("x", "y"),
    inputs=("x", "y"),
    doc="dx = g y, dy = g x",
)


# --- determinant, inverse, solve ----------------------------------------------------------
#
# Non-finite entries (docs/conventions.md): LAPACK's LU skips work it believes is zero, so a
# matrix with a nan entry can come out of NumPy as "singular" (a LinAlgError) or with a
# determinant of 0.0, and its SVD does not converge. gradcli gives what torch gives there:
# nan. A matrix with a nan entry has a nan determinant, inverse and solution (a column of b
# with a nan gives a nan column of the solution), never an error; a matrix with an infinite
# entry has NumPy's LU result, except that a finite determinant of it (a zero pivot's 0.0)
# is nan, since every entry is a factor of some term of det. The derivative of det of a
# matrix with a nan or infinite entry is nan (that of a 1x1 one is 1, as torch's).

_NAN = float("nan")


def _nonfinite(xp: Any, x: Any) -> Any:
    """Per matrix of a batch, whether it has a nan or infinite entry (shape ``(..., 1, 1)``)."""
    return ~xp.isfinite(x).all(axis=(-2, -1), keepdims=True)


def _has_nan(x: Any, axis: Any) -> Any:
    return (x != x).any(axis=axis, keepdims=True)


def _det_fwd(xp: Any, x: Any) -> Any:
    if xp.all_finite(x):
        return xp.det(x)
    nan = _has_nan(x, (-2, -1))  # (LAPACK is not given these: no "invalid value" from it)
    d = xp.det(xp.where(nan, xp.eye(x.shape[-1], dtype=x.dtype), x))
    bad = _nonfinite(xp, x)[..., 0, 0]
    return xp.where(nan[..., 0, 0] | (bad & xp.isfinite(d)), _NAN, d)


def _inv_fwd(xp: Any, x: Any) -> Any:
    if xp.all_finite(x):
        return xp.inv(x)
    nan = _has_nan(x, (-2, -1))
    if not nan.any():
        return xp.inv(x)
    eye = xp.eye(x.shape[-1], dtype=x.dtype)
    return xp.where(nan, _NAN, xp.inv(xp.where(nan, eye, x)))


def _solve_fwd(xp: Any, a: Any, b: Any) -> Any:
    if xp.all_finite(a) and xp.all_finite(b):
        return xp.solve(a, b)
    vector = b.ndim == 1
    bm = xp.expand_dims(b, -1) if vector else b
    a_nan = _has_nan(a, (-2, -1))  # (..., 1, 1)
    b_nan = _has_nan(bm, -2)  # (..., 1, k): a column of b with a nan
    if not (a_nan.any() or b_nan.any()):
        return xp.solve(a, b)
    eye = xp.eye(a.shape[-1], dtype=a.dtype)
    out = xp.solve(xp.where(a_nan, eye, a), xp.where(b_nan, 0.0, bm))
    out = xp.where(a_nan | b_nan, _NAN, out)
    return out[..., 0] if vector else out


def _solve_any(xp: Any, a: Any, b: Any) -> Any:
    """``solve(a, b)`` in a rule, where ``a`` is A^T and ``b`` a matrix (the public function
    on tensors, the forward one on arrays). Solving with A worked, so a failure here is
    the LU of A^T meeting a zero pivot that A's did not: for a matrix with an infinite
    entry, its gradient is nan (torch's); otherwise a domain error, never a LinAlgError."""
    tensor = isinstance(a, Tensor)
    data = a.data if tensor else a
    try:
        return xp.solve(a, b) if tensor else _solve_fwd(xp, a, b)
    except (DomainError, NUMPY.LinAlgError):
        if NUMPY.all_finite(data):
            raise DomainError(msg("solve: the matrix is singular")) from None
    bad = _nonfinite(NUMPY, data)
    clean = xp.where(bad, NUMPY.eye(data.shape[-1], dtype=data.dtype), a)
    try:
        out = xp.solve(clean, b) if tensor else _solve_fwd(xp, clean, b)
    except (DomainError, NUMPY.LinAlgError):
        raise DomainError(msg("solve: the matrix is singular")) from None
    poison = NUMPY.where(bad, _NAN, 0.0).astype(data.dtype)  # see _cofactor_graph
    return out + xp.sum(a * poison, axis=(-2, -1), keepdims=True)


def adjugate_t(xp: Any, x: Any) -> Any:
    """Transpose of the adjugate (the gradient of det), valid for singular matrices too;
    finite matrices only."""
    try:
        u, s, vt = xp.svd(x)
    except xp.LinAlgError:  # never seen on finite matrices; the minors are exact anyway
        return cofactor_minors(xp, x)
    n = s.shape[-1]
    others = xp.stack([xp.prod(xp.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = xp.det(u) * xp.det(vt)
    adj = xp.matmul(swap(xp, vt) * others[..., None, :], swap(xp, u))
    return swap(xp, adj * sign[..., None, None])


def cofactor_minors(xp: Any, x: Any) -> Any:
    """The cofactor matrix as ``(-1)**(i+j) det(x without row i and column j)``, all n**2
    minors in one batched det: exact for any finite matrix, and a polynomial in ``x``
    made of ``det`` itself, so on tensors it is differentiated (at any order) by det's own
    rule on the minors. It holds n**2 (n-1)**2 numbers per matrix."""
    shape = tuple(x.shape)
    n = shape[-1]
    check_size((*shape[:-2], n, n, n - 1, n - 1), "det: the minors of a singular matrix")
    keep = NUMPY.asarray([[k for k in range(n) if k != i] for i in range(n)])
    minors = x[..., keep[:, None, :, None], keep[None, :, None, :]]
    ij = NUMPY.arange(n)
    sign = NUMPY.asarray(1.0 - 2.0 * ((ij[:, None] + ij[None, :]) % 2), dtype=_dtype(x))
    return xp.det(minors) * sign


def _dtype(x: Any) -> Any:
    return x.data.dtype if isinstance(x, Tensor) else x.dtype


def _cofactor(xp: Any, x: Any, ae: Any) -> Any:
    """The cofactor matrix of each matrix of ``x`` (arrays), ``ae`` its det (``(..., 1, 1)``):
    ``det(A) A^-T`` when A has an inverse, else through the SVD."""
    n = x.shape[-1]
    if n <= 1:
        return xp.ones_like(x)
    if not xp.all_finite(x):
        bad = _nonfinite(xp, x)
        clean = xp.where(bad, xp.eye(n, dtype=x.dtype), x)
        return xp.where(bad, _NAN, _cofactor(xp, clean, xp.where(bad, 1.0, ae)))
    try:
        return ae * swap(xp, xp.inv(x))
    except xp.LinAlgError:
        return adjugate_t(xp, x)


def _well_conditioned(a: Any, a_inv: Any) -> bool:
    """Whether ``det(A) A^-T`` differentiates accurately: its derivative has error about
    cond(A) eps, so every matrix of the batch needs cond_1(A) below 1/sqrt(eps)
    (6.7e7 in float64, 2.9e3 in float32)."""
    eps = 2.0**-52 if a.dtype.itemsize >= 8 else 2.0**-23
    norm = NUMPY.max(NUMPY.sum(NUMPY.abs(a), axis=-2), axis=-1)
    norm_inv = NUMPY.max(NUMPY.sum(NUMPY.abs(a_inv), axis=-2), axis=-1)
    return bool((norm * norm_inv * eps**0.5 < 1.0).all())


def _cofactor_graph(xp: Any, x: Tensor, ae: Any) -> Any:
    """The cofactor matrix as a graph (``create_graph``), so that its derivative is det's
    second derivative: ``det(A) A^-T`` for well-conditioned matrices, else the minors
    (``cofactor_minors``), which are exact where A is singular or nearly so and A^-1 is
    not; nan (with a nan derivative) for a matrix with a nan or infinite entry."""
    data = x.data
    n = data.shape[-1]
    if n <= 1:
        return NUMPY.ones(data.shape, dtype=data.dtype)  # det of 1x1 is its entry
    if not NUMPY.all_finite(data):
        bad = _nonfinite(NUMPY, data)
        clean = xp.where(bad, NUMPY.eye(n, dtype=data.dtype), x)
        poison = NUMPY.where(bad, _NAN, 0.0).astype(data.dtype)
        # x * poison: 0 with a zero derivative for a finite matrix, nan with a nan
        # derivative for the others (where() alone would give them a derivative of 0)
        return _cofactor_graph(xp, clean, None) + x * poison
    try:
        x_inv = xp.inv(x)
    except DomainError:
        return cofactor_minors(xp, x)
    if not _well_conditioned(data, x_inv.data):
        return cofactor_minors(xp, x)
    if ae is None:
        ae = xp.expand_dims(xp.expand_dims(xp.det(x), -1), -1)
    return ae * swap(xp, x_inv)


def _det_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    ge = xp.expand_dims(xp.expand_dims(g, -1), -1)
    ae = xp.expand_dims(xp.expand_dims(ans, -1), -1)
    if isinstance(x, Tensor):
        return ge * _cofactor_graph(xp, x, ae)
    return ge * _cofactor(xp, x, ae)


DET = primitive(
    "det",
    _det_fwd,
    _det_vjp,
    saves=("x", "ans"),
    doc="g det(A) A^-T (the adjugate for singular A)",
)
INV = primitive(
    "inv",
    _inv_fwd,
    lambda xp, g, ans, ctx: -xp.matmul(xp.matmul(swap(xp, ans), g), swap(xp, ans)),
    saves=("ans",),
    doc="-A^-T g A^-T",
)


def _solve_vjp_b(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, b: Any) -> Any:
    if b.ndim == 1:
        return _solve_any(xp, swap(xp, a), xp.expand_dims(g, -1))[..., 0]
    return _solve_any(xp, swap(xp, a), g)


def _solve_vjp_a(xp: Any, g: Any, ans: Any, ctx: Any, a: Any, b: Any) -> Any:
    gb = _solve_vjp_b(xp, g, ans, ctx, a, b)
    if b.ndim == 1:
        return -(xp.expand_dims(gb, -1) * xp.expand_dims(ans, -2))
    return -xp.matmul(gb, swap(xp, ans))


SOLVE = primitive(
    "solve",
    _solve_fwd,
    _solve_vjp_a,
    _solve_vjp_b,
    saves=("a", "b", "ans"),
    inputs=("a", "b"),
    broadcasts=True,
    doc="db = A^-T g, dA = -db x^T",
)


def _matmul2(x: Tensor, y: Tensor) -> Tensor:
    xs, ys = x.data.shape, y.data.shape
    if xs[-1] != ys[-2]:
        raise ShapeError(
            msg(
                "matmul: shapes {xs} and {ys} do not fit (inner dimensions {xs2} and {ys2})",
                xs=xs,
                ys=ys,
                xs2=xs[-1],
                ys2=ys[-2],
            )
        )
    try:
        batch = broadcast_shape(xs[:-2], ys[:-2])
    except ValueError:
        raise ShapeError(
            msg("matmul: batch shapes of {xs} and {ys} cannot be broadcast", xs=xs, ys=ys)
        ) from None
    check_size((*batch, xs[-2], ys[-1]), "matmul")
    prim = MM if len(xs) == 2 and len(ys) == 2 else MATMUL
    product = NUMPY.matmul
    return record(product(x.data, y.data), prim, (x, y), (x.data, y.data), (xs, ys), product)


@public(None, "matrix product (NumPy's rules); also a @ b", derivative=MATMUL.doc)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with NumPy's rules (1-D operands are promoted, then squeezed)."""
    x = lift(a, b if isinstance(b, Tensor) else None)
    y = lift(b, x)
    if x.data.ndim == 0 or y.data.ndim == 0:
        raise ShapeError(
            msg(
                "matmul: needs tensors of at least one dimension, got shapes {shape} and "
                "{shape2} (use * for scalars)",
                shape=x.data.shape,
                shape2=y.data.shape,
            )
        )
    xv, yv = x.data.ndim == 1, y.data.ndim == 1
    if yv:
        if x.data.shape[-1] != y.data.shape[0]:
            raise ShapeError(
                msg(
                    "matmul: shapes {shape} and {shape2} do not fit",
                    shape=x.data.shape,
                    shape2=y.data.shape,
                )
            )
        if xv:
            out = NUMPY.matmul(x.data, y.data)
            return record(out, DOT, (x, y), (x.data, y.data), redo=NUMPY.matmul)
        shapes = (x.data.shape, y.data.shape)
        out = NUMPY.matmul(x.data, y.data)
        return record(out, MV, (x, y), (x.data, y.data), shapes, NUMPY.matmul)
    xm = reshape(x, (1, x.data.shape[0])) if xv else x
    try:
        out = _matmul2(xm, y)
    except ShapeError:
        raise ShapeError(
            msg(
                "matmul: shapes {shape} and {shape2} do not fit",
                shape=x.data.shape,
                shape2=y.data.shape,
            )
        ) from None
    if xv:
        out = reshape(out, out.data.shape[:-2] + out.data.shape[-1:])
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
            msg(
                "dot: supports 1-D and 2-D tensors, got shapes {shape} and {shape2} (use "
                "matmul for batches)",
                shape=x.data.shape,
                shape2=y.data.shape,
            )
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
        raise ShapeError(
            msg("trace: needs at least 2 dimensions, got shape {shape}", shape=x.data.shape)
        )
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
    raise ShapeError(msg("diag: needs a 1-D or 2-D tensor, got shape {shape}", shape=x.data.shape))


def _square_matrix(x: Tensor, what: str) -> None:
    s = x.data.shape
    if x.data.ndim < 2 or s[-1] != s[-2]:
        raise ShapeError(
            msg("{what}: needs a square matrix (or a batch of them), got shape {s}", what=what, s=s)
        )


@public(DET, "determinant")
def det(prim: Primitive, x: Tensor) -> Tensor:
    """Determinant of a square matrix (batched over leading axes)."""
    x = lift(x)
    eager_only("det", x.data)
    _square_matrix(x, "det")
    fwd = prim.fwd

    def redo(xd: Any) -> Any:
        return NUMPY.asarray(fwd(NUMPY, xd), dtype=xd.dtype)

    return record(redo(x.data), prim, (x,), (x.data,), redo=redo)


@public(INV, "matrix inverse")
def inv(prim: Primitive, x: Tensor) -> Tensor:
    """Inverse of a square matrix; a singular matrix is a domain error."""
    x = lift(x)
    eager_only("inv", x.data)
    _square_matrix(x, "inv")
    try:
        data = prim.fwd(NUMPY, x.data)
    except NUMPY.LinAlgError:
        raise DomainError(msg("inv: the matrix is singular (it has no inverse)")) from None
    return record(data, prim, (x,), redo=functools.partial(prim.fwd, NUMPY))


@public(SOLVE, "x with a @ x == b", method=False)
def solve(prim: Primitive, a: Tensor, b: Tensor) -> Tensor:
    """``x`` with ``a @ x == b`` (NumPy 2 rules: a 1-D ``b`` is a vector)."""
    a = lift(a, b if isinstance(b, Tensor) else None)
    b = lift(b, a)
    eager_only("solve", a.data, b.data)
    _square_matrix(a, "solve")
    n = a.data.shape[-1]
    if b.data.ndim == 0 or (b.data.shape[-1] if b.data.ndim == 1 else b.data.shape[-2]) != n:
        raise ShapeError(
            msg(
                "solve: shapes {shape} and {shape2} do not fit",
                shape=a.data.shape,
                shape2=b.data.shape,
            )
        )
    try:
        data = prim.fwd(NUMPY, a.data, b.data)
    except NUMPY.LinAlgError:
        raise DomainError(msg("solve: the matrix is singular")) from None
    except ValueError:
        raise ShapeError(
            msg(
                "solve: shapes {shape} and {shape2} do not fit",
                shape=a.data.shape,
                shape2=b.data.shape,
            )
        ) from None
    redo = functools.partial(prim.fwd, NUMPY)
    return record(data, prim, (a, b), (a.data, b.data), (a.data.shape, b.data.shape), redo)
