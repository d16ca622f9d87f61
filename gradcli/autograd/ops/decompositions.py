"""Linear algebra through a factorisation: slogdet (LU), cholesky, pinv (SVD)
(docs/conventions.md, "Linear algebra"). The products, det, inv and solve are in linalg.py."""

from __future__ import annotations

import builtins
import functools
from typing import Any, NamedTuple

from ...errors import DomainError, InvalidValueError, ShapeError
from ...i18n import msg
from ..backend import NUMPY, eager_only
from ..registry import Primitive, primitive, public
from ..state import OFF_DEFAULT, RECORD, STATE
from ..tensor import Tensor, const, lift, note, record
from .linalg import (
    _NAN,
    _cofactor,
    _cofactor_graph,
    _det_fwd,
    _dtype,
    _has_nan,
    _square_matrix,
    swap,
)

# --- slogdet, cholesky, pinv (docs/conventions.md, "Linear algebra") ---------------------


class SlogdetResult(NamedTuple):
    """``torch.linalg.slogdet``'s result: ``det = sign * exp(logabsdet)``."""

    sign: Tensor
    logabsdet: Tensor


def _slogdet_arrays(xp: Any, x: Any) -> tuple[Any, Any]:
    """``(sign, logabsdet)`` as arrays of x's dtype; a matrix with a nan entry (or whose
    logabsdet comes out nan) has sign 0 and logabsdet nan, as torch's."""
    if xp.all_finite(x):
        sign, log = xp.slogdet(x)
    else:
        nan = _has_nan(x, (-2, -1))  # (LAPACK is not given these, as in det)
        sign, log = xp.slogdet(xp.where(nan, xp.eye(x.shape[-1], dtype=x.dtype), x))
        log = xp.where(nan[..., 0, 0], _NAN, log)
        sign = xp.where(log != log, 0.0, sign)
    return NUMPY.asarray(sign, dtype=x.dtype), NUMPY.asarray(log, dtype=x.dtype)


def _inv_t(xp: Any, x: Any) -> Any:
    """A^-T per matrix (arrays): nan for a matrix with a nan entry, and for a singular one
    the transposed adjugate over det(A) = ±0 (±inf, or nan where the adjugate is 0)."""
    nan = _has_nan(x, (-2, -1))
    if nan.any():
        clean = xp.where(nan, xp.eye(x.shape[-1], dtype=x.dtype), x)
        return xp.where(nan, _NAN, _inv_t(xp, clean))
    try:
        return swap(xp, xp.inv(x))
    except xp.LinAlgError:
        ae = xp.expand_dims(xp.expand_dims(_det_fwd(xp, x), -1), -1)
        return _cofactor(xp, x, ae) / ae


def _slogdet_vjp(xp: Any, g: Any, ans: Any, ctx: Any, x: Any) -> Any:
    ge = xp.expand_dims(xp.expand_dims(g, -1), -1)
    if not isinstance(x, Tensor):
        return ge * _inv_t(xp, x)
    try:
        return ge * swap(xp, xp.inv(x))
    except DomainError:  # singular: adj(A)^T / det(A), as on arrays
        de = xp.expand_dims(xp.expand_dims(xp.det(x), -1), -1)
        return ge * _cofactor_graph(xp, x, de) / de


SLOGDET = primitive(
    "slogdet",
    lambda xp, x: _slogdet_arrays(xp, x)[1],
    _slogdet_vjp,
    saves=("x",),
    doc="d logabsdet = g A^-T; none to sign",
)


def _lower(n: int, dtype: Any, k: int = 0) -> Any:
    """The mask of the lower triangle (from diagonal ``k``), as 1.0 / 0.0."""
    ij = NUMPY.arange(n)
    return NUMPY.astype(ij[:, None] + k >= ij[None, :], dtype)


def _not_positive_definite(xp: Any, x: Any) -> DomainError:
    """torch's error: which matrix of a batch, and its first leading minor that is not
    positive definite (the smallest order whose factorisation fails, by bisection)."""

    def fails(a: Any) -> bool:
        try:
            d = xp.cholesky(a)
        except xp.LinAlgError:
            return True
        return bool((d != d).any())

    batch = x.shape[:-2]
    flat = xp.reshape(x, (-1, *x.shape[-2:]))
    i = next((i for i in range(flat.shape[0]) if fails(flat[i])), 0)
    lo, hi = 1, x.shape[-1]  # the order sought is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(flat[i][:mid, :mid]) else (mid + 1, hi)
    index: list[int] = []
    for size in reversed(batch):
        i, r = divmod(i, size)
        index.insert(0, r)
    where = (
        msg("the matrix at batch index {index}", index=tuple(index)) if batch else msg("the matrix")
    )
    return DomainError(
        msg(
            "cholesky: {where} is not positive definite (its leading minor of order {lo} is not)",
            where=where,
            lo=lo,
        )
    )


def _cholesky_fwd(xp: Any, x: Any) -> Any:
    """L with A = L L^T, from A's lower triangle; a matrix that is not positive definite,
    or whose factorisation meets a nan, is a domain error, as torch's."""
    try:
        out = xp.cholesky(x)
    except xp.LinAlgError:
        raise _not_positive_definite(xp, x) from None
    diagonal = xp.sum(out * NUMPY.eye(x.shape[-1], dtype=x.dtype), axis=-1)
    if not bool((diagonal == diagonal).all()):  # NumPy gives nan where LAPACK stopped
        raise _not_positive_definite(xp, x)
    return out


def _cholesky_vjp(xp: Any, g: Any, ans: Any, ctx: Any) -> Any:
    # torch's: L^-T Φ L^-1 with Φ = tril(L^T g) symmetrised, its diagonal halved
    lt = swap(xp, ans)
    n = ans.shape[-1]
    p = xp.matmul(lt, g) * _lower(n, _dtype(ans))
    p = 0.5 * (p + swap(xp, p * _lower(n, _dtype(ans), -1)))
    y = xp.solve(lt, p)  # L^-T Φ
    return swap(xp, xp.solve(lt, swap(xp, y)))  # (L^-T (L^-T Φ)^T)^T = L^-T Φ L^-1


CHOLESKY = primitive(
    "cholesky",
    _cholesky_fwd,
    _cholesky_vjp,
    saves=("ans",),
    doc="L^-T Φ(L^T g) L^-1, Φ: the lower triangle symmetrised with its diagonal halved",
)


def _pinv_fwd(xp: Any, x: Any, atol: float | None = None, rtol: float | None = None) -> Any:
    """torch.linalg.pinv through the SVD: singular values at or below max(atol, rtol σ₁)
    count as 0; rtol is eps max(m, n) unless atol > 0 is given (then 0)."""
    m, n = x.shape[-2:]
    if x.size == 0:
        return xp.zeros((*x.shape[:-2], n, m), dtype=x.dtype)
    u, s, vt = xp.svd(x, full_matrices=False)
    if rtol is None:
        eps = 2.0**-52 if x.dtype.itemsize >= 8 else 2.0**-23
        rtol = eps * builtins.max(m, n) if not atol or atol <= 0 else 0.0
    cutoff = xp.maximum(rtol * s[..., :1], 0.0 if atol is None else atol)
    kept = s > cutoff
    s_inv = xp.where(kept, 1.0 / xp.where(kept, s, 1.0), 0.0)
    return xp.matmul(swap(xp, vt) * s_inv[..., None, :], swap(xp, u))


def _pinv_vjp(xp: Any, g: Any, ans: Any, ctx: Any, a: Any) -> Any:
    # torch's pinv_backward (constant rank), written with the smaller products
    p, ph, gh = ans, swap(xp, ans), swap(xp, g)
    mm = xp.matmul
    if a.shape[-2] <= a.shape[-1]:
        k = mm(gh, p)
        kph = mm(k, ph)
        return -swap(xp, mm(p, k)) + kph - mm(mm(a, p), kph) + mm(mm(ph, p), gh - mm(k, a))
    k = mm(p, gh)
    phk = mm(ph, k)
    return -swap(xp, mm(k, p)) + mm(mm(gh - mm(a, k), p), ph) + phk - mm(mm(phk, p), a)


PINV = primitive(
    "pinv",
    _pinv_fwd,
    _pinv_vjp,
    saves=("x", "ans"),
    doc="-P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A), P = pinv(A), at constant rank",
)


def _matrix(x: Tensor, what: str) -> None:
    if x.data.ndim < 2:
        raise ShapeError(
            msg(
                "{what}: needs a matrix (or a batch of them), got shape {shape}",
                what=what,
                shape=x.data.shape,
            )
        )


@public(SLOGDET, "sign and log|det| (in a program: their stack, [sign, logabsdet])")  # type: ignore[arg-type]
def slogdet(prim: Primitive, x: Tensor) -> SlogdetResult:
    """``(sign, logabsdet)`` with det = sign * exp(logabsdet), as torch.linalg.slogdet; no
    gradient flows through the sign (a constant). A program gets their stack."""
    x = lift(x)
    eager_only("slogdet", x.data)
    _square_matrix(x, "slogdet")
    sign, log = _slogdet_arrays(NUMPY, x.data)

    def signs(xd: Any) -> Any:
        return _slogdet_arrays(NUMPY, xd)[0]

    def logs(xd: Any) -> Any:
        return _slogdet_arrays(NUMPY, xd)[1]

    s = const(sign)
    if OFF_DEFAULT and STATE.mode == RECORD:  # a plan's step, as a comparison is
        note(s, "slogdet", (x,), signs, RECORD)
    return SlogdetResult(s, record(log, prim, (x,), (x.data,), redo=logs))


@public(CHOLESKY, "lower Cholesky factor L of a positive definite A = L L^T")
def cholesky(prim: Primitive, x: Tensor) -> Tensor:
    """torch.linalg.cholesky: L lower triangular with A = L L^T, read from A's lower
    triangle; not positive definite is a domain error."""
    x = lift(x)
    eager_only("cholesky", x.data)
    _square_matrix(x, "cholesky")
    redo = functools.partial(prim.fwd, NUMPY)
    return record(redo(x.data), prim, (x,), redo=redo)


@public(PINV, "Moore-Penrose pseudo-inverse (torch.linalg.pinv)", method=False)
def pinv(
    prim: Primitive, x: Tensor, atol: float | None = None, rtol: float | None = None
) -> Tensor:
    """torch.linalg.pinv through the SVD, with its tolerances; a nan or infinite entry is a
    domain error."""
    x = lift(x)
    eager_only("pinv", x.data)
    _matrix(x, "pinv")
    for name, tol in (("atol", atol), ("rtol", rtol)):
        if tol is not None and not tol >= 0.0:
            raise InvalidValueError(
                msg("pinv: {name} must be a number >= 0, got {tol}", name=name, tol=tol)
            )
    if not NUMPY.all_finite(x.data):
        raise DomainError(
            msg("pinv: the matrix has a nan or infinite entry (its SVD does not exist)")
        )
    redo = functools.partial(prim.fwd, NUMPY, atol=atol, rtol=rtol)
    return record(redo(x.data), prim, (x,), (x.data,), redo=redo)
