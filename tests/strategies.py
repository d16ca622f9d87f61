"""Hypothesis strategies shared by the property and fuzz tests.

``programs()`` draws a random program of gradcli's expression language together with valid
random inputs. Alongside the text it builds the *same* computation as a tree of plain NumPy
functions, written here and independent of gradcli, so that a test can compare values
(``Program.run``) and differentiate by central finite differences.

What is generated (docs/language.md): the operators ``+ - * / ** ^ @``, the comparisons, unary ``-``
and ``+``, every elementwise function with its argument kept in its domain
(``log(abs(x) + 0.5)``, ``arccosh(x ** 2 + 1.25)``, ``arcsin(tanh(x) * 0.9)``), the
reductions with random axes (ints, negative ints, tuples, lists) and ``keepdims``, softmax,
shape functions, linear algebra on well-conditioned matrices, constructors (including the
seeded ``rand``/``randn``), array literals of expressions, indexing (ints, slices with
negative steps, integer lists, ``None``, ``...``, mixed forms), broadcasting of every
elementwise operation, and bindings ``h = ...`` separated by ``;`` or new lines, with comments.
Texts are printed with the language's precedence rules (a parenthesis only where needed,
sometimes a redundant one) so that precedence itself is under test.

Non-smooth points: every operation with a kink or a jump (``abs relu sign floor ceil round
maximum minimum max min clip where`` the comparisons, ``norm``, ``std``, ``arctan2``) records
its discrete decision in ``Ctx.sig``. Two points with the same signature lie on the same
smooth piece, which is what a finite-difference check needs (``tests/test_properties.py``).
``Ctx.fragile`` marks an evaluation exactly on a singular point (``arctan2`` on its branch
cut), where the value depends on the sign of a zero (which NumPy's own ``dot`` and ``matmul``
disagree on) and the gradient may be 0/0; ``Ctx.rough`` marks one near a point where the
derivative turns faster than finite differences can follow (``arctan2`` near the origin, a
``norm`` or ``std`` near 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "BINDING_NAMES",
    "INPUT_NAMES",
    "Ctx",
    "Node",
    "Program",
    "input_arrays",
    "mutated_programs",
    "programs",
    "same_signature",
    "token_soups",
]

# Precedence levels of docs/language.md, "Operators and precedence" (higher binds tighter).
CMP, SUM, PRODUCT, UNARY, POWER, POSTFIX, ATOM = range(1, 8)

#: input names: ASCII, Unicode letters, and names that shadow the constants ``pi`` and ``e``
INPUT_NAMES = ("x", "y", "z", "a", "b", "W", "v", "u1", "x_2", "α", "ক", "Δt", "pi", "e", "T")
#: binding names (disjoint from the input names)
BINDING_NAMES = ("h", "h2", "hid", "γ", "q_", "out1")
CONSTANTS = {"pi": math.pi, "e": math.e}

MAX_DIM = 3  # largest length of an axis
MAX_NDIM = 3  # most axes of a generated value


# --------------------------------------------------------------------------------------
# The NumPy side: a tree of nodes, each with its text and its NumPy implementation
# --------------------------------------------------------------------------------------


class Ctx:
    """One evaluation of a program in NumPy: the environment, the random generator of the
    program (docs/language.md, "Random constructors": one ``default_rng(seed)`` per program,
    in evaluation order), the branch
    signature and the largest magnitude seen."""

    def __init__(self, env: dict[str, np.ndarray], seed: int = 0) -> None:
        self.env = dict(env)
        self.rng = np.random.default_rng(seed)
        self.sig: list[np.ndarray] = []
        self.mag = 0.0
        #: an operation was evaluated exactly at a singular point whose value depends on the
        #: sign of a zero or whose derivative is 0/0 (arctan2 at y == 0, x <= 0)
        self.fragile = False
        #: a derivative was taken where it changes on a scale finite differences cannot
        #: resolve: arctan2 near the origin, a norm or std near 0 (x/|x| turns around)
        self.rough = False

    def branch(self, *arrays: Any) -> None:
        for a in arrays:
            self.sig.append(np.array(a, dtype=np.float64, copy=True))

    def seen(self, v: np.ndarray) -> None:
        if v.size:
            m = float(np.max(np.abs(v)))
            if not m <= self.mag:  # also nan
                self.mag = m if not math.isnan(m) else math.inf


def same_signature(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """True when two evaluations took the same branch at every non-smooth operation."""
    if len(a) != len(b):
        return False
    return all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


class Node:
    """An expression: its text, precedence, shape, and NumPy implementation.

    ``impl(ctx, *child_values)`` computes the value from the children's values, which are
    evaluated left to right in the order they appear in the text (the order in which gradcli
    evaluates them, which matters for ``rand``/``randn``). ``deps``: the inputs with a
    gradient path to this node; ``refs``: every input it mentions at all.
    """

    def __init__(
        self,
        text: str,
        prec: int,
        shape: tuple[int, ...],
        children: tuple[Node, ...],
        impl: Callable[..., Any],
        deps: frozenset[str] = frozenset(),
        refs: frozenset[str] = frozenset(),
        is_cmp: bool = False,
        is_number: bool = False,
    ) -> None:
        self.text = text
        self.prec = prec
        self.shape = shape
        self.children = children
        self.impl = impl
        self.deps = deps
        self.refs = refs
        self.is_cmp = is_cmp
        self.is_number = is_number

    def __repr__(self) -> str:
        return f"Node({self.text!r}, shape={self.shape})"

    def value(self, ctx: Ctx) -> np.ndarray:
        vals = [c.value(ctx) for c in self.children]
        out = np.asarray(self.impl(ctx, *vals), dtype=np.float64)
        if out.shape != self.shape:  # a bug of this helper, not of gradcli
            raise AssertionError(f"helper: {self.text!r} gave shape {out.shape}, not {self.shape}")
        ctx.seen(out)
        return out


def _p(node: Node, level: int) -> str:
    """The node's text, parenthesised when it binds less tightly than ``level``."""
    return node.text if node.prec >= level else f"({node.text})"


def _postfix_operand(node: Node) -> str:
    # `2.` followed by `.T` or `[0]` would be legal but confusing: numbers get parentheses.
    return f"({node.text})" if node.is_number or node.prec < POSTFIX else node.text


def _deps(nodes: Sequence[Node]) -> frozenset[str]:
    return frozenset().union(*(n.deps for n in nodes)) if nodes else frozenset()


def _refs(nodes: Sequence[Node]) -> frozenset[str]:
    return frozenset().union(*(n.refs for n in nodes)) if nodes else frozenset()


def leaf(text: str, shape: tuple[int, ...], impl: Callable[[Ctx], Any], **kw: Any) -> Node:
    return Node(text, ATOM, shape, (), impl, **kw)


def call(
    name: str,
    args: Sequence[Node | str],
    shape: tuple[int, ...],
    impl: Callable[..., Any],
    *,
    kwargs: Sequence[tuple[str, Node | str]] = (),
    nograd: Sequence[Node] = (),
) -> Node:
    """``name(args..., key=value...)``; Node arguments are the children, strings are text.
    ``nograd``: children through which no gradient flows (a condition of ``where``)."""
    parts = [a.text if isinstance(a, Node) else a for a in args]
    parts += [f"{k}={v.text if isinstance(v, Node) else v}" for k, v in kwargs]
    children = tuple(a for a in args if isinstance(a, Node))
    children += tuple(v for _, v in kwargs if isinstance(v, Node))
    grad_kids = [c for c in children if all(c is not n for n in nograd)]
    return Node(
        f"{name}({', '.join(parts)})", ATOM, shape, children, impl,
        deps=_deps(grad_kids), refs=_refs(children),
    )  # fmt: skip


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


ELEMENTWISE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs, "sign": np.sign, "sqrt": np.sqrt, "square": np.square, "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh, "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0), "softplus": lambda x: np.logaddexp(0.0, x),
    "floor": np.floor, "ceil": np.ceil, "round": np.round,
}  # fmt: skip
ALIASES = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "amax": "max", "amin": "min",
    "concat": "concatenate",
}  # fmt: skip
#: the discrete decision of each non-smooth elementwise function
KINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.sign, "relu": np.sign, "sign": np.sign, "floor": np.floor, "ceil": np.ceil,
    "round": np.round,
}  # fmt: skip
#: the domain each function's argument is mapped into
DOMAIN = {
    "sqrt": "pos",
    "log": "pos",
    "log2": "pos",
    "log10": "pos",
    "log1p": "nonneg",
    "arccosh": "ge1",
    "arcsin": "unit",
    "arccos": "unit",
    "arctanh": "unit",
    "tan": "tan",
}
UNARY_NAMES = (*ELEMENTWISE, *(a for a, c in ALIASES.items() if c in ELEMENTWISE))


def fn1(name: str, child: Node) -> Node:
    """An elementwise function of one tensor."""
    f = ELEMENTWISE[ALIASES.get(name, name)]
    kink = KINKS.get(ALIASES.get(name, name))

    def impl(ctx: Ctx, x: np.ndarray) -> np.ndarray:
        if kink is not None:
            ctx.branch(kink(x))
        return f(x)

    return call(name, [child], child.shape, impl)


def number(value: float, text: str | None = None) -> Node:
    return leaf(text or repr(float(value)), (), lambda ctx: value, is_number=True)


def neg(child: Node, sign: str = "-") -> Node:
    impl = (lambda ctx, x: -x) if sign == "-" else (lambda ctx, x: x)
    return Node(f"{sign}{_p(child, UNARY)}", UNARY, child.shape, (child,), impl,
                deps=child.deps, refs=child.refs)  # fmt: skip


def _cmp_impl(f: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def impl(ctx: Ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ctx.branch(np.sign(a - b))
        return f(a, b).astype(np.float64)

    return impl


BINARY: dict[str, tuple[int, Callable[..., Any]]] = {
    "+": (SUM, lambda ctx, a, b: a + b),
    "-": (SUM, lambda ctx, a, b: a - b),
    "*": (PRODUCT, lambda ctx, a, b: a * b),
    "/": (PRODUCT, lambda ctx, a, b: a / b),
    "@": (PRODUCT, lambda ctx, a, b: np.matmul(a, b)),
    "**": (POWER, lambda ctx, a, b: np.power(a, b)),
    "^": (POWER, lambda ctx, a, b: np.power(a, b)),
    "<": (CMP, _cmp_impl(np.less)),
    "<=": (CMP, _cmp_impl(np.less_equal)),
    ">": (CMP, _cmp_impl(np.greater)),
    ">=": (CMP, _cmp_impl(np.greater_equal)),
    "==": (CMP, _cmp_impl(np.equal)),
    "!=": (CMP, _cmp_impl(np.not_equal)),
}


def binop(op: str, a: Node, b: Node, space: str = " ") -> Node:
    level, impl = BINARY[op]
    if level == POWER:  # right-associative; a unary minus may follow: 2 ** -x
        lt, rt = _p(a, POSTFIX), _p(b, UNARY)
    elif level == CMP:  # no chained comparisons
        lt, rt = _p(a, SUM), _p(b, SUM)
    else:  # left-associative
        lt, rt = _p(a, level), _p(b, level + 1)
    if op == "@":
        shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
    else:
        shape = np.broadcast_shapes(a.shape, b.shape)
    deps = frozenset() if level == CMP else _deps([a, b])
    return Node(f"{lt}{space}{op}{space}{rt}", level, shape, (a, b), impl, deps=deps,
                refs=_refs([a, b]), is_cmp=level == CMP)  # fmt: skip


def paren(node: Node) -> Node:
    return Node(f"({node.text})", ATOM, node.shape, (node,), lambda ctx, x: x,
                deps=node.deps, refs=node.refs)  # fmt: skip


# --- reductions (NumPy implementations and their discrete decisions) -------------------


def _logsumexp(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _norm(x: np.ndarray, axis: Any, keepdims: bool, p: float) -> np.ndarray:
    ax = np.abs(x)
    if p == math.inf:
        return np.max(ax, axis=axis, keepdims=keepdims)
    if p == 1:
        return np.sum(ax, axis=axis, keepdims=keepdims)
    return np.sum(ax**p, axis=axis, keepdims=keepdims) ** (1.0 / p)


def reduce_impl(
    name: str, axis: tuple[int, ...] | None, keepdims: bool, ord: float = 2.0, ddof: int = 0
) -> Callable[..., Any]:
    def impl(ctx: Ctx, x: np.ndarray) -> np.ndarray:
        if name == "sum":
            return np.sum(x, axis=axis, keepdims=keepdims)
        if name == "mean":
            return np.mean(x, axis=axis, keepdims=keepdims)
        if name == "prod":
            return np.prod(x, axis=axis, keepdims=keepdims)
        if name in ("max", "min"):
            f = np.max if name == "max" else np.min
            ctx.branch(x == f(x, axis=axis, keepdims=True))
            return f(x, axis=axis, keepdims=keepdims)
        if name == "logsumexp":
            return _logsumexp(x, axis if axis is not None else tuple(range(x.ndim)), keepdims)
        if name == "norm":
            out = _norm(x, axis, keepdims, ord)
            if ord in (1, math.inf):
                ctx.branch(np.sign(x))
            if ord == math.inf:
                ctx.branch(np.abs(x) == np.max(np.abs(x), axis=axis, keepdims=True))
            ctx.branch(out == 0)
            if np.any(out < 1e-3):
                ctx.rough = True  # x/|x| turns around near 0: |x| of one element is abs
            return out
        if name == "var":
            return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)
        if name == "std":
            out = np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)
            ctx.branch(out == 0)
            if np.any(out < 1e-3):
                ctx.rough = True
            return out
        raise AssertionError(name)

    return impl


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return x - _logsumexp(x, (axis,), True)


# --------------------------------------------------------------------------------------
# Number spellings (docs/language.md, "Numbers and dtype": Python's float-literal syntax)
# --------------------------------------------------------------------------------------

NUMBERS = (1.0, 2.0, 0.5, 3.0, 1.5, 0.25, 10.0, 0.1, 4.0, 0.0, 2.5, 100.0)


def spellings(v: float) -> list[str]:
    """Ways to write the non-negative number ``v`` in the language."""
    out = [repr(v)]
    if v == int(v):
        n = int(v)
        out += [str(n), f"{n}.", f"{n}e0", f"{n}.0E+0"]
        if n >= 10:
            s = str(n)
            out.append(s[0] + "_" + s[1:])
            out.append(f"{n / 10:g}e1")
    else:
        r = repr(v)
        if r.startswith("0."):
            out.append(r[1:])  # .5
        out.append(f"{v * 100:g}e-2")
        out.append(f"{v * 10:g}E-1")
    return [s for s in out if float(s.replace("_", "")) == v]


# --------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------


def _shape_strategy(max_ndim: int = MAX_NDIM) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(1, MAX_DIM), max_size=max_ndim).map(tuple)


class _Gen:
    """Draws one program, top down: ``expr(shape, depth)`` is an expression of that shape."""

    def __init__(self, draw: Callable[..., Any], max_nodes: int) -> None:
        self.draw = draw
        self.inputs: dict[str, tuple[int, ...]] = {}
        self.scope: dict[str, Node] = {}  # bindings defined so far
        self.used_consts: set[str] = set()
        self.budget = max_nodes

    # small drawing helpers (each shrinks towards the simplest choice) ------------------
    def choice(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def maybe(self, percent: int) -> bool:
        """True with ``percent``% probability; shrinks to False."""
        return self.draw(st.integers(0, 99)) >= 100 - percent

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def space(self) -> str:
        return self.choice([" ", "", "  "])

    def shape(self, max_ndim: int = MAX_NDIM) -> tuple[int, ...]:
        return self.draw(_shape_strategy(max_ndim))

    def num_text(self, v: float) -> str:
        return self.choice(spellings(abs(v)))

    def num(self, v: float | None = None) -> Node:
        if v is None:
            v = self.choice(NUMBERS)
        node = number(abs(v), self.num_text(v))
        return neg(node) if v < 0 else node

    # leaves -------------------------------------------------------------------------------
    def leaf(self, shape: tuple[int, ...]) -> Node:
        kinds = ["input", "input", "input"]
        if any(b.shape == shape for b in self.scope.values()):
            kinds += ["binding", "binding"]
        if shape == ():
            kinds += ["number", "number", "const"]
        size = math.prod(shape)
        if shape and size <= 6:
            kinds.append("literal")
        kinds.append("ctor")
        kind = self.choice(kinds)
        if kind == "binding":
            name = self.choice([n for n, b in self.scope.items() if b.shape == shape])
            b = self.scope[name]
            return leaf(name, shape, lambda ctx: ctx.env[name], deps=b.deps, refs=b.refs)
        if kind == "number":
            return self.num(self.choice(NUMBERS) * self.choice([1, -1]))
        if kind == "const":
            free = [c for c in CONSTANTS if c not in self.inputs and c not in self.scope]
            if free:
                c = self.choice(free)
                self.used_consts.add(c)
                return leaf(c, (), lambda ctx: CONSTANTS[c])
        if kind == "literal":
            vals = [self.choice(NUMBERS) * self.choice([1, -1]) + 0.0 for _ in range(size)]
            return self.literal(np.array(vals).reshape(shape))
        if kind == "ctor":
            node = self.constructor(shape)
            if node is not None:
                return node
        return self.input(shape)

    def input(self, shape: tuple[int, ...]) -> Node:
        same = [n for n, s in self.inputs.items() if s == shape]
        free = [n for n in INPUT_NAMES if n not in self.inputs and n not in self.used_consts]
        if same and (not free or not self.maybe(40)):
            name = self.choice(same)
        elif free:
            name = self.choice(free)
            self.inputs[name] = shape
        else:
            return self.literal(np.full(shape, 0.5))
        return leaf(name, shape, lambda ctx: ctx.env[name], deps=frozenset([name]),
                    refs=frozenset([name]))  # fmt: skip

    def literal(self, arr: np.ndarray) -> Node:
        def text(a: np.ndarray) -> str:
            if a.ndim == 0:
                v = float(a)
                return ("-" if v < 0 else "") + self.num_text(abs(v))
            sep = self.choice([", ", ","])
            return "[" + sep.join(text(r) for r in a) + "]"

        value = np.array(arr, dtype=np.float64)
        return leaf(text(value), value.shape, lambda ctx: value)

    def dims_text(self, shape: tuple[int, ...]) -> str:
        """A shape argument: ``2, 3`` or ``(2, 3)`` or ``[2, 3]``."""
        if len(shape) == 1 and self.maybe(50):
            return str(shape[0])
        if len(shape) == 1:
            return f"({shape[0]},)"
        inner = ", ".join(map(str, shape))
        return self.choice([inner, f"({inner})", f"[{inner}]"]) if shape else "()"

    def constructor(self, shape: tuple[int, ...]) -> Node | None:
        n = len(shape)
        kinds = ["zeros", "ones", "full"]
        if n >= 1:
            kinds += ["rand", "randn"]
        if n == 1:
            kinds += ["arange", "linspace"]
        if n == 2:
            kinds.append("eye")
        kind = self.choice(kinds)
        dims = self.dims_text(shape)
        if kind in ("zeros", "ones"):
            f = np.zeros if kind == "zeros" else np.ones
            return leaf(f"{kind}({dims})", shape, lambda ctx: f(shape))
        if kind == "full":
            v = self.choice(NUMBERS) * self.choice([1, -1]) + 0.0
            if n > 1 and "(" not in dims and "[" not in dims:
                dims = f"({dims})"  # full's shape is one argument
            vt = ("-" if v < 0 else "") + self.num_text(abs(v))
            return leaf(f"full({dims}, {vt})", shape, lambda ctx: np.full(shape, v))
        if kind == "rand":
            return leaf(f"rand({dims})", shape, lambda ctx: ctx.rng.random(shape))
        if kind == "randn":
            return leaf(f"randn({dims})", shape, lambda ctx: ctx.rng.standard_normal(shape))
        if kind == "arange":
            (m,) = shape
            start = self.integer(-2, 2)
            form = self.choice(["stop", "start_stop", "step", "down"])
            if form == "stop":
                return leaf(f"arange({m})", shape, lambda ctx: np.arange(float(m)))
            if form == "start_stop":
                return leaf(f"arange({start}, {start + m})", shape,
                            lambda ctx: np.arange(float(start), float(start + m)))  # fmt: skip
            if form == "step":
                stop = start + 2 * m - 1
                return leaf(f"arange({start}, {stop}, 2)", shape,
                            lambda ctx: np.arange(float(start), float(stop), 2.0))  # fmt: skip
            return leaf(f"arange({start + m}, {start}, -1)", shape,
                        lambda ctx: np.arange(float(start + m), float(start), -1.0))  # fmt: skip
        if kind == "linspace":
            (m,) = shape
            lo, hi = self.choice([(0, 1), (-1, 1), (0, "pi"), (2, -2)])
            if hi == "pi" and ("pi" in self.inputs or "pi" in self.scope):
                hi = 3
            if hi == "pi":
                self.used_consts.add("pi")
            hv = math.pi if hi == "pi" else float(hi)
            return leaf(f"linspace({lo}, {hi}, {m})", shape,
                        lambda ctx: np.linspace(float(lo), hv, m))  # fmt: skip
        if kind == "eye":
            r, c = shape
            if r == c and self.maybe(60):
                return leaf(f"eye({r})", shape, lambda ctx: np.eye(r))
            k = self.integer(-1, 1)
            return leaf(f"eye({r}, {c}, {k})", shape, lambda ctx: np.eye(r, c, k))
        return None

    # expressions ------------------------------------------------------------------------
    def expr(self, shape: tuple[int, ...], depth: int) -> Node:
        self.budget -= 1
        if depth <= 0 or self.budget <= 0:
            return self.leaf(shape)
        kinds = ["leaf", "leaf", "unary", "unary", "binary", "binary", "binary", "neg",
                 "reduce", "reduce", "index", "shape", "matmul", "ternary", "compare"]  # fmt: skip
        if shape:
            kinds += ["softmax", "array"]
        if self.maybe(3):
            return paren(self.expr(shape, depth))
        kind = self.choice(kinds)
        builder = getattr(self, f"b_{kind}", None)
        node = builder(shape, depth - 1) if builder is not None else None
        if node is None:
            node = self.leaf(shape)
        if node.shape != shape:  # a bug of this helper
            raise AssertionError(f"helper: built {node.text!r} of shape {node.shape}, not {shape}")
        return node

    def b_neg(self, shape: tuple[int, ...], depth: int) -> Node:
        return neg(self.expr(shape, depth), self.choice(["-", "-", "+"]))

    def in_domain(self, domain: str, c: Node) -> Node:
        sp = self.space()
        if domain == "pos":
            form = self.choice(["abs", "square", "exp", "sigmoid"])
            if form == "abs":
                return binop("+", fn1("abs", c), self.num(0.5), sp)
            if form == "square":
                return binop("+", binop(self.choice(["**", "^"]), c, self.num(2.0), sp),
                             self.num(1.0), sp)  # fmt: skip
            if form == "exp":
                return fn1("exp", fn1("tanh", c))
            return binop("+", fn1("sigmoid", c), self.num(0.1), sp)
        if domain == "nonneg":
            form = self.choice(["abs", "square", "sigmoid"])
            if form == "square":
                return binop("**", c, self.num(2.0), sp)
            return fn1(form, c)
        if domain == "ge1":
            if self.maybe(50):
                return binop("+", fn1("abs", c), self.num(1.5), sp)
            return binop("+", binop("**", c, self.num(2.0), sp), self.num(1.25), sp)
        if domain == "unit":
            form = self.choice(["tanh", "sin", "sigmoid"])
            if form == "sigmoid":
                return binop("-", fn1("sigmoid", c), self.num(0.5), sp)
            return binop("*", fn1(form, c), self.num(0.9 if form == "tanh" else 0.5), sp)
        if domain == "tan":
            return fn1(self.choice(["tanh", "sin"]), c)
        return c

    def b_unary(self, shape: tuple[int, ...], depth: int) -> Node:
        name = self.choice(UNARY_NAMES)
        canonical = ALIASES.get(name, name)
        child = self.expr(shape, depth)
        if canonical in ("exp", "expm1", "sinh", "cosh") and self.maybe(50):
            child = fn1("tanh", child)  # keep nested exponentials finite
        return fn1(name, self.in_domain(DOMAIN.get(canonical, "any"), child))

    def broadcast_shapes(self, shape: tuple[int, ...], k: int) -> list[tuple[int, ...]]:
        """``k`` shapes that broadcast together to exactly ``shape``."""
        n = len(shape)
        shapes = []
        for _ in range(k - 1):
            nd = n - self.integer(0, n)  # shrinks to the full shape
            sub = list(shape[n - nd :])
            for j in range(nd):
                if sub[j] > 1 and self.maybe(25):
                    sub[j] = 1
            shapes.append(tuple(sub))
        have = np.broadcast_shapes(*shapes) if shapes else ()
        # the last one covers every axis the others leave short (r counts from the right)
        uncovered = [r for r in range(n) if r >= len(have) or have[-1 - r] != shape[-1 - r]]
        need = max(uncovered) + 1 if uncovered else 0
        nd = max(need, n - self.integer(0, n))
        last = list(shape[n - nd :])
        for j in range(nd):
            r = nd - 1 - j
            if last[j] > 1 and r not in uncovered and self.maybe(25):
                last[j] = 1
        shapes.append(tuple(last))
        order = self.draw(st.permutations(range(k)))
        out = [shapes[i] for i in order]
        assert np.broadcast_shapes(*out) == shape, (out, shape)
        return out

    def positive(self, node: Node) -> Node:
        return self.in_domain("pos", node)

    def b_binary(self, shape: tuple[int, ...], depth: int) -> Node:
        op = self.choice(["+", "-", "*", "/", "**", "pow", "maximum", "minimum", "arctan2"])
        sa, sb = self.broadcast_shapes(shape, 2)
        sp = self.space()
        if op in ("+", "-", "*"):
            return binop(op, self.expr(sa, depth), self.expr(sb, depth), sp)
        if op == "/":
            a = self.expr(sa, depth)
            if sb == () and self.maybe(30):
                return binop("/", a, self.num(self.choice([2.0, 0.5, 4.0, 10.0])), sp)
            b = self.expr(sb, depth)
            form = self.choice(["abs", "square", "exp", "cosh"])
            if form == "abs":
                b = paren(binop("+", fn1("abs", b), self.num(0.5), sp))
            elif form == "square":
                b = paren(binop("+", binop("**", b, self.num(2.0), sp), self.num(1.0), sp))
            else:
                b = fn1(form, fn1("tanh", b) if form == "exp" else b)
            return binop("/", a, b, sp)
        if op == "**":
            form = self.choice(["int", "number_base", "tensor", "half"])
            if form == "int":
                e = self.num(self.choice([2.0, 3.0, 1.0, 0.0]))
                return binop(self.choice(["**", "^"]), self.expr(shape, depth), e, sp)
            if form == "number_base":
                base = self.num(self.choice([2.0, 0.5, 1.5]))
                return binop("**", base, self.expr(shape, depth), sp)
            if form == "half":
                e = self.num(self.choice([0.5, -1.0, -0.5, 1.5]))
                return binop("**", paren(self.positive(self.expr(shape, depth))), e, sp)
            base = paren(self.positive(self.expr(sa, depth)))
            return binop("**", base, self.expr(sb, depth), sp)
        if op == "pow":
            base = self.positive(self.expr(sa, depth))
            expo = self.expr(sb, depth)
            return call("pow", [base, expo], shape, lambda ctx, a, b: np.power(a, b))
        a, b = self.expr(sa, depth), self.expr(sb, depth)
        if op in ("maximum", "minimum"):
            f = np.maximum if op == "maximum" else np.minimum

            def impl(ctx: Ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
                ctx.branch(np.sign(a - b))
                return f(a, b)

            return call(op, [a, b], shape, impl)

        def atan2(ctx: Ctx, y: np.ndarray, x: np.ndarray) -> np.ndarray:
            ctx.branch(np.where(x <= 0, np.sign(y), 2.0))
            if np.any((y == 0) & (x <= 0)):
                ctx.fragile = True  # atan2(±0, -x) is ±pi; at (0, 0) the gradient is 0/0
            if np.any(np.hypot(x, y) < 1e-3):
                ctx.rough = True  # the curvature 1/r^2 is too large for finite differences
            return np.arctan2(y, x)

        return call(self.choice(["arctan2", "atan2"]), [a, b], shape, atan2)

    def comparison(self, shape: tuple[int, ...], depth: int) -> Node:
        sa, sb = self.broadcast_shapes(shape, 2)
        op = self.choice(["<", "<=", ">", ">=", "==", "!="])
        return binop(op, self.expr(sa, depth), self.expr(sb, depth), self.space())

    def b_compare(self, shape: tuple[int, ...], depth: int) -> Node:
        node = self.comparison(shape, depth)
        if self.maybe(50):  # use the 0/1 result arithmetically
            other = self.expr(shape, depth)
            return binop("*", paren(node) if self.maybe(50) else node, other, self.space())
        return node

    def b_ternary(self, shape: tuple[int, ...], depth: int) -> Node:
        s1, s2, s3 = self.broadcast_shapes(shape, 3)
        if self.maybe(50):  # clip(x, lo, hi)
            if self.maybe(50):  # number bounds: x has the whole shape
                x = self.expr(shape, depth)
                lo, hi = self.num(-self.choice([0.5, 1.0])), self.num(self.choice([0.5, 1.0, 2.0]))
            else:
                x, lo, hi = self.expr(s1, depth), self.expr(s2, depth), self.expr(s3, depth)

            def clip(ctx: Ctx, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
                ctx.branch(np.sign(x - lo), np.sign(x - hi), np.sign(lo - hi))
                return np.minimum(np.maximum(x, lo), hi)

            return call("clip", [x, lo, hi], shape, clip)
        cond = self.comparison(s1, depth) if self.maybe(70) else self.expr(s1, depth)
        a, b = self.expr(s2, depth), self.expr(s3, depth)

        def where(ctx: Ctx, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            ctx.branch(c != 0)
            return np.where(c != 0, a, b)

        return call("where", [cond, a, b], shape, where, nograd=[cond])

    # reductions ---------------------------------------------------------------------------
    def axis_text(self, axes: tuple[int, ...], ndim: int, single_ok: bool) -> str:
        spelled = [a - ndim if self.maybe(30) else a for a in axes]
        if len(spelled) == 1 and single_ok and self.maybe(70):
            return str(spelled[0])
        inner = ", ".join(map(str, spelled))
        if len(spelled) == 1:
            return self.choice([f"({inner},)", f"[{inner}]"])
        return self.choice([f"({inner})", f"[{inner}]"])

    def b_reduce(self, shape: tuple[int, ...], depth: int) -> Node | None:
        name = self.choice(["sum", "mean", "prod", "max", "min", "amax", "amin", "logsumexp",
                            "norm", "var", "std"])  # fmt: skip
        canonical = ALIASES.get(name, name)
        keep = self.maybe(30)
        mode = self.choice(["axes", "all"])
        if mode == "all":
            if keep:
                src = tuple(self.integer(1, MAX_DIM) if s == 1 else s for s in shape)
                if any(s != 1 for s in shape):
                    return None
            else:
                if shape:
                    return None
                src = self.shape()
            axes = None
        else:
            if keep:
                ones = [i for i, s in enumerate(shape) if s == 1]
                if not ones:
                    return None
                axes = tuple(sorted(set(self.draw(st.lists(st.sampled_from(ones), min_size=1)))))
                src = tuple(
                    self.integer(1, MAX_DIM) if i in axes else s for i, s in enumerate(shape)
                )
            else:
                room = MAX_NDIM + 1 - len(shape)
                if room < 1:
                    return None
                m = self.integer(1, min(room, 2))
                src_list: list[int | None] = list(shape)
                for _ in range(m):
                    src_list.insert(self.integer(0, len(src_list)), None)
                axes = tuple(i for i, s in enumerate(src_list) if s is None)
                src = tuple(self.integer(1, MAX_DIM) if s is None else s for s in src_list)
        x = self.expr(src, depth)
        nd = len(src)
        n_reduced = math.prod(src[i] for i in axes) if axes is not None else math.prod(src)
        args: list[Node | str] = [x]
        kwargs: list[tuple[str, Node | str]] = []
        ord_, ddof = 2.0, 0
        if canonical == "norm":
            ord_ = self.choice([2.0, 1.0, math.inf, 3.0])
            ot = {2.0: "2", 1.0: "1", math.inf: "inf", 3.0: "3"}[ord_]
            if ord_ == math.inf and ("inf" in self.inputs or "inf" in self.scope):
                ord_, ot = 2.0, "2"
            if self.maybe(40):
                args.append(ot)
            elif ord_ != 2.0 or self.maybe(30):
                kwargs.append(("ord", ot))
        if canonical in ("var", "std") and n_reduced >= 2 and self.maybe(40):
            ddof = 1
        positional = canonical != "norm" or len(args) > 1
        if axes is not None:
            text = self.axis_text(axes, nd, single_ok=True)
            if positional and not kwargs and self.maybe(30):
                args.append(text)
            else:
                kwargs.append(("axis", text))
        elif self.maybe(15):
            kwargs.append(("axis", self.choice(["none", "None"])))
        if ddof:
            kwargs.append(("ddof", "1"))
        if keep:
            kwargs.append(("keepdims", self.choice(["true", "True"])))
        elif self.maybe(15):
            kwargs.append(("keepdims", self.choice(["false", "False"])))
        impl = reduce_impl(canonical, axes, keep, ord_, ddof)
        return call(name, args, shape, impl, kwargs=kwargs)

    def b_softmax(self, shape: tuple[int, ...], depth: int) -> Node:
        name = self.choice(["softmax", "log_softmax"])
        x = self.expr(shape, depth)
        axis = self.integer(-len(shape), len(shape) - 1)
        f = _softmax if name == "softmax" else _log_softmax
        form = self.choice(["default", "positional", "keyword"]) if axis == -1 else "keyword"
        if form == "default":
            return call(name, [x], shape, lambda ctx, v: f(v, -1))
        if form == "positional":
            return call(name, [x, str(axis)], shape, lambda ctx, v: f(v, axis))
        return call(name, [x], shape, lambda ctx, v: f(v, axis), kwargs=[("axis", str(axis))])

    # shape functions ----------------------------------------------------------------------
    def b_shape(self, shape: tuple[int, ...], depth: int) -> Node | None:
        n = len(shape)
        kind = self.choice(["reshape", "transpose", "T", "flip", "squeeze", "expand_dims",
                            "concatenate", "stack", "flatten"])  # fmt: skip
        if kind == "reshape":
            size = math.prod(shape)
            src = self.factor(size)
            x = self.expr(src, depth)
            dims = list(shape)
            if dims and self.maybe(40):
                dims[self.integer(0, len(dims) - 1)] = -1
            if not dims:
                text = "()"
            elif len(dims) == 1 and self.maybe(50):
                text = str(dims[0])
            else:
                inner = ", ".join(map(str, dims))
                text = (
                    self.choice([inner, f"({inner})", f"[{inner}]"])
                    if len(dims) > 1
                    else f"({inner},)"
                )
            return call("reshape", [x, text], shape, lambda ctx, v: v.reshape(shape))
        if kind == "flatten":
            if n != 1:
                return None
            src = self.factor(shape[0])
            return call("flatten", [self.expr(src, depth)], shape, lambda ctx, v: v.reshape(-1))
        if kind in ("transpose", "T"):
            if kind == "T" or self.maybe(40):
                src = tuple(reversed(shape))
                x = self.expr(src, depth)
                if kind == "T":
                    text = f"{_postfix_operand(x)}.T"
                    return Node(text, POSTFIX, shape, (x,), lambda ctx, v: v.T, deps=x.deps,
                                refs=x.refs)  # fmt: skip
                return call("transpose", [x], shape, lambda ctx, v: np.transpose(v))
            perm = tuple(self.draw(st.permutations(range(n))))
            # result axis i is source axis perm[i]
            src = [0] * n
            for i, p in enumerate(perm):
                src[p] = shape[i]
            x = self.expr(tuple(src), depth)
            text = self.axis_text(perm, n, single_ok=False) if n else "()"
            if self.maybe(50):
                return call("transpose", [x, text], shape, lambda ctx, v: np.transpose(v, perm))
            return call("transpose", [x], shape, lambda ctx, v: np.transpose(v, perm),
                        kwargs=[("axes", text)])  # fmt: skip
        if kind == "flip":
            x = self.expr(shape, depth)
            if not n or self.maybe(30):
                return call("flip", [x], shape, lambda ctx, v: np.flip(v))
            axes = tuple(sorted(set(self.draw(st.lists(st.integers(0, n - 1), min_size=1)))))
            text = self.axis_text(axes, n, single_ok=True)
            if self.maybe(50):
                return call("flip", [x, text], shape, lambda ctx, v: np.flip(v, axes))
            return call("flip", [x], shape, lambda ctx, v: np.flip(v, axes),
                        kwargs=[("axis", text)])  # fmt: skip
        if kind == "squeeze":
            if n >= MAX_NDIM:
                return None
            pos = self.integer(0, n)
            src = (*shape[:pos], 1, *shape[pos:])
            x = self.expr(src, depth)
            if 1 not in shape and self.maybe(50):
                return call("squeeze", [x], shape, lambda ctx, v: np.squeeze(v))
            text = self.axis_text((pos,), n + 1, single_ok=True)
            return call("squeeze", [x], shape, lambda ctx, v: np.squeeze(v, axis=pos),
                        kwargs=[("axis", text)])  # fmt: skip
        if kind == "expand_dims":
            ones = [i for i, s in enumerate(shape) if s == 1]
            if not ones:
                return None
            pos = self.choice(ones)
            src = shape[:pos] + shape[pos + 1 :]
            x = self.expr(src, depth)
            text = str(pos - n if self.maybe(30) else pos)
            return call("expand_dims", [x, text], shape, lambda ctx, v: np.expand_dims(v, pos))
        if kind == "concatenate":
            if not n:
                return None
            axis = self.integer(0, n - 1)
            if shape[axis] < 2 and not (axis == 0 and self.maybe(30)):
                return None
            name = self.choice(["concatenate", "concat"])
            if shape[axis] < 2:  # one tensor: a sequence along its first axis
                x = self.expr((1, *shape), depth)
                return call(name, [x], shape, lambda ctx, v: np.concatenate(list(v), axis=0))
            cut = self.integer(1, shape[axis] - 1)
            pa = tuple(cut if i == axis else s for i, s in enumerate(shape))
            pb = tuple(shape[axis] - cut if i == axis else s for i, s in enumerate(shape))
            a, b = self.expr(pa, depth), self.expr(pb, depth)
            seq = f"[{a.text}, {b.text}]"
            text_axis = str(axis - n if self.maybe(30) else axis)
            body = f"{name}({seq}" + (
                f", axis={text_axis})" if self.maybe(60) else f", {text_axis})"
            )
            if axis == 0 and self.maybe(30):
                body = f"{name}({seq})"
            return Node(body, ATOM, shape, (a, b),
                        lambda ctx, u, w: np.concatenate([u, w], axis=axis),
                        deps=_deps([a, b]), refs=_refs([a, b]))  # fmt: skip
        if kind == "stack":
            if not n or shape[0] > 3:
                return None
            axis = self.integer(0, n - 1)
            k = shape[axis]
            piece = shape[:axis] + shape[axis + 1 :]
            parts = [self.expr(piece, depth) for _ in range(k)]
            text_axis = str(axis - n if self.maybe(30) else axis)
            inner = ", ".join(p.text for p in parts)
            body = f"stack([{inner}], axis={text_axis})"
            if axis == 0 and self.maybe(30):
                body = f"stack([{inner}])"
            return Node(body, ATOM, shape, tuple(parts),
                        lambda ctx, *vs: np.stack(vs, axis=axis),
                        deps=_deps(parts), refs=_refs(parts))  # fmt: skip
        return None

    def factor(self, size: int) -> tuple[int, ...]:
        """A random shape with ``size`` elements."""
        if size == 1:
            return self.choice([(), (1,), (1, 1)])
        divisors = [d for d in range(1, size + 1) if size % d == 0]
        first = self.choice(divisors)
        rest = size // first
        if rest == 1:
            return (first,) if self.maybe(70) else (first, 1)
        return (first, rest) if self.maybe(70) else (first, rest, 1)

    # array literal of expressions ---------------------------------------------------------
    def b_array(self, shape: tuple[int, ...], depth: int) -> Node | None:
        k = shape[0]
        parts = [self.expr(shape[1:], depth) for _ in range(k)]
        sep = self.choice([", ", ","])
        trailing = "," if self.maybe(10) else ""
        return Node("[" + sep.join(p.text for p in parts) + trailing + "]", ATOM, shape,
                    tuple(parts), lambda ctx, *vs: np.stack(vs), deps=_deps(parts),
                    refs=_refs(parts))  # fmt: skip

    # linear algebra -----------------------------------------------------------------------
    def well_conditioned(self, n: int, depth: int) -> Node:
        """An n×n matrix far from singular: ``tanh(M) + 3 * eye(n)``."""
        m = self.expr((n, n), depth)
        sq = fn1(self.choice(["tanh", "sin"]), m)
        eye = leaf(f"eye({n})", (n, n), lambda ctx: np.eye(n))
        scaled = binop("*", self.num(3.0), eye, self.space())
        return (
            binop("+", sq, scaled, self.space())
            if self.maybe(50)
            else binop("+", scaled, sq, self.space())
        )

    def b_matmul(self, shape: tuple[int, ...], depth: int) -> Node | None:
        n = len(shape)
        k = self.integer(1, MAX_DIM)
        forms = []
        if n == 0:
            forms = ["vv", "dot_vv", "trace", "det"]
        elif n == 1:
            forms = ["vm", "mv", "solve_v", "diag_m"]
        elif n == 2:
            forms = ["mm", "dot_mm", "outer", "diag_v", "solve_m"]
            if shape[0] == shape[1]:
                forms.append("inv")
        elif n == 3:
            forms = ["batched"]
        if not forms:
            return None
        form = self.choice(forms)
        sp = self.space()

        def mm(a: Node, b: Node) -> Node:
            if self.maybe(70):
                return binop("@", a, b, sp)
            return call("matmul", [a, b], shape, lambda ctx, u, w: np.matmul(u, w))

        if form == "vv":
            return mm(self.expr((k,), depth), self.expr((k,), depth))
        if form in ("dot_vv", "dot_mm"):
            a_shape, b_shape = ((k,), (k,)) if form == "dot_vv" else ((shape[0], k), (k, shape[1]))
            a, b = self.expr(a_shape, depth), self.expr(b_shape, depth)
            return call("dot", [a, b], shape, lambda ctx, u, w: np.dot(u, w))
        if form == "trace":
            r, c = self.integer(1, MAX_DIM), self.integer(1, MAX_DIM)
            return call("trace", [self.expr((r, c), depth)], shape, lambda ctx, u: np.trace(u))
        if form == "det":
            m = self.well_conditioned(self.integer(1, MAX_DIM), depth)
            return call("det", [m], shape, lambda ctx, u: np.linalg.det(u))
        if form == "vm":
            return mm(self.expr((k,), depth), self.expr((k, shape[0]), depth))
        if form == "mv":
            return mm(self.expr((shape[0], k), depth), self.expr((k,), depth))
        if form == "solve_v":
            a = self.well_conditioned(shape[0], depth)
            b = self.expr(shape, depth)
            return call("solve", [a, b], shape, lambda ctx, u, w: np.linalg.solve(u, w))
        if form == "solve_m":
            a = self.well_conditioned(shape[0], depth)
            b = self.expr(shape, depth)
            return call("solve", [a, b], shape, lambda ctx, u, w: np.linalg.solve(u, w))
        if form == "diag_m":
            j = self.integer(0, 1)
            kk = self.choice([0, 0, 1, -1])
            if kk == 0:
                r, c = (shape[0], shape[0] + j) if self.maybe(50) else (shape[0] + j, shape[0])
            elif kk == 1:
                r, c = shape[0], shape[0] + 1
            else:
                r, c = shape[0] + 1, shape[0]
            m = self.expr((r, c), depth)
            args: list[Node | str] = [m] if kk == 0 else [m, str(kk)]
            return call("diag", args, shape, lambda ctx, u: np.diag(u, kk))
        if form == "diag_v":
            if shape[0] != shape[1]:
                return None
            kk = self.choice([0, 0, 1, -1]) if shape[0] >= 2 else 0
            v = self.expr((shape[0] - abs(kk),), depth)
            args = [v] if kk == 0 else [v, f"k={kk}"]
            return call("diag", args, shape, lambda ctx, u: np.diag(u, kk))
        if form == "mm":
            return mm(self.expr((shape[0], k), depth), self.expr((k, shape[1]), depth))
        if form == "outer":
            a, b = self.expr((shape[0],), depth), self.expr((shape[1],), depth)
            return call("outer", [a, b], shape, lambda ctx, u, w: np.outer(u, w))
        if form == "inv":
            m = self.well_conditioned(shape[0], depth)
            return call("inv", [m], shape, lambda ctx, u: np.linalg.inv(u))
        if form == "batched":
            b0, r, c = shape
            left = self.choice([(b0, r, k), (1, r, k), (r, k)]) if b0 > 1 else (b0, r, k)
            right = (
                (b0, k, c) if len(left) == 2 or left[0] == 1 else self.choice([(b0, k, c), (k, c)])
            )
            return mm(self.expr(left, depth), self.expr(right, depth))
        return None

    # indexing -----------------------------------------------------------------------------
    def slice_for(self, length: int) -> tuple[int, str]:
        """A base length and a slice text selecting exactly ``length`` elements."""
        for _ in range(20):
            n = self.integer(length, length + 2)
            start = self.draw(st.none() | st.integers(-n - 1, n))
            stop = self.draw(st.none() | st.integers(-n - 1, n + 1))
            step = self.draw(st.none() | st.sampled_from([1, 2, -1, -2, 3]))
            if len(range(*slice(start, stop, step).indices(n))) == length:
                s = (
                    ("" if start is None else str(start))
                    + ":"
                    + ("" if stop is None else str(stop))
                )
                if step is not None:
                    s += f":{step}"
                elif self.maybe(10):
                    s += ":"
                return n, s
        return length, ":"

    def b_index(self, shape: tuple[int, ...], depth: int) -> Node | None:
        n = len(shape)
        forms = ["int", "ellipsis_int"]
        if n >= 1:
            forms += ["slice", "list", "colon_int", "int_list"]
            if shape[0] == 1:
                forms.append("none")
        if n >= 2:
            forms.append("list_slice")
        form = self.choice(forms)
        m = self.integer(1, MAX_DIM)
        if form == "int":
            i = self.integer(-m, m - 1)
            src, key = (m, *shape), str(i)
        elif form == "ellipsis_int":
            if n >= MAX_NDIM:
                return None
            i = self.integer(-m, m - 1)
            src, key = (*shape, m), f"..., {i}"
        elif form == "slice":
            base, s = self.slice_for(shape[0])
            src, key = (base, *shape[1:]), s
        elif form == "list":
            idx = [self.integer(-m, m - 1) for _ in range(shape[0])]
            src, key = (m, *shape[1:]), "[" + ", ".join(map(str, idx)) + "]"
        elif form == "colon_int":
            if n >= MAX_NDIM:
                return None
            i = self.integer(-m, m - 1)
            src, key = (shape[0], m, *shape[1:]), f":, {i}"
        elif form == "int_list":
            if n >= MAX_NDIM:
                return None
            i = self.integer(-m, m - 1)
            m2 = self.integer(1, MAX_DIM)
            idx = [self.integer(-m2, m2 - 1) for _ in range(shape[0])]
            src, key = (m, m2, *shape[1:]), f"{i}, [{', '.join(map(str, idx))}]"
        elif form == "none":
            src, key = shape[1:], self.choice(["None", "None, ..."])
        else:  # list_slice
            idx = [self.integer(-m, m - 1) for _ in range(shape[0])]
            base, s = self.slice_for(shape[1])
            src, key = (m, base, *shape[2:]), f"[{', '.join(map(str, idx))}], {s}"
        if len(src) > MAX_NDIM + 1:
            return None
        np_key = _numpy_key(key)
        probe = np.zeros(src)[np_key]
        if probe.shape != shape:  # a bug of this helper
            raise AssertionError(f"helper: x[{key}] of shape {src} is {probe.shape}, not {shape}")
        x = self.expr(src, depth)
        return Node(f"{_postfix_operand(x)}[{key}]", POSTFIX, shape, (x,),
                    lambda ctx, v: v[np_key], deps=x.deps, refs=x.refs)  # fmt: skip


def _numpy_key(key: str) -> Any:
    """The NumPy key for an index text made by ``b_index`` (ints, slices, lists, None, ...)."""
    parts: list[Any] = []
    depth = 0
    cur = ""
    pieces = []
    for ch in key:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            pieces.append(cur.strip())
            cur = ""
        else:
            cur += ch
    pieces.append(cur.strip())
    for p in pieces:
        if p in ("None", "none"):
            parts.append(None)
        elif p == "...":
            parts.append(Ellipsis)
        elif p.startswith("["):
            parts.append(np.array([int(t) for t in p[1:-1].split(",")], dtype=np.int64))
        elif ":" in p:
            fields = [int(t) if t else None for t in p.split(":")]
            parts.append(slice(*fields))
        else:
            parts.append(int(p))
    return tuple(parts)


# --------------------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------------------


class Program:
    """A generated program: its text, valid inputs, and the NumPy version of it."""

    def __init__(
        self,
        text: str,
        inputs: dict[str, np.ndarray],
        bindings: list[tuple[str, Node]],
        output: Node,
    ) -> None:
        self.text = text
        self.inputs = inputs
        self.bindings = bindings
        self.output = output

    def run(
        self,
        inputs: dict[str, np.ndarray] | None = None,
        deltas: dict[str, np.ndarray] | None = None,
        seed: int = 0,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], Ctx]:
        """Evaluate in NumPy: (output, binding values, context). ``deltas`` perturb
        bindings (for finite differences with respect to an intermediate)."""
        ctx = Ctx(self.inputs if inputs is None else inputs, seed)
        values: dict[str, np.ndarray] = {}
        with np.errstate(all="ignore"):
            for name, node in self.bindings:
                v = node.value(ctx)
                if deltas and name in deltas:
                    v = v + deltas[name]
                ctx.env[name] = v
                values[name] = v
            out = self.output.value(ctx)
        return out, values, ctx

    @property
    def binding_deps(self) -> dict[str, frozenset[str]]:
        return {name: node.deps for name, node in self.bindings}

    @property
    def binding_refs(self) -> dict[str, frozenset[str]]:
        return {name: node.refs for name, node in self.bindings}

    def json_inputs(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.inputs.items()}

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        shapes = {k: v.shape for k, v in self.inputs.items()}
        values = {k: v.tolist() for k, v in self.inputs.items()}
        return f"Program(text={self.text!r}, shapes={shapes}, inputs={values})"


def elements() -> st.SearchStrategy[float]:
    return st.floats(-3, 3, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def input_arrays(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=elements())


@st.composite
def programs(
    draw: Callable[..., Any], max_depth: int = 4, max_bindings: int = 3, max_nodes: int = 30
) -> Program:
    """A random valid program with random valid inputs (see the module docstring)."""
    g = _Gen(draw, max_nodes)
    depth = draw(st.integers(1, max_depth))
    bindings: list[tuple[str, Node]] = []
    for _ in range(draw(st.integers(0, max_bindings))):
        name = draw(st.sampled_from([n for n in BINDING_NAMES if n not in g.scope]))
        node = g.expr(g.shape(), depth)
        bindings.append((name, node))
        g.scope[name] = node
    out = g.expr(g.shape(), depth)
    if g.maybe(10):  # an input the program does not use: its gradient is zeros
        free = [n for n in INPUT_NAMES if n not in g.inputs and n not in g.used_consts]
        if free:
            g.inputs[draw(st.sampled_from(free))] = g.shape()
    inputs = {name: draw(input_arrays(shape)) for name, shape in g.inputs.items()}

    statements = [f"{n}{g.space() or ' '}={g.space()}{node.text}" for n, node in bindings]
    statements.append(out.text)
    text = draw(st.sampled_from(["", "", "", "# a generated program\n", "\n", ";"]))
    for i, s in enumerate(statements):
        text += s
        if i < len(statements) - 1:
            text += draw(st.sampled_from(["; ", ";", "\n", "  # note\n", " ;\n", ";\n\n"]))
    text += draw(st.sampled_from(["", "", "", ";", "\n", "  # the output\n", ";\n"]))
    return Program(text, inputs, bindings, out)


# --------------------------------------------------------------------------------------
# Hostile variants and token soups
# --------------------------------------------------------------------------------------

TOKENS = (
    # names: inputs, functions, constants, keyword values, unknown and odd names
    "x", "y", "z", "h", "W", "α", "ক", "T", "sum", "tanh", "exp", "log", "max", "norm",
    "reshape", "zeros", "ones", "eye", "arange", "randn", "where", "clip", "concatenate",
    "stack", "solve", "inv", "det", "diag", "transpose", "softmax", "pi", "e", "inf", "nan",
    "true", "false", "none", "None", "True", "axis", "keepdims", "ord", "ddof", "shape",
    "undefined_name", "__import__", "__class__", "_", "x1", "Σ", "os", "eval",
    # numbers
    "0", "1", "2", "3", "-1", "2.5", ".5", "1e3", "1e-3", "1_000", "1e308", "1e999", "9",
    "0.0", "10", "255", "1E+2", "0_0",
    # operators and punctuation
    "+", "-", "*", "/", "**", "^", "@", "<", "<=", ">", ">=", "==", "!=", "=", "(", ")",
    "[", "]", ",", ":", "::", "...", ".", ".T", ";", "\n", "# comment\n", " ", "\t",
    # stray characters
    "'", '"', "`", "$", "?", "!", "&", "|", "~", "{", "}", "\\", "\x00", "\r", "\u00a0",
    "\u2028", "\ufeff",
)  # fmt: skip


@st.composite
def token_soups(draw: Callable[..., Any], max_tokens: int = 30) -> str:
    """A random sequence of the language's tokens (and some stray characters)."""
    tokens = draw(st.lists(st.sampled_from(TOKENS), max_size=max_tokens))
    seps = draw(
        st.lists(st.sampled_from(["", " ", ""]), min_size=len(tokens), max_size=len(tokens))
    )
    return "".join(t + s for t, s in zip(tokens, seps, strict=True))


@st.composite
def mutated_programs(draw: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """A generated program with random damage to its text and/or its inputs: the input of
    the 'no traceback, ever' property (most variants are errors, some still run)."""
    p = draw(programs(max_depth=3))
    text = p.text
    for _ in range(draw(st.integers(0, 3))):
        if not text:
            break
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 6)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "replace"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif op == "duplicate":
            text = text[:i] + text[i:j] * 2 + text[j:]
        else:
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
    inputs: dict[str, Any] = dict(p.inputs)
    for name in list(inputs):
        choice = draw(st.sampled_from(["keep"] * 6 + ["drop", "reshape", "nan", "list", "bad"]))
        if choice == "drop":
            del inputs[name]
        elif choice == "reshape":
            inputs[name] = draw(input_arrays(draw(_shape_strategy())))
        elif choice == "nan":
            a = np.array(inputs[name], dtype=np.float64)
            a.flat[0] = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 0.0]))
            inputs[name] = a
        elif choice == "list":
            inputs[name] = np.asarray(inputs[name]).tolist()
        else:
            inputs[name] = draw(
                st.sampled_from(
                    ["nan", "inf", "-inf", "abc", True, None, [1, [2]], [[1, 2], [3]], {}, [],
                     [[]], 10**400, -(10**400), 1e308, [1.0, "nan"], (1, 2), b"1"]
                )
            )  # fmt: skip
    if draw(st.integers(0, 9)) == 0:
        inputs[draw(st.sampled_from(["sum", "9x", "", "a b", "x.y", "ñ", "e"]))] = 1.0
    return text, inputs
