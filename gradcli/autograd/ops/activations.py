"""Activations and the error function: ``erf``, ``gelu``, ``leaky_relu``, ``elu``, ``softsign``
and ``logaddexp``, each with its derivative beside its forward function.

The values and derivatives are PyTorch's, at kinks too (docs/conventions.md): ``leaky_relu``
has the slope at 0, ``elu`` has ``alpha`` at 0 and a second derivative of 0 there. ``erf`` is
computed here with array operations only (NumPy has none, and the backends must run it
lazily too): fdlibm's rational approximations, vectorised (docs/engine.md, "The error
function").
"""

from __future__ import annotations

import math
import struct
from typing import Any

from ...errors import InvalidValueError
from ...i18n import msg
from ..backend import NUMPY, on_data
from ..families import binary, unary
from ..registry import Primitive, primitive, public
from ..tensor import Tensor, lift, record

# ---- erf ------------------------------------------------------------------------------------
#
# Sun's fdlibm s_erf.c (1993; the algorithm of glibc's and so of Python's math.erf), with
# its coefficients, its polynomials evaluated in its order (Horner, from the highest one):
#
#   |x| < 2**-28             x + efx x
#   |x| < 0.84375            x + x P(x^2) / Q(x^2)
#   0.84375 <= |x| < 1.25    erx + P1(s) / Q1(s),  s = |x| - 1
#   1.25 <= |x| < 6          1 - exp(-z^2 - 0.5625) exp((z - |x|)(z + |x|) + R(u) / S(u)) / |x|,
#                            u = 1 / x^2, z = |x| to 21 bits (z^2 exact); R/S of two
#                            approximations split at 1/0.35
#   |x| >= 6                 1 (erf(x) rounds to 1 from 5.9216 on)
#
# with the sign of x. A NumPy array takes each element through its own branch; another
# backend's (a lazy graph has no assignment through a mask) takes every branch on every
# element, each reading its argument clamped into its own interval (so that none overflows or
# divides by zero where it is not used: no floating-point error is counted that the result
# does not have), and selects with ``where``: the same bits. Against math.erf on 4.1 million
# arguments, tails and subnormals included (tests/test_fn_activations.py): at most 1 ulp
# apart, equal on 98% of them.

_ERX = 8.45062911510467529297e-01
_EFX = 1.28379167095512586316e-01
_EFX8 = 1.02703333676410069053e00
_PP = (
    1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
    -5.77027029648944159157e-03, -2.37630166566501626084e-05,
)  # fmt: skip
_QQ = (
    1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
    1.32494738004321644526e-04, -3.96022827877536812320e-06,
)  # fmt: skip
_PA = (
    -2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
    3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
)  # fmt: skip
_QA = (
    1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
    1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02,
)  # fmt: skip
_RA = (
    -9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
    -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
    -8.12874355063065934246e01, -9.81432934416914548592e00,
)  # fmt: skip
_SA = (
    1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
    6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
    6.57024977031928170135e00, -6.04244152148580987438e-02,
)  # fmt: skip
_RB = (
    -9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
    -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
    -4.83519191608651397019e02,
)  # fmt: skip
_SB = (
    1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
    3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
    -2.24409524465858183362e01,
)  # fmt: skip
#: the split between R/S's two approximations: the double whose high word is 0x4006DB6E
#: (just below 1/0.35), as fdlibm compares it
_SPLIT = struct.unpack(">d", struct.pack(">Q", 0x4006DB6E << 32))[0]
_TINY = 2.0**-28  # below it, erf(x) = x + efx x
_SUBTINY = 2.0**-1015  # below it, computed as (8x + 8 efx x) / 8, so as not to underflow

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)  # M_2_SQRTPI
_ndarray = NUMPY.ndarray


def _poly(t: Any, coefs: tuple[float, ...]) -> Any:
    """``c0 + t (c1 + t (c2 + ...))``, the innermost term first."""
    acc: Any = coefs[-1]
    for c in coefs[-2::-1]:
        acc = c + t * acc
    return acc


def _erf_tiny(xp: Any, x: Any) -> Any:
    """erf(x) for |x| < 2**-28, from x itself (so erf(-x) = -erf(x) to the bit, and -0.0
    stays -0.0)."""
    return xp.where(xp.abs(x) < _SUBTINY, 0.125 * (8.0 * x + _EFX8 * x), x + _EFX * x)


def _erf_small(xp: Any, x: Any) -> Any:
    """erf(x) for 2**-28 <= |x| < 0.84375, from x itself."""
    z = x * x
    return x + x * (_poly(z, _PP) / _poly(z, _QQ))


def _erf_middle(xp: Any, a: Any) -> Any:
    """erf(a) for 0.84375 <= a < 1.25."""
    s = a - 1.0
    return _ERX + _poly(s, _PA) / _poly(s, _QA)


def _erf_tail(xp: Any, a: Any, rs: Any) -> Any:
    """erf(a) for 1.25 <= a < 6, ``rs`` the coefficients of R/S for a: ``(R, S)`` below the
    split, above it, or both as ``(near, (RA, SA), (RB, SB))`` to be chosen per element."""
    u = 1.0 / (a * a)
    if len(rs) == 3:
        near, (ra, sa), (rb, sb) = rs
        r = xp.where(near, _poly(u, ra), _poly(u, rb))
        q = xp.where(near, _poly(u, sa), _poly(u, sb))
    else:
        r, q = _poly(u, rs[0]), _poly(u, rs[1])
    # z: a with the low 32 bits of its 52-bit fraction cleared (fdlibm's SET_LOW_WORD)
    scale = xp.where(a < 2.0, 2.0**20, xp.where(a < 4.0, 2.0**19, 2.0**18))
    z = xp.floor(a * scale) / scale
    return 1.0 - xp.exp(-z * z - 0.5625) * xp.exp((z - a) * (z + a) + r / q) / a


def _erf_where(xp: Any, x: Any) -> Any:
    """Every branch on every element, each reading its argument clamped into its interval
    (nothing overflows or divides by zero where it is not selected), selected by ``where``:
    for arrays that are not NumPy's (a lazy graph has no assignment to a mask)."""
    ax = xp.abs(x)
    xs = xp.where(ax < 0.84375, x, 0.0)
    small = xp.where(ax < _TINY, _erf_tiny(xp, xs), _erf_small(xp, xs))
    middle = _erf_middle(xp, xp.minimum(xp.maximum(ax, 0.84375), 1.25))
    # a nan stays a nan through maximum and minimum: it is taken from here
    a = xp.minimum(xp.maximum(ax, 1.25), 6.0)
    tail = _erf_tail(xp, a, (a < _SPLIT, (_RA, _SA), (_RB, _SB)))
    large = xp.where(ax < 1.25, middle, xp.where(ax >= 6.0, 1.0, tail))
    return xp.where(ax < 0.84375, small, xp.where(x < 0, -large, large))


#: the branches of |x| for ``_erf_by_branch``: interval, the function of |x| or of x
#: (signed), and its extra argument
_BRANCHES: tuple[tuple[float, float, Any, bool, Any], ...] = (
    (0.0, _TINY, _erf_tiny, True, None),
    (_TINY, 0.84375, _erf_small, True, None),
    (0.84375, 1.25, _erf_middle, False, None),
    (1.25, _SPLIT, _erf_tail, False, (_RA, _SA)),
    (_SPLIT, 6.0, _erf_tail, False, (_RB, _SB)),
)


def _erf_by_branch(xp: Any, x: Any) -> Any:
    """The same numbers for a NumPy array, each element through its own branch only."""
    ax = xp.abs(x)
    out = xp.where(ax >= 6.0, xp.where(x < 0, -1.0, 1.0), x)  # a nan stays
    for lo, hi, branch, signed, extra in _BRANCHES:
        part = (ax >= lo) & (ax < hi)
        if not part.any():
            continue
        arg = x[part] if signed else ax[part]
        value = branch(xp, arg) if extra is None else branch(xp, arg, extra)
        out[part] = value if signed else xp.where(x[part] < 0, -value, value)
    return out


def _erf64(xp: Any, x: Any) -> Any:
    if type(x) is _ndarray and x.ndim and x.size >= 64:
        return _erf_by_branch(xp, x)
    return _erf_where(xp, x)


def erf_forward(xp: Any, x: Any) -> Any:
    """The error function of an array (float64 accuracy: within 1 ulp of ``math.erf``).
    Other float types are computed in float64 and rounded back."""
    if x.dtype != xp.float64:
        return xp.astype(_erf64(xp, xp.astype(x, xp.float64)), x.dtype)
    return _erf64(xp, x)


erf = unary(
    "erf",
    erf_forward,
    factor=lambda xp, ans, ctx, x: _TWO_OVER_SQRT_PI * xp.exp(-(x * x)),
    saves=("x",),
    doc="g 2/sqrt(pi) exp(-x^2)",
    summary="error function 2/sqrt(pi) integral of exp(-t^2) from 0 to x",
)


# ---- gelu: x Phi(x), or its tanh approximation ---------------------------------------------

_SQRT1_2 = math.sqrt(0.5)  # M_SQRT1_2
#: 1 / sqrt(2 pi), the normal density at 0, as torch writes it: M_2_SQRTPI M_SQRT1_2 / 2
_PDF0 = _TWO_OVER_SQRT_PI * _SQRT1_2 * 0.5
#: sqrt(2 / pi), torch's M_SQRT2 M_2_SQRTPI / 2
_BETA = math.sqrt(2.0) * _TWO_OVER_SQRT_PI * 0.5
_KAPPA = 0.044715
#: beyond it (beyond 10, in fact) tanh of the tanh form's inner argument is +-1 exactly:
#: clamping there keeps x^3 from overflowing, in float32 too (a counted error the value does
#: not have), and changes no number
_TANH_FLAT = 1e10
GELU_FORMS = ("none", "tanh")


def _gelu_forward(xp: Any, x: Any, approximate: str) -> Any:
    if approximate == "tanh":
        xc = xp.clip(x, -_TANH_FLAT, _TANH_FLAT)
        return 0.5 * x * (1.0 + xp.tanh(_BETA * (xc + _KAPPA * (xc * xc * xc))))
    return x * 0.5 * (1.0 + erf_forward(xp, x * _SQRT1_2))


def _gelu_vjp(xp: Any, g: Any, ans: Any, ctx: str, x: Any) -> Any:
    if ctx == "tanh":  # torch's GeluBackward: d/dx of 0.5 x (1 + tanh(inner))
        xc = xp.clip(x, -_TANH_FLAT, _TANH_FLAT)
        x_sq = xc * xc
        t = xp.tanh(_BETA * (xc + _KAPPA * (x_sq * xc)))
        left = 0.5 * x
        slope = left * (1.0 - t * t) * _BETA * (1.0 + 3.0 * _KAPPA * x_sq)
        return g * (0.5 * (1.0 + t) + slope)
    cdf = 0.5 * (1.0 + xp.erf(x * _SQRT1_2))
    pdf = _PDF0 * xp.exp(x * x * -0.5)
    return g * (cdf + x * pdf)


GELU = primitive(
    "gelu",
    _gelu_forward,
    _gelu_vjp,
    saves=("x",),
    doc="g (Phi(x) + x phi(x)), Phi and phi the normal cdf and density; "
    'approximate="tanh": the derivative of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))',
)


@public(GELU, 'x Phi(x) (Gaussian error linear unit); approximate="tanh": its tanh form')
def gelu(prim: Primitive, x: Tensor, approximate: str = "none") -> Tensor:
    """``x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))``, or with ``approximate="tanh"`` torch's
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    if approximate not in GELU_FORMS:
        raise InvalidValueError(
            msg(
                'gelu: approximate must be "none" or "tanh", not "{approximate}"',
                approximate=approximate,
            )
        )
    x = lift(x)
    redo = on_data(prim.fwd, approximate=approximate)
    return record(redo(x.data), prim, (x,), (x.data,), approximate, redo)


# ---- leaky_relu and elu: PyTorch's derivatives at 0 ----------------------------------------

LEAKY_RELU = primitive(
    "leaky_relu",
    lambda xp, x, slope: xp.where(x > 0, x, x * slope),
    # torch: x > 0 ? g : g * negative_slope, so the slope at x = 0
    lambda xp, g, ans, ctx, x: xp.where(x > 0, g, g * ctx),
    saves=("x",),
    doc="g where x > 0, else negative_slope g  (negative_slope at x = 0)",
)


@public(LEAKY_RELU, "x where x > 0, else negative_slope x")
def leaky_relu(prim: Primitive, x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``; the derivative at 0 is the slope,
    as torch's."""
    x = lift(x)
    slope = float(negative_slope)
    redo = on_data(prim.fwd, slope=slope)
    return record(redo(x.data), prim, (x,), (x.data,), slope, redo)


def _elu_forward(xp: Any, x: Any, alpha: float) -> Any:
    # expm1 of the non-positive part only: expm1(1000) would overflow where x is kept
    return xp.where(x <= 0, xp.expm1(xp.where(x <= 0, x, 0.0)) * alpha, x)


def _elu_vjp(xp: Any, g: Any, ans: Any, ctx: float, x: Any) -> Any:
    # torch's elu_backward: alpha exp(x) where x <= 0 (alpha at 0), else 1 (a nan takes 1).
    # The exponent reads x only where x < 0, so the second derivative at 0 is 0, as torch's
    # elu_double_backward (which masks with x < 0).
    return g * xp.where(x <= 0, xp.exp(xp.where(x < 0, x, 0.0)) * ctx, 1.0)


ELU = primitive(
    "elu",
    _elu_forward,
    _elu_vjp,
    saves=("x",),
    doc="g where x > 0, else g alpha exp(x)  (alpha at x = 0)",
)


@public(ELU, "x where x > 0, else alpha (exp(x) - 1)")
def elu(prim: Primitive, x: Tensor, alpha: float = 1.0) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``; the derivative at 0 is
    ``alpha``, as torch's."""
    x = lift(x)
    a = float(alpha)
    redo = on_data(prim.fwd, alpha=a)
    return record(redo(x.data), prim, (x,), (x.data,), a, redo)


# ---- softsign and logaddexp ------------------------------------------------------------------


def _softsign_divisor(xp: Any, ans: Any, ctx: Any, x: Any) -> Any:
    """``(1 + |x|)^2``; nan at x = +-inf (where the value, inf / inf, is nan), as torch's
    softsign, which is ``x / (1 + |x|)`` differentiated as a quotient."""
    d = xp.abs(x) + 1.0
    return d * (d + (x - x))  # x - x: 0, or nan at +-inf


softsign = unary(
    "softsign",
    lambda xp, x: x / (xp.abs(x) + 1.0),
    divisor=_softsign_divisor,
    saves=("x",),
    doc="g / (1 + |x|)^2",
    summary="x / (1 + |x|)",
)


def _logaddexp_forward(xp: Any, a: Any, b: Any) -> Any:
    """``max(a, b) + log1p(exp(-|a - b|))``, torch's formula; where a == b the difference is
    taken as 0, so that a == b == +-inf gives +-inf without an inf - inf."""
    same = a == b
    d = xp.where(same, 0.0, a) - xp.where(same, 0.0, b)
    return xp.maximum(a, b) + xp.log1p(xp.exp(-xp.abs(d)))


logaddexp = binary(
    "logaddexp",
    _logaddexp_forward,
    # torch: g / (1 + exp(b - a)), the same numbers; nan where a == b == +-inf
    lambda xp, g, ans, ctx, x, y: g * xp.sigmoid(x - y),
    lambda xp, g, ans, ctx, x, y: g * xp.sigmoid(y - x),
    saves=("x", "y"),
    doc="da = g sigmoid(a - b), db = g sigmoid(b - a)  (g/2 each where a == b)",
    summary="log(exp(a) + exp(b)), stable for large |a|, |b|",
)

__all__ = ["elu", "erf", "erf_forward", "gelu", "leaky_relu", "logaddexp", "softsign"]
