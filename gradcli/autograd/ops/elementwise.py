"""Elementwise primitives: one registration each, the derivative beside the forward.

Parameters of rules: ``xp`` the namespace, ``g`` the incoming gradient, ``ans`` the output,
``ctx`` the static context, then the inputs the rule reads (``x``, ``y``). A unary rule is a
``factor`` (the VJP is ``g * factor``) or a ``divisor`` (``g / divisor``) where it can be.
Gradient conventions at kinks are PyTorch's (docs/conventions.md).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ...errors import InvalidValueError
from ...i18n import msg
from ..backend import NUMPY, on_data
from ..families import binary, unary
from ..node import FACTOR, identity
from ..registry import OPS, TENSOR_ONLY, Primitive, public
from ..replay import opaque
from ..shapes import check_broadcast
from ..state import OFF_DEFAULT, RECORD, STATE
from ..tensor import Tensor, const, lift, note, record

LN2 = math.log(2.0)
LN10 = math.log(10.0)


def _zero(xp: Any, g: Any, ans: Any, ctx: Any) -> Any:
    return xp.zeros_like(g)


# a constant of zeros needs no recording (and, in a rule, no gradient)
TENSOR_ONLY["zeros_like"] = lambda x: const(NUMPY.zeros_like(x.data))
TENSOR_ONLY["constant"] = lambda value, dtype: const(NUMPY.constant(value, dtype))


_ndarray = NUMPY.ndarray
#: tanh's factor on float64 arrays, the common case, reads its one without a call
_ONE64 = NUMPY.constant(1.0, "float64")
_FLOAT64 = _ONE64.dtype


def _tanh_factor(xp: Any, ans: Any, ctx: Any) -> Any:
    """``1 - ans^2``. On large arrays as ``-(ans ans - 1)``, the same bits, where NumPy
    reuses the temporary ``ans ans`` for the subtraction (one array less at the peak of
    backward); on small ones, and on tensors (``create_graph``), the plain form."""
    if type(ans) is _ndarray:
        if ans.size >= 1 << 14:
            return -(ans * ans - 1.0)
        if ans.dtype is _FLOAT64:
            return _ONE64 - ans * ans
    return xp.constant(1.0, ans.dtype) - ans * ans


def _sigmoid(xp: Any, x: Any) -> Any:
    # exp of a non-positive number never overflows: stable at |x| = 1000.
    e = xp.exp(-xp.abs(x))
    return xp.astype(xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), x.dtype)


def _softplus(xp: Any, x: Any) -> Any:
    return xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(x, 0)


# The local factor is masked before g multiplies it, and the product again (so that it is +0
# whatever g's sign): the rule's derivative in g is then the masked factor, never 0 * inf, and
# forward mode by the double-VJP gives torch's 0 for x ** y at x = 0 (docs/commands.md, "jvp").
def _masked(xp: Any, mask: Any, g: Any, factor: Any) -> Any:
    return xp.where(mask, 0.0, g * xp.where(mask, 0.0, factor))


# fmt: off
# ---- one input ------------------------------------------------------------------------
negative = unary("neg", "negative", factor=lambda xp, ans, ctx: -1.0, saves=(),
                 doc="-g", summary="-x", public_name="negative", language=False, method=False)
abs = unary("abs", "abs", factor=lambda xp, ans, ctx, x: xp.sign(x), saves=("x",),
            doc="g * sign(x)  (0 at x = 0)", summary="absolute value", api_aliases=("absolute",))
sign = unary("sign", "sign", vjp=_zero, saves=(), doc="0", summary="sign (-1, 0 or 1)")
sqrt = unary("sqrt", "sqrt", divisor=lambda xp, ans, ctx: ans * 2.0, saves=("ans",),
             doc="g / (2 sqrt(x))  (inf at 0)", summary="square root")
square = unary("square", "square", factor=lambda xp, ans, ctx, x: x * 2.0, saves=("x",),
               doc="2 x g", summary="x * x")
exp = unary("exp", "exp", factor="ans", saves=("ans",),
            doc="g * exp(x)", summary="e ** x")
expm1 = unary("expm1", "expm1", factor=lambda xp, ans, ctx: ans + 1.0, saves=("ans",),
              doc="g * exp(x)", summary="exp(x) - 1, accurate near 0")
log = unary("log", "log", divisor="x", saves=("x",),
            doc="g / x", summary="natural logarithm")
log2 = unary("log2", "log2", divisor=lambda xp, ans, ctx, x: x * LN2, saves=("x",),
             doc="g / (x ln 2)", summary="base-2 logarithm")
log10 = unary("log10", "log10", divisor=lambda xp, ans, ctx, x: x * LN10, saves=("x",),
              doc="g / (x ln 10)", summary="base-10 logarithm")
log1p = unary("log1p", "log1p", divisor=lambda xp, ans, ctx, x: x + 1.0, saves=("x",),
              doc="g / (1 + x)", summary="log(1 + x), accurate near 0")
sin = unary("sin", "sin", factor=lambda xp, ans, ctx, x: xp.cos(x), saves=("x",),
            doc="g cos(x)", summary="sine")
cos = unary("cos", "cos", factor=lambda xp, ans, ctx, x: -xp.sin(x), saves=("x",),
            doc="-g sin(x)", summary="cosine")
tan = unary("tan", "tan", factor=lambda xp, ans, ctx: ans * ans + 1.0, saves=("ans",),
            doc="g (1 + tan(x)^2)", summary="tangent")
arcsin = unary("arcsin", "arcsin", divisor=lambda xp, ans, ctx, x: xp.sqrt(1.0 - x * x),
               saves=("x",), doc="g / sqrt(1 - x^2)", summary="inverse sine", aliases=("asin",))
arccos = unary("arccos", "arccos", divisor=lambda xp, ans, ctx, x: -xp.sqrt(1.0 - x * x),
               saves=("x",), doc="-g / sqrt(1 - x^2)", summary="inverse cosine",
               aliases=("acos",))
arctan = unary("arctan", "arctan", divisor=lambda xp, ans, ctx, x: x * x + 1.0, saves=("x",),
               doc="g / (1 + x^2)", summary="inverse tangent", aliases=("atan",))
sinh = unary("sinh", "sinh", factor=lambda xp, ans, ctx, x: xp.cosh(x), saves=("x",),
             doc="g cosh(x)", summary="hyperbolic sine")
cosh = unary("cosh", "cosh", factor=lambda xp, ans, ctx, x: xp.sinh(x), saves=("x",),
             doc="g sinh(x)", summary="hyperbolic cosine")
tanh = unary("tanh", "tanh", factor=_tanh_factor, saves=("ans",),
             doc="g (1 - tanh(x)^2)", summary="hyperbolic tangent")
arcsinh = unary("arcsinh", "arcsinh", divisor=lambda xp, ans, ctx, x: xp.sqrt(x * x + 1.0),
                saves=("x",), doc="g / sqrt(x^2 + 1)", summary="inverse hyperbolic sine",
                aliases=("asinh",))
arccosh = unary("arccosh", "arccosh", divisor=lambda xp, ans, ctx, x: xp.sqrt(x * x - 1.0),
                saves=("x",), doc="g / sqrt(x^2 - 1)", summary="inverse hyperbolic cosine",
                aliases=("acosh",))
arctanh = unary("arctanh", "arctanh", divisor=lambda xp, ans, ctx, x: 1.0 - x * x,
                saves=("x",), doc="g / (1 - x^2)", summary="inverse hyperbolic tangent",
                aliases=("atanh",))
sigmoid = unary("sigmoid", _sigmoid, factor=lambda xp, ans, ctx: ans * (1.0 - ans),
                saves=("ans",), doc="g s (1 - s), s = sigmoid(x)",
                summary="1 / (1 + exp(-x)), stable for large |x|")
# torch's threshold_backward selects (x > 0 ? g : 0): a nan or inf g where x <= 0 gives 0
relu = unary("relu", lambda xp, x: xp.maximum(x, 0),
             vjp=lambda xp, g, ans, ctx, x: xp.where(x > 0, g, 0.0),
             saves=("x",), doc="g where x > 0, else 0  (0 at x = 0)", summary="max(x, 0)")
softplus = unary("softplus", _softplus, factor=lambda xp, ans, ctx, x: xp.sigmoid(x),
                 saves=("x",), doc="g sigmoid(x)",
                 summary="log(1 + exp(x)), stable for large |x|")
silu = unary("silu", lambda xp, x: x * _sigmoid(xp, x),
             factor=lambda xp, ans, ctx, x: (s := xp.sigmoid(x)) * (1.0 + x * (1.0 - s)),
             saves=("x",),
             doc="g s (1 + x (1 - s)), s = sigmoid(x)", summary="x sigmoid(x) (swish)")

floor = unary("floor", "floor", vjp=_zero, saves=(), doc="0",
              summary="largest whole number <= x")
ceil = unary("ceil", "ceil", vjp=_zero, saves=(), doc="0", summary="smallest whole number >= x")
round = unary("round", "round", vjp=_zero, saves=(), doc="0",
              summary="nearest whole number (halves to even)")

# ---- two inputs (broadcasting is undone by backward, not here) ---------------------------
add = binary("add", "add", identity, identity, saves=(),
             doc="dx = g, dy = g", summary="a + b", dunder="add", language=False)
subtract = binary("sub", "subtract", identity, lambda xp, g, ans, ctx: -g,
                  saves=(), doc="dx = g, dy = -g", summary="a - b", public_name="subtract",
                  dunder="sub", language=False)
multiply = binary("mul", "multiply", "g * y", "g * x", saves=("x", "y"),
                  doc="dx = g y, dy = g x", summary="a * b", public_name="multiply",
                  dunder="mul", language=False)
divide = binary("div", "divide", lambda xp, g, ans, ctx, x, y: g / y,
                lambda xp, g, ans, ctx, x, y: -(g * ans / y), saves=("y", "ans"),
                doc="dx = g / y, dy = -g x / y^2", summary="a / b", public_name="divide",
                dunder="truediv", language=False)
_power = binary(
    "pow", "power",
    # torch.pow: no gradient to x where y == 0; none to y where x == 0 and y >= 0.
    lambda xp, g, ans, ctx, x, y: _masked(xp, y == 0, g, y * x ** (y - 1.0)),
    lambda xp, g, ans, ctx, x, y: _masked(xp, (x == 0) * (y >= 0), g, ans * xp.log(x)),
    saves=("x", "y", "ans"), summary="a ** b", language=False, public_name="_power",
    doc="dx = g y x^(y-1) (0 where y = 0), dy = g x^y ln x (0 where x = 0, y >= 0)")
maximum = binary("maximum", "maximum",
                 lambda xp, g, ans, ctx, x, y: g * (x > y) + (g * 0.5) * (x == y),
                 lambda xp, g, ans, ctx, x, y: g * (y > x) + (g * 0.5) * (x == y),
                 saves=("x", "y"), doc="g to the larger argument; split evenly on ties",
                 summary="elementwise larger of a and b")
minimum = binary("minimum", "minimum",
                 lambda xp, g, ans, ctx, x, y: g * (x < y) + (g * 0.5) * (x == y),
                 lambda xp, g, ans, ctx, x, y: g * (y < x) + (g * 0.5) * (x == y),
                 saves=("x", "y"), doc="g to the smaller argument; split evenly on ties",
                 summary="elementwise smaller of a and b")
arctan2 = binary("arctan2", "arctan2",
                 lambda xp, g, ans, ctx, y, x: g * x / (x * x + y * y),
                 lambda xp, g, ans, ctx, y, x: -(g * y / (x * x + y * y)),
                 saves=("x", "y"), doc="dy = g x / (x^2 + y^2), dx = -g y / (x^2 + y^2)",
                 summary="angle of the point (x, y)", params=("y", "x"), aliases=("atan2",))
# fmt: on


# x ** c for a constant number c (x**2, x**0.5): one rule, no gradient for the exponent and
# none of the general rule's masks; the same numbers as "pow" (torch.pow's convention).
def _pow_const_factor(xp: Any, ans: Any, c: float, x: Any) -> Any:
    return x * 2.0 if c == 2 else c * x ** (c - 1.0)


_POW_CONST = Primitive(
    "pow",
    lambda xp, x, c: xp.power(x, c),
    [_pow_const_factor],
    saves=("x",),
    doc="g c x^(c-1)",
    form=FACTOR,
    local=_pow_const_factor,
)
_POW_ZERO = Primitive("pow", lambda xp, x, c: xp.power(x, c), [_zero], saves=(), doc="0")


@public(None, "a ** b", name="pow", api_aliases=("power",), derivative=OPS["pow"].doc)
def power(a: Tensor, b: Tensor) -> Tensor:
    """``a ** b`` with broadcasting; the gradient follows ``torch.pow`` at ``a = 0``."""
    if type(a) is Tensor:
        c: Any = None
        if type(b) is float or type(b) is int:
            c = float(b)
        elif type(b) is Tensor and not b.requires_grad and b.data.ndim == 0:
            opaque(b, "an exponent")  # a plan cannot hold one that depends on the inputs
            c = float(b.data)
        if c is not None and c == c:  # a constant exponent (not nan)
            prim = _POW_ZERO if c == 0 else _POW_CONST
            saved = () if c == 0 else (a.data,)
            redo = on_data(prim.fwd, c=c)
            return record(redo(a.data), prim, (a,), saved, ctx=c, redo=redo)
    return _power(a, b)


Tensor.__pow__ = lambda self, other: power(self, other)  # type: ignore[method-assign]
Tensor.__rpow__ = lambda self, other: power(other, self)  # type: ignore[method-assign]
Tensor.__neg__ = lambda self: negative(self)  # type: ignore[method-assign]
Tensor.__abs__ = lambda self: abs(self)  # type: ignore[method-assign]

_CLIP = Primitive(
    "clip",
    lambda xp, x, lo, hi: xp.minimum(xp.maximum(x, lo), hi),
    [
        lambda xp, g, ans, ctx, x, lo, hi: g * ((x >= lo) * (x <= hi)),
        lambda xp, g, ans, ctx, x, lo, hi: g * ((x < lo) * (lo <= hi)),
        lambda xp, g, ans, ctx, x, lo, hi: g * xp.maximum(x > hi, lo > hi),
    ],
    saves=("x", "lo", "hi"),
    inputs=("x", "lo", "hi"),
    broadcasts=True,
    doc="g to x where lo <= x <= hi (inclusive); to lo below it, to hi above it",
)


@public(_CLIP, "x clamped into [lo, hi]")
def clip(prim: Primitive, x: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """Clamp ``x`` into ``[lo, hi]``; the gradient passes where ``lo <= x <= hi`` inclusive."""
    x = lift(x)
    lo, hi = lift(lo, x), lift(hi, x)
    check_broadcast("clip", x.data.shape, lo.data.shape, hi.data.shape)
    data = (x.data, lo.data, hi.data)
    shapes = tuple(d.shape for d in data)
    redo = on_data(prim.fwd)
    return record(redo(*data), prim, (x, lo, hi), data, shapes, redo)


# torch's clamp: either bound may be left out (None), as an infinite one
@public(None, "x clamped into [min, max]; either bound may be None", derivative=_CLIP.doc,
        language=False)  # fmt: skip
def clamp(x: Tensor, min: Tensor | None = None, max: Tensor | None = None) -> Tensor:
    """Clamp ``x`` into ``[min, max]`` as ``torch.clamp`` does (``clip`` with a missing bound
    infinite); the gradient passes where ``min <= x <= max`` inclusive."""
    if min is None and max is None:
        raise InvalidValueError(msg("clamp: give min, max or both (at least one must not be None)"))
    return clip(x, -math.inf if min is None else min, math.inf if max is None else max)


_WHERE = Primitive(
    "where",
    lambda xp, cond, x, y: xp.where(cond != 0, x, y),
    [
        None,
        lambda xp, g, ans, ctx, cond, x, y: xp.where(cond, g, 0.0),
        lambda xp, g, ans, ctx, cond, x, y: xp.where(cond, 0.0, g),
    ],
    saves=("cond",),
    inputs=("cond", "x", "y"),
    broadcasts=True,
    doc="g to a where cond is nonzero, else to b; none to cond",
)


# no method: torch's x.where(cond, y) reads x as the values, not as the condition
@public(_WHERE, "a where cond is nonzero, else b", method=False)
def where(prim: Primitive, cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``a`` where ``cond`` is nonzero, else ``b``; no gradient flows to ``cond``."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    a, b = lift(a, like), lift(b, like)
    c = const(cond) if type(cond) is NUMPY.ndarray else lift(cond, a)
    check_broadcast("where", c.data.shape, a.data.shape, b.data.shape)
    redo = on_data(prim.fwd)
    out = redo(c.data, a.data, b.data)
    shapes = (c.data.shape, a.data.shape, b.data.shape)
    return record(out, prim, (c, a, b), (c.data, None, None), shapes, redo)


# ---- comparisons: 1.0 / 0.0, no gradient ---------------------------------------------------


def _compare(name: str, x: Any, y: Any) -> Tensor:
    x = lift(x, y if isinstance(y, Tensor) else None)
    y = lift(y, x)
    if x.data.shape != y.data.shape:
        check_broadcast(name, x.data.shape, y.data.shape)
    redo = _compared(name)
    t = const(redo(x.data, y.data))
    # a plan's recording: the comparison is a step of it (the thread's mode is read only
    # when some thread is off the default, as on every op's path)
    if OFF_DEFAULT and STATE.mode == RECORD:
        note(t, name, (x, y), redo, RECORD)
    return t


@functools.cache
def _compared(name: str) -> Any:
    """``name(x, y)`` on arrays as 1.0 / 0.0 in x's dtype."""
    compare = getattr(NUMPY, name)

    def redo(x: Any, y: Any) -> Any:
        return NUMPY.astype(compare(x, y), x.dtype)

    return redo


def _comparison(name: str, dunder: str) -> Any:
    def compare(a: Tensor, b: Tensor) -> Tensor:
        return _compare(name, a, b)

    compare.__name__ = name
    compare.__doc__ = f"``{name}(a, b)`` as 1.0 / 0.0 in a's dtype; no gradient flows."
    setattr(Tensor, f"__{dunder}__", lambda self, other: _compare(name, self, other))
    return public(None, f"a {dunder} b (1.0 or 0.0)", derivative="none", language=False,
                  method=False)(compare)  # fmt: skip


less = _comparison("less", "lt")
less_equal = _comparison("less_equal", "le")
greater = _comparison("greater", "gt")
greater_equal = _comparison("greater_equal", "ge")
equal = _comparison("equal", "eq")
not_equal = _comparison("not_equal", "ne")


# ---- a long sum: one node of n inputs ------------------------------------------------------

_ADD_N = Primitive(
    "add", lambda xp, *xs: None, [lambda xp, g, ans, ctx, i: g], saves=(), doc="g to every term",
    nary=True, broadcasts=True,
)  # fmt: skip


def _add_all(first: Any, *rest: Any) -> Any:
    """The terms' arrays added left to right, as add_n adds them."""
    acc = first
    for d in rest:
        acc = acc + d
    return acc


def add_n(terms: list[Any], negated: list[bool] | None = None) -> Tensor:
    """``t0 ± t1 ± ... ± tn`` as one node of n inputs (a negated term is ``negative(t)``).

    The terms are added left to right, as the chain of binary adds and subtracts would be,
    so the value is the same to the last bit (``a - b`` is ``a + (-b)`` exactly); the chain
    would make one node per term, which costs a 100,000-term sum half a second.
    """
    ts = [lift(t) for t in terms]
    signs = list(negated) if negated is not None else [False] * len(ts)
    if not ts or signs[0] or len(signs) != len(ts):
        raise ValueError("add_n: the first term is added, and every term has a sign")
    ts = [negative(t) if neg else t for t, neg in zip(ts, signs, strict=True)]
    acc = ts[0].data
    for t, neg in zip(ts[1:], signs[1:], strict=True):
        d = t.data
        # A one-element operand never grows the result: only then is a check needed.
        if acc.shape != d.shape and acc.size != 1 and d.size != 1:
            check_broadcast("sub" if neg else "add", acc.shape, d.shape)
        acc = acc + d
    return record(acc, _ADD_N, tuple(ts), ctx=tuple(t.data.shape for t in ts), redo=_add_all)
