"""The function registry: every function of the language, its parameters and aliases."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import engine as E
from ..engine import Tensor

# Parameter kinds: how an argument's value is converted before the engine sees it.
TENSOR, TENSORS, AXIS, INT, NUMBER, BOOL, SHAPE = (
    "tensor",
    "tensors",
    "axis",
    "int",
    "number",
    "bool",
    "shape",
)
_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any = _REQUIRED
    varargs: bool = False  # takes the remaining positional arguments (shapes as ints)


@dataclass(frozen=True)
class Function:
    name: str
    call: Callable[..., Tensor]
    params: tuple[Param, ...]
    summary: str
    derivative: str
    aliases: tuple[str, ...] = ()
    needs_context: bool = False  # constructors: get dtype (and the generator) as keywords

    @property
    def signature(self) -> str:
        parts = []
        for p in self.params:
            if p.varargs:
                parts.append(f"*{p.name}")
            elif p.default is _REQUIRED:
                parts.append(p.name)
            else:
                d = p.default
                shown = "none" if d is None else str(d).lower() if isinstance(d, bool) else d
                parts.append(f"{p.name}={shown}")
        return f"{self.name}({', '.join(parts)})"


FUNCTIONS: dict[str, Function] = {}


def _register(
    name: str,
    call: Callable[..., Tensor],
    params: tuple[Param, ...],
    summary: str,
    derivative: str | None = None,
    aliases: tuple[str, ...] = (),
    needs_context: bool = False,
) -> None:
    op = E.OPS.get(name)
    rule = derivative if derivative is not None else (op.doc if op else "")
    fn = Function(name, call, params, summary, rule, aliases, needs_context)
    FUNCTIONS[name] = fn
    for alias in aliases:
        FUNCTIONS[alias] = fn


X = (Param("x", TENSOR),)
REDUCE = (Param("x", TENSOR), Param("axis", AXIS, None), Param("keepdims", BOOL, False))

_UNARY = {
    "abs": "absolute value",
    "sign": "sign (-1, 0 or 1)",
    "sqrt": "square root",
    "square": "x * x",
    "exp": "e ** x",
    "expm1": "exp(x) - 1, accurate near 0",
    "log": "natural logarithm",
    "log2": "base-2 logarithm",
    "log10": "base-10 logarithm",
    "log1p": "log(1 + x), accurate near 0",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "arcsin": "inverse sine",
    "arccos": "inverse cosine",
    "arctan": "inverse tangent",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "tanh": "hyperbolic tangent",
    "arcsinh": "inverse hyperbolic sine",
    "arccosh": "inverse hyperbolic cosine",
    "arctanh": "inverse hyperbolic tangent",
    "sigmoid": "1 / (1 + exp(-x)), stable for large |x|",
    "relu": "max(x, 0)",
    "softplus": "log(1 + exp(x)), stable for large |x|",
    "floor": "largest whole number <= x",
    "ceil": "smallest whole number >= x",
    "round": "nearest whole number (halves to even)",
}
_ALIASES = {
    "arcsin": ("asin",),
    "arccos": ("acos",),
    "arctan": ("atan",),
    "arcsinh": ("asinh",),
    "arccosh": ("acosh",),
    "arctanh": ("atanh",),
}
for _name, _summary in _UNARY.items():
    _register(_name, getattr(E, _name), X, _summary, aliases=_ALIASES.get(_name, ()))

_AB = (Param("a", TENSOR), Param("b", TENSOR))
_register("maximum", E.maximum, _AB, "elementwise larger of a and b")
_register("minimum", E.minimum, _AB, "elementwise smaller of a and b")
_register(
    "arctan2",
    E.arctan2,
    (Param("y", TENSOR), Param("x", TENSOR)),
    "angle of the point (x, y)",
    aliases=("atan2",),
)
_register("pow", E.power, _AB, "a ** b")
_register(
    "clip",
    E.clip,
    (Param("x", TENSOR), Param("lo", TENSOR), Param("hi", TENSOR)),
    "x clamped into [lo, hi]",
)
_register(
    "where",
    E.where,
    (Param("cond", TENSOR), Param("a", TENSOR), Param("b", TENSOR)),
    "a where cond is nonzero, else b",
)
_register("sum", E.sum, REDUCE, "sum of elements")
_register("mean", E.mean, REDUCE, "mean of elements")
_register("prod", E.prod, REDUCE, "product of elements")
_register("max", E.max, REDUCE, "largest element", aliases=("amax",))
_register("min", E.min, REDUCE, "smallest element", aliases=("amin",))
_register("logsumexp", E.logsumexp, REDUCE, "log(sum(exp(x))), stable")
_register(
    "norm",
    E.norm,
    (Param("x", TENSOR), Param("ord", NUMBER, 2), *REDUCE[1:]),
    "vector p-norm of the reduced elements",
)
_VAR = (Param("x", TENSOR), Param("axis", AXIS, None), Param("ddof", NUMBER, 0),
        Param("keepdims", BOOL, False))  # fmt: skip
_register("var", E.var, _VAR, "variance", "g 2 (x - mean) / (n - ddof)")
_register("std", E.std, _VAR, "standard deviation", "g (x - mean) / ((n - ddof) std)")
_SOFT = (Param("x", TENSOR), Param("axis", INT, -1))
_register("softmax", E.softmax, _SOFT, "exp(x) / sum(exp(x)) along axis")
_register("log_softmax", E.log_softmax, _SOFT, "x - logsumexp(x) along axis")

_register("reshape", E.reshape, (Param("x", TENSOR), Param("shape", SHAPE, varargs=True)),
          "the elements in a new shape (-1: inferred)")  # fmt: skip
_register(
    "transpose",
    E.transpose,
    (Param("x", TENSOR), Param("axes", AXIS, None)),
    "axes permuted (reversed by default); also x.T",
)
_register("flatten", E.flatten, X, "the elements as a 1-D tensor", "g reshaped back")
_register("squeeze", E.squeeze, (Param("x", TENSOR), Param("axis", AXIS, None)),
          "axes of length one removed", "g reshaped back")  # fmt: skip
_register("expand_dims", E.expand_dims, (Param("x", TENSOR), Param("axis", AXIS)),
          "an axis of length one inserted", "g reshaped back")  # fmt: skip
_SEQ = (Param("tensors", TENSORS), Param("axis", INT, 0))
_register("concatenate", E.concatenate, _SEQ, "tensors joined along an existing axis",
          "g split back into the pieces", aliases=("concat",))  # fmt: skip
_register("stack", E.stack, _SEQ, "tensors joined along a new axis", "g split back into the pieces")
_register("flip", E.flip, (Param("x", TENSOR), Param("axis", AXIS, None)), "order reversed")

_register("matmul", E.matmul, _AB, "matrix product (NumPy's rules); also a @ b")
_register("dot", E.dot, _AB, "dot product of 1-D or 2-D tensors", E.MATMUL.doc)
_register("outer", E.outer, _AB, "outer product", "da = g b, db = g^T a")
_register("trace", E.trace, X, "sum of the diagonal", "g on the diagonal")
_register("diag", E.diag, (Param("x", TENSOR), Param("k", INT, 0)),
          "diagonal matrix of a vector, or diagonal of a matrix",
          "g's diagonal / g on the diagonal")  # fmt: skip
_register("det", E.det, X, "determinant")
_register("inv", E.inv, X, "matrix inverse")
_register("solve", E.solve, _AB, "x with a @ x == b")

_CONST = "none (a constant)"
_SHAPE = (Param("shape", SHAPE, varargs=True),)
_register("zeros", E.zeros, _SHAPE, "zeros of a shape", _CONST, needs_context=True)
_register("ones", E.ones, _SHAPE, "ones of a shape", _CONST, needs_context=True)
_register("full", E.full, (Param("shape", SHAPE), Param("value", NUMBER)),
          "a shape filled with a value", _CONST, needs_context=True)  # fmt: skip
_register("eye", E.eye, (Param("n", INT), Param("m", INT, None), Param("k", INT, 0)),
          "identity matrix", _CONST, needs_context=True)  # fmt: skip
_register("arange", E.arange, (Param("start", NUMBER), Param("stop", NUMBER, None),
          Param("step", NUMBER, 1)), "evenly spaced values in [start, stop)", _CONST,
          needs_context=True)  # fmt: skip
_register("linspace", E.linspace, (Param("start", NUMBER), Param("stop", NUMBER),
          Param("num", INT, 50)), "num evenly spaced values in [start, stop]", _CONST,
          needs_context=True)  # fmt: skip
_register("rand", E.rand, _SHAPE, "uniform random numbers in [0, 1) (seeded)", _CONST,
          needs_context=True)  # fmt: skip
_register("randn", E.randn, _SHAPE, "standard normal random numbers (seeded)", _CONST,
          needs_context=True)  # fmt: skip
_RANDOM = {"rand", "randn"}


def suggest(name: str, candidates: Any) -> str:
    """`` (did you mean `x`?)`` for the nearest known names, or nothing."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"`{c}`" for c in close) + "?)"
