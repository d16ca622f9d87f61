"""One registration per primitive, and everything made from it (docs/engine.md, "Adding a
primitive").

A registration names the forward function, one vector–Jacobian product (VJP) per input,
what the VJPs read (``saves``: input names and/or ``"ans"``, the output) and the derivative
as text. From it come: the op table (:data:`OPS`), the public function ``gradcli.<name>``
and its Tensor method (:data:`FUNCTIONS`), the function table and signatures of the
language and of ``gradcli functions``, and the two namespaces rules run on — arrays
(first-order backward) and tensors (the differentiable namespace of ``create_graph``).

Rules are written once for both namespaces: ``vjp(xp, g, ans, ctx, x, y)`` gets the array
namespace ``xp``, the incoming gradient ``g``, the output ``ans`` (None unless saved), the
static context ``ctx``, then the inputs it saves (None for the others; no inputs at all when
it saves none). An elementwise rule of one input may instead be a *factor* (the VJP is
``g * factor``) or a *divisor* (``g / divisor``), which lets backward write into ``g`` when
``g`` is a buffer of its own.

The simplest rules are written as what they are, as PyTorch's ``derivatives.yaml`` writes
``grad * result``: a factor or divisor that is a saved value (``factor="ans"`` for ``exp``,
``divisor="x"`` for ``log``), a VJP that is the gradient times a saved input (``"g * y"``
for ``mul``). Backward reads those values without calling a function; the other walks
call the rule made from the text, which computes the same bits.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from .backend import NUMPY
from .node import ANS, GENERAL, WALK_LOOP, WALK_PRODUCT, WALK_SUM, identity
from .tensor import Tensor

#: annotations of public functions that tell the language how to read an argument
Axis = Any  # None, an int or a tuple of ints
Shape = Any  # ints, or one tuple of ints
Tensors = Any  # a list of tensors, or one tensor read along its first axis


class Primitive:
    """A primitive operation: forward function, VJPs, what they read, derivative text."""

    __slots__ = (
        "_local", "broadcasts", "direct", "doc", "form", "fwd", "name", "nary", "plan",
        "save_ans", "save_in", "vjps",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        fwd: Callable[..., Any],
        vjps: Sequence[Callable[..., Any] | None],
        *,
        saves: Sequence[str],
        doc: str,
        inputs: Sequence[str] = ("x",),
        form: int = GENERAL,
        local: Callable[..., Any] | None = None,
        nary: bool = False,
        broadcasts: bool = False,
        direct: Any = None,
    ) -> None:
        unknown = set(saves) - {"ans", *inputs}
        if unknown:
            raise ValueError(f"{name}: saves {sorted(unknown)}, which are not among {inputs}")
        self.name = name
        self.fwd = fwd
        self.vjps = tuple(vjps)
        self.save_ans = "ans" in saves
        #: per input: whether its value is kept; () when no input is kept
        flags = tuple(n in saves for n in inputs)
        self.save_in: tuple[bool, ...] = flags if any(flags) else ()
        self.doc = doc
        self.form = form
        self._local = local
        #: any number of inputs (concatenate, stack, a long sum): one VJP, called as
        #: ``vjp(xp, g, ans, ctx, i)`` for input i, reading no input values
        self.nary = nary
        #: inputs may be broadcast up to the output's shape: a node's ctx then holds the
        #: input shapes (None when none was), and backward sums each gradient back down
        self.broadcasts = broadcasts
        #: a rule backward computes without a call (see value_rule and product_rules): for
        #: a factor or divisor, where its value is (ANS, or the index of a saved input);
        #: for VJPs, per input the index of the saved input g is multiplied by
        self.direct = direct
        #: what backward reads of a primitive, in one attribute
        self.plan = (
            form, local, nary, self.vjps, broadcasts, len(self.save_in),
            bool(self.save_in) or self.save_ans, direct, self._walk(),
        )  # fmt: skip

    @property
    def local(self) -> Callable[..., Any] | None:
        """The factor or divisor of a one-input elementwise primitive (see :func:`unary`)."""
        return self._local

    @local.setter
    def local(self, rule: Callable[..., Any] | None) -> None:
        self._local = rule
        self.direct = None  # the rule given is the one to call
        form, _, nary, vjps, broadcasts, nsaved, saves, _, walk = self.plan
        self.plan = (form, rule, nary, vjps, broadcasts, nsaved, saves, None, walk)

    def _walk(self) -> int:
        """The shortcut backward's plain walk may take for this primitive's nodes (one of
        the two-input shapes every elementwise chain is made of; see backward._run_plain)."""
        if self.form != GENERAL or self.nary or len(self.vjps) != 2:
            return WALK_LOOP
        if all(rule is identity for rule in self.vjps) and self.broadcasts:
            return WALK_SUM  # add: g goes on to each input as it is
        if self.direct is not None and not self.save_ans:
            return WALK_PRODUCT  # mul: g times the other saved input, for each input
        return WALK_LOOP

    def saved(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """The values of the inputs a node of this primitive keeps (``values``: arrays)."""
        if not self.save_in:
            return ()
        return tuple([v if keep else None for v, keep in zip(values, self.save_in, strict=True)])

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


OPS: dict[str, Primitive] = {}


def primitive(
    name: str,
    fwd: Callable[..., Any],
    *vjps: Callable[..., Any] | str | None,
    saves: Sequence[str],
    doc: str,
    inputs: Sequence[str] = ("x",),
    nary: bool = False,
    broadcasts: bool = False,
) -> Primitive:
    """A primitive whose public function is written by hand (see :func:`public`)."""
    rules, direct = product_rules(name, vjps, inputs, saves)
    prim = Primitive(
        name, fwd, rules, saves=saves, doc=doc, inputs=inputs, nary=nary, broadcasts=broadcasts,
        direct=direct,
    )  # fmt: skip
    OPS.setdefault(name, prim)
    return prim


def value_rule(name: str, given: str, saves: Sequence[str]) -> tuple[Callable[..., Any], int]:
    """A factor or divisor given as the saved value it is (``"ans"`` or ``"x"``): the rule
    that returns it, and where backward finds it without calling that rule."""
    if given not in ("ans", "x") or given not in saves:
        raise ValueError(f"{name}: a factor or divisor named must be 'ans' or 'x', and saved")
    if given == "ans":
        return (lambda xp, ans, ctx: ans), ANS
    return (lambda xp, ans, ctx, x: x), 0


def product_rules(
    name: str,
    vjps: Sequence[Callable[..., Any] | str | None],
    inputs: Sequence[str],
    saves: Sequence[str],
) -> tuple[list[Callable[..., Any] | None], tuple[int, ...] | None]:
    """The VJPs, with each given as text ``"g * NAME"`` (NAME a saved input) made into the
    rule it says; and, when every VJP is such a product, the index of the saved input each
    multiplies ``g`` by, so backward computes it without a call."""
    rules: list[Callable[..., Any] | None] = []
    direct: list[int] = []
    for rule in vjps:
        if not isinstance(rule, str):
            rules.append(rule)
            continue
        head, _, other = rule.partition(" * ")
        if head != "g" or other not in inputs or other not in saves:
            raise ValueError(f"{name}: a VJP as text is 'g * NAME' of a saved input, not {rule!r}")
        k = list(inputs).index(other)
        direct.append(k)
        rules.append(lambda xp, g, ans, ctx, *saved, k=k: g * saved[k])
    return rules, (tuple(direct) if len(direct) == len(vjps) else None)


# --------------------------------------------------------------------------------------
# Public functions: gradcli.<name>, Tensor methods, the language's function table
# --------------------------------------------------------------------------------------

#: how a parameter is read by the language, by its annotation
KINDS = {
    "Tensor": "tensor",
    "Tensors": "tensors",
    "Axis": "axis",
    "int": "int",
    "bool": "bool",
    "float": "number",
    "Shape": "shape",
    "str": "text",  # a string literal: einsum's subscripts, a loss's reduction
}
REQUIRED = inspect.Parameter.empty


# Plain classes, not dataclasses: a dataclass costs a millisecond of every start-up to make.
class Param:
    """One parameter of a public function as the language reads it."""

    __slots__ = ("default", "kind", "name", "varargs")

    def __init__(self, name: str, kind: str, default: Any = REQUIRED, varargs: bool = False):
        self.name = name
        self.kind = kind
        self.default = default
        self.varargs = varargs  # takes the remaining positional arguments (shapes as ints)

    def __repr__(self) -> str:
        return f"Param({self.name!r}, {self.kind!r})"


class FunctionSpec:
    """A public function: how it is called and how it is described."""

    __slots__ = (
        "aliases",
        "call",
        "context",
        "derivative",
        "language",
        "name",
        "params",
        "summary",
    )

    def __init__(
        self,
        name: str,
        call: Callable[..., Tensor],
        params: tuple[Param, ...],
        summary: str,
        derivative: str,
        aliases: tuple[str, ...] = (),
        language: bool = True,
        context: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.call = call
        self.params = params
        self.summary = summary
        self.derivative = derivative
        self.aliases = aliases
        #: in the language's function table (``gradcli functions``)
        self.language = language
        #: keyword-only parameters the evaluator fills in (``dtype``, ``rng``)
        self.context = context

    def __repr__(self) -> str:
        return f"<function spec {self.signature}>"

    @property
    def needs_context(self) -> bool:
        return bool(self.context)

    @property
    def random(self) -> bool:
        """Draws from the program's generator (it takes ``rng``)."""
        return "rng" in self.context

    @property
    def signature(self) -> str:
        """As the language writes it: ``norm(x, ord=2, axis=none, keepdims=false)``."""
        parts = []
        for p in self.params:
            if p.varargs:
                parts.append(f"*{p.name}")
            elif p.default is REQUIRED:
                parts.append(p.name)
            else:
                d = p.default
                shown = (
                    "none" if d is None
                    else str(d).lower() if isinstance(d, bool)
                    else f'"{d}"' if isinstance(d, str)
                    else d
                )  # fmt: skip
                parts.append(f"{p.name}={shown}")
        return f"{self.name}({', '.join(parts)})"


#: every public function by name and alias, in registration order
FUNCTIONS: dict[str, FunctionSpec] = {}


def _params_of(fn: Callable[..., Any], language: bool) -> tuple[tuple[Param, ...], tuple[str, ...]]:
    """The parameters of ``fn`` (its first one dropped when it is a partial of the primitive)
    and its keyword-only ones, read from its code object: inspect.signature would cost a
    millisecond of every start-up for the whole table."""
    fn = getattr(fn, "__wrapped__", fn)  # a function wrapped by _naming_nodes
    skip = 0
    if isinstance(fn, functools.partial):
        skip, fn = len(fn.args), fn.func
    code = fn.__code__
    names = code.co_varnames
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    defaults = fn.__defaults__ or ()
    first_default = n_pos - len(defaults)
    notes = fn.__annotations__
    params, context = [], []
    for i in range(skip, n_pos):
        default = defaults[i - first_default] if i >= first_default else REQUIRED
        params.append(_param(fn, names[i], notes, language, default, False))
    if code.co_flags & inspect.CO_VARARGS:
        params.append(_param(fn, names[n_pos + n_kw], notes, language, REQUIRED, True))
    context = list(names[n_pos : n_pos + n_kw])
    return tuple(params), tuple(context)


def _param(
    fn: Any, name: str, notes: dict[str, Any], language: bool, default: Any, varargs: bool
) -> Param:
    note = str(notes.get(name, ""))
    kind = KINDS.get(note.removesuffix(" | None"), "")
    if language and not kind:
        raise ValueError(f"{fn.__name__}: the language cannot read {name}: {note}")
    return Param(name, kind, default, varargs)


def install(
    name: str,
    call: Callable[..., Tensor],
    summary: str,
    derivative: str,
    *,
    params: tuple[Param, ...] | None = None,
    aliases: Sequence[str] = (),
    method: bool | str = True,
    language: bool = True,
    api_aliases: Sequence[str] = (),
) -> FunctionSpec:
    context: tuple[str, ...] = ()
    if params is None:
        params, context = _params_of(call, language)
    if any(p.name in ("axis", "keepdims") for p in params):
        call = torch_keywords(call)
    spec = FunctionSpec(name, call, params, summary, derivative, tuple(aliases), language, context)
    for key in (name, *aliases):
        if key in FUNCTIONS:
            raise ValueError(f"{key} is registered twice")
        FUNCTIONS[key] = spec
    for key in api_aliases:  # gradcli.<key> only: not in the language, no method
        FUNCTIONS[key] = FunctionSpec(key, call, params, summary, derivative, (), False, context)
    if method:
        for key in (name, *aliases) if method is True else (method,):
            setattr(Tensor, key, _as_method(call))
    return spec


def _as_method(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return fn(self, *args, **kwargs)

    method.__name__ = getattr(fn, "__name__", "method")
    method.__doc__ = fn.__doc__
    return method


def torch_keywords(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` also accepting torch's spellings: ``dim`` for ``axis``, ``keepdim`` for
    ``keepdims`` (``gradcli.sum(x, dim=0, keepdim=True)``, ``x.sum(dim=0)``)."""

    def call(*args: Any, **kwargs: Any) -> Tensor:
        if kwargs:
            if "dim" in kwargs:
                kwargs["axis"] = kwargs.pop("dim")
            if "keepdim" in kwargs:
                kwargs["keepdims"] = kwargs.pop("keepdim")
            return fn(*args, **kwargs)
        return fn(*args)  # no keywords (sum(x)): no empty dict passed on

    call.__name__ = getattr(fn, "__name__", "call")
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def public(
    prim: Primitive | None,
    summary: str,
    *,
    derivative: str | None = None,
    aliases: Sequence[str] = (),
    method: bool | str = True,
    language: bool = True,
    name: str | None = None,
    api_aliases: Sequence[str] = (),
) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Register a hand-written public function (its language signature is its Python
    signature: annotations ``Tensor``, ``Tensors``, ``Axis``, ``int``, ``bool``,
    ``float``, ``Shape``). With a primitive, the function receives it first."""

    def register(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        call: Callable[..., Tensor] = fn
        if prim is not None:
            call = functools.partial(fn, prim)
            for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
                setattr(call, attr, getattr(fn, attr))
        rule = derivative if derivative is not None else prim.doc if prim else ""
        spec = install(
            name or fn.__name__,
            call,
            summary,
            rule,
            aliases=aliases,
            method=method,
            language=language,
            api_aliases=api_aliases,
        )
        return spec.call

    return register


# --------------------------------------------------------------------------------------
# The namespaces rules run on, made from the registrations
# --------------------------------------------------------------------------------------


class Namespace:
    """Attributes only: the functions a rule calls as ``xp.name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name} namespace>"


@functools.cache
def namespaces() -> tuple[Any, Any]:
    """``(arrays, tensors)``: the array namespace (the backend, plus each primitive's
    forward function where the backend has no function of its name) and the
    differentiable namespace (every public function, recorded in the graph)."""
    arrays = array_namespace(NUMPY)
    tensors = Namespace("tensor")
    for key, spec in FUNCTIONS.items():
        setattr(tensors, key, spec.call)
    for key, value in TENSOR_ONLY.items():
        setattr(tensors, key, value)
    return arrays, tensors


@functools.cache
def array_namespace(backend: Any) -> Any:
    """The array namespace of ``backend``: its functions, plus each primitive's forward
    function on it where it has no function of the primitive's name."""
    arrays = Namespace("array")
    for key, value in vars(backend).items():
        setattr(arrays, key, value)
    for key in dir(type(backend)):
        if not key.startswith("_"):
            setattr(arrays, key, getattr(backend, key))
    for prim_name, prim in OPS.items():
        if not hasattr(arrays, prim_name):
            setattr(arrays, prim_name, functools.partial(prim.fwd, backend))
    return arrays


#: what the differentiable namespace offers beyond the public functions
TENSOR_ONLY: dict[str, Any] = {}
