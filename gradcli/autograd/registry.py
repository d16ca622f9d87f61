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
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from . import state as _state
from .backend import NUMPY
from .node import DIVISOR, FACTOR, GENERAL, Node, next_seq
from .shapes import check_broadcast
from .state import GRAD
from .tensor import _FLOAT64, FLOAT64_SCALARS, Tensor, accumulator, lift, note

_ndarray = NUMPY.ndarray


#: annotations of public functions that tell the language how to read an argument
Axis = Any  # None, an int or a tuple of ints
Shape = Any  # ints, or one tuple of ints
Tensors = Any  # a list of tensors, or one tensor read along its first axis


class Primitive:
    """A primitive operation: forward function, VJPs, what they read, derivative text."""

    __slots__ = (
        "_local", "broadcasts", "doc", "form", "fwd", "name", "nary", "plan", "save_ans",
        "save_in", "vjps",
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
        #: what backward reads of a primitive, in one attribute
        self.plan = (
            form, local, nary, self.vjps, broadcasts, len(self.save_in),
            bool(self.save_in) or self.save_ans,
        )  # fmt: skip

    @property
    def local(self) -> Callable[..., Any] | None:
        """The factor or divisor of a one-input elementwise primitive (see :func:`unary`)."""
        return self._local

    @local.setter
    def local(self, rule: Callable[..., Any] | None) -> None:
        self._local = rule
        self.plan = (self.plan[0], rule, *self.plan[2:])

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
    *vjps: Callable[..., Any] | None,
    saves: Sequence[str],
    doc: str,
    inputs: Sequence[str] = ("x",),
    nary: bool = False,
    broadcasts: bool = False,
) -> Primitive:
    """A primitive whose public function is written by hand (see :func:`public`)."""
    prim = Primitive(
        name, fwd, vjps, saves=saves, doc=doc, inputs=inputs, nary=nary, broadcasts=broadcasts
    )
    OPS.setdefault(name, prim)
    return prim


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
                shown = "none" if d is None else str(d).lower() if isinstance(d, bool) else d
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


def _install(
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
        spec = _install(
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
# The elementwise families: one call makes the primitive and its public function
# --------------------------------------------------------------------------------------


def unary(
    name: str,
    fwd: Callable[..., Any] | str,
    *,
    saves: Sequence[str],
    doc: str,
    summary: str,
    factor: Callable[..., Any] | None = None,
    divisor: Callable[..., Any] | None = None,
    vjp: Callable[..., Any] | None = None,
    aliases: Sequence[str] = (),
    public_name: str | None = None,
    language: bool = True,
    method: bool = True,
    api_aliases: Sequence[str] = (),
) -> Callable[[Any], Tensor]:
    """An elementwise primitive of one input, ``fwd(xp, x)`` (or the name of the
    namespace's function, ``"exp"``). Give its derivative as
    exactly one of ``factor(xp, ans, ctx[, x])`` (the VJP is ``g * factor``),
    ``divisor(...)`` (``g / divisor``) or ``vjp(xp, g, ans, ctx[, x])``."""
    forms = [(FACTOR, factor), (DIVISOR, divisor), (GENERAL, vjp)]
    given = [(form, fn) for form, fn in forms if fn is not None]
    if len(given) != 1:
        raise ValueError(f"{name}: give exactly one of factor, divisor, vjp")
    form, fn = given[0]
    fwd, run = _forward(fwd)
    prim = Primitive(name, fwd, [fn], saves=saves, doc=doc, form=form, local=fn)
    OPS[name] = prim
    save_x = bool(prim.save_in)
    save_ans = prim.save_ans
    state = _state.STATE
    off_default = _state.OFF_DEFAULT
    new_tensor = Tensor.__new__

    # The hot path of every elementwise op: record() written out, the edge inlined.
    def apply(x: Any) -> Tensor:
        if type(x) is not Tensor:
            x = lift(x)
        xd = x.data
        out = run(xd)
        t = new_tensor(Tensor)
        t.data = out = out if type(out) is _ndarray else NUMPY.asarray(out)
        t.grad = None
        t.label = None
        mode = state.mode if off_default else GRAD
        if mode and x.requires_grad:
            node = Node()  # no __init__: the quickest way to make one
            node.prim = prim
            to = x.grad_fn
            if to is None:
                to = accumulator(x)
            to.uses += 1
            node.next = (to,)
            node.saved = (xd,) if save_x else ()
            node.ans = out if save_ans else None
            node.ctx = None
            node.seq = next_seq()
            node.uses = 0
            node.retained = None
            t.requires_grad = True
            t.grad_fn = node
        else:
            t.requires_grad = False
            t.grad_fn = None
            t._acc = None
        if mode > GRAD:  # graph's trace, or a plan's recording
            note(t, name, (x,), run, mode)
        return t

    apply.__name__ = public_name or name
    apply.__doc__ = f"Elementwise {summary}; its VJP: {doc}."
    _install(
        public_name or name,
        apply,
        summary,
        doc,
        params=(Param("x", "tensor"),),
        aliases=aliases,
        method=method,
        language=language,
        api_aliases=api_aliases,
    )
    return apply


def _forward(fwd: Callable[..., Any] | str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(fwd(xp, *arrays), the same on NumPy)``; a name is the namespace's function."""
    if not isinstance(fwd, str):
        return fwd, functools.partial(fwd, NUMPY)
    name = fwd

    def call(xp: Any, *arrays: Any) -> Any:
        return getattr(xp, name)(*arrays)

    call.__name__ = name
    return call, getattr(NUMPY, name)


def binary(
    name: str,
    fwd: Callable[..., Any] | str,
    dx: Callable[..., Any] | None,
    dy: Callable[..., Any] | None,
    *,
    saves: Sequence[str],
    doc: str,
    summary: str,
    public_name: str | None = None,
    params: tuple[str, str] = ("a", "b"),
    aliases: Sequence[str] = (),
    dunder: str | None = None,
    language: bool = True,
    api_aliases: Sequence[str] = (),
) -> Callable[[Any, Any], Tensor]:
    """An elementwise primitive of two inputs with NumPy broadcasting, ``fwd(xp, x, y)``;
    VJPs ``dx(xp, g, ans, ctx, x, y)`` and ``dy(...)`` (broadcasting is undone by
    backward, never in a rule). ``dunder``: the operator (``"add"`` for ``+``)."""
    fwd, run = _forward(fwd)
    prim = Primitive(name, fwd, [dx, dy], saves=saves, doc=doc, inputs=("x", "y"), broadcasts=True)
    OPS[name] = prim
    save_x, save_y = prim.save_in or (False, False)
    keep_inputs = bool(prim.save_in)
    save_ans = prim.save_ans
    state = _state.STATE
    off_default = _state.OFF_DEFAULT
    new_tensor = Tensor.__new__
    label = public_name or name
    f64, f64_scalars = _FLOAT64, FLOAT64_SCALARS

    # The hot path of every elementwise op of two inputs: record() written out, the edges
    # inlined.
    def apply(x: Any, y: Any) -> Tensor:
        if type(x) is Tensor and type(y) is Tensor:
            xd = x.data
            yd = y.data
            xs = xd.shape
            ys = yd.shape
            shapes = None
            if xs != ys:
                shapes = (xs, ys)  # backward sums the gradients back down
                # A one-element operand never grows the result: only then is a check needed.
                if xd.size != 1 and yd.size != 1:
                    check_broadcast(name, xs, ys)
        else:
            # A Python float beside a float64 tensor: its cached constant, found here
            # without the general conversion (``h * y + 0.5``).
            c = None
            if type(y) is float and type(x) is Tensor and x.data.dtype is f64:
                c = f64_scalars.get(y)
                if c is not None:
                    y = c
            elif type(x) is float and type(y) is Tensor and y.data.dtype is f64:
                c = f64_scalars.get(x)
                if c is not None:
                    x = c
            if c is None:
                x, y, shapes = _operands(name, x, y)
            else:
                shapes = None  # a 0-d constant never grows the result
            xd = x.data
            yd = y.data
        out = run(xd, yd)
        t = new_tensor(Tensor)
        t.data = out = out if type(out) is _ndarray else NUMPY.asarray(out)
        t.grad = None
        t.label = None
        mode = state.mode if off_default else GRAD
        if mode and (x.requires_grad or y.requires_grad):
            tx = x.grad_fn
            if tx is None and x.requires_grad:
                tx = accumulator(x)
            if tx is not None:
                tx.uses += 1
            ty = y.grad_fn
            if ty is None and y.requires_grad:
                ref = y._acc  # accumulator(y) inlined: a leaf used again (W2's y)
                ty = ref() if ref is not None else None
                if ty is None:
                    ty = accumulator(y)
            if ty is not None:
                ty.uses += 1
            node = Node()  # no __init__: the quickest way to make one
            node.prim = prim
            node.next = (tx, ty)
            node.saved = (xd if save_x else None, yd if save_y else None) if keep_inputs else ()
            node.ans = out if save_ans else None
            node.ctx = shapes
            node.seq = next_seq()
            node.uses = 0
            node.retained = None
            t.requires_grad = True
            t.grad_fn = node
        else:
            t.requires_grad = False
            t.grad_fn = None
            t._acc = None
        if mode > GRAD:  # graph's trace, or a plan's recording
            note(t, name, (x, y), run, mode)
        return t

    def reflected(x: Any, y: Any) -> Tensor:
        return apply(y, x)

    apply.__name__ = label
    apply.__doc__ = f"Elementwise {summary} with broadcasting; its VJPs: {doc}."
    _install(
        label,
        apply,
        summary,
        doc,
        params=(Param(params[0], "tensor"), Param(params[1], "tensor")),
        aliases=aliases,
        method=language,
        language=language,
        api_aliases=api_aliases,
    )
    if dunder is not None:
        setattr(Tensor, f"__{dunder}__", apply)
        setattr(Tensor, f"__r{dunder}__", reflected)
    return apply


def _operands(name: str, x: Any, y: Any) -> tuple[Tensor, Tensor, Any]:
    """The operands of a binary primitive when one is not a tensor: as tensors (a Python
    number becomes a cached constant, a 0-d array: NumPy combines one of those with an
    array faster than it converts a float), and their shapes when one is broadcast up.
    A 0-d constant beside a tensor needs no shapes: it never grows the result, and takes
    no gradient."""
    if type(x) is not Tensor:
        x = lift(x, y)
        if type(y) is not Tensor:
            y = lift(y, x)
        elif x.data.ndim == 0:
            return x, y, None
    else:
        y = lift(y, x)
        if y.data.ndim == 0:
            return x, y, None
    xs, ys = x.data.shape, y.data.shape
    if xs == ys:
        return x, y, None
    if x.data.size != 1 and y.data.size != 1:
        check_broadcast(name, xs, ys)
    return x, y, (xs, ys)


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
    arrays = Namespace("array")
    for key, value in vars(NUMPY).items():
        setattr(arrays, key, value)
    for key in dir(type(NUMPY)):
        if not key.startswith("_"):
            setattr(arrays, key, getattr(NUMPY, key))
    for prim_name, prim in OPS.items():
        if not hasattr(arrays, prim_name):
            setattr(arrays, prim_name, functools.partial(prim.fwd, NUMPY))
    tensors = Namespace("tensor")
    for key, spec in FUNCTIONS.items():
        setattr(tensors, key, spec.call)
    for key, value in TENSOR_ONLY.items():
        setattr(tensors, key, value)
    return arrays, tensors


#: what the differentiable namespace offers beyond the public functions
TENSOR_ONLY: dict[str, Any] = {}
