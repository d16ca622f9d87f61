"""The elementwise families (docs/engine.md, "Adding a primitive"): one call, :func:`unary`
or :func:`binary`, makes the primitive, its public function, its Tensor method and, for
:func:`binary`, its operator. Their ``apply`` is the hot path of every elementwise op:
recording is written out there, edges inlined, rather than going through
``tensor.record``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from . import state as _state
from .backend import NUMPY, as_data
from .node import DIVISOR, FACTOR, GENERAL, SEQ, Node
from .registry import OPS, Param, Primitive, install, product_rules, value_rule
from .shapes import check_broadcast
from .state import GRAD
from .tensor import _FLOAT64, FLOAT64_SCALARS, Tensor, accumulator, lift, note

_ndarray = NUMPY.ndarray
_new = object.__new__  # a Tensor without its __init__ (see Tensor)


def unary(
    name: str,
    fwd: Callable[..., Any] | str,
    *,
    saves: Sequence[str],
    doc: str,
    summary: str,
    factor: Callable[..., Any] | str | None = None,
    divisor: Callable[..., Any] | str | None = None,
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
    ``divisor(...)`` (``g / divisor``) or ``vjp(xp, g, ans, ctx[, x])``; a factor or divisor
    that is a saved value may be given as its name, ``"ans"`` or ``"x"``."""
    forms = [(FACTOR, factor), (DIVISOR, divisor), (GENERAL, vjp)]
    given = [(form, fn) for form, fn in forms if fn is not None]
    if len(given) != 1:
        raise ValueError(f"{name}: give exactly one of factor, divisor, vjp")
    form, fn = given[0]
    direct = None
    if isinstance(fn, str):
        if form == GENERAL:
            raise ValueError(f"{name}: only a factor or divisor may be named")
        fn, direct = value_rule(name, fn, saves)
    fwd, run = _forward(fwd)
    prim = Primitive(
        name, fwd, [fn], saves=saves, doc=doc, form=form, local=fn, direct=direct
    )  # fmt: skip
    OPS[name] = prim
    save_x = bool(prim.save_in)
    save_ans = prim.save_ans
    keep_ans_only = save_ans and not save_x
    state = _state.STATE
    off_default = _state.OFF_DEFAULT

    # The hot path of every elementwise op: record() written out, the edge inlined. While
    # OFF_DEFAULT is empty every thread records and notes nothing (docs/engine.md,
    # "State"): the thread's mode is read only otherwise.
    def apply(x: Any) -> Tensor:
        if type(x) is not Tensor:
            x = lift(x)
        xd = x.data
        out = run(xd)
        if type(out) is not _ndarray:
            out = as_data(out)
        t = _new(Tensor)  # no __init__ runs (see Tensor)
        t.data = out
        t.grad = None
        if x.requires_grad and (not off_default or state.mode):
            node = Node()  # no __init__: the quickest way to make one
            node.prim = prim
            to = x.grad_fn
            if to is None:
                to = accumulator(x)
            to.uses += 1
            node.next = (to,)
            if keep_ans_only:  # exp, tanh, sigmoid, sqrt: the flags tested once
                node.saved = ()
                node.ans = out
            else:
                node.saved = (xd,) if save_x else ()
                node.ans = out if save_ans else None
            node.ctx = None
            node.seq = next(SEQ)
            node.uses = 0
            node.retained = None
            t.requires_grad = True
            t.grad_fn = node
        else:
            t.requires_grad = False
            t.grad_fn = None
            t._acc = None
        if off_default and state.mode > GRAD:  # graph's trace, or a plan's recording
            note(t, name, (x,), run, state.mode)
        return t

    apply.__name__ = public_name or name
    apply.__doc__ = f"Elementwise {summary}; its VJP: {doc}."
    install(
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
    dx: Callable[..., Any] | str | None,
    dy: Callable[..., Any] | str | None,
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
    VJPs ``dx(xp, g, ans, ctx, x, y)`` and ``dy(...)``, or text ``"g * y"`` (broadcasting
    is undone by backward, never in a rule). ``dunder``: the operator (``"add"`` for ``+``)."""
    fwd, run = _forward(fwd)
    rules, direct = product_rules(name, (dx, dy), ("x", "y"), saves)
    prim = Primitive(
        name, fwd, rules, saves=saves, doc=doc, inputs=("x", "y"), broadcasts=True, direct=direct
    )  # fmt: skip
    OPS[name] = prim
    save_x, save_y = prim.save_in or (False, False)
    keeps_an_input = bool(prim.save_in)
    keeps_nothing = not keeps_an_input and not prim.save_ans
    keeps_inputs_only = save_x and save_y and not prim.save_ans
    save_ans = prim.save_ans
    state = _state.STATE
    off_default = _state.OFF_DEFAULT
    label = public_name or name
    f64, f64_scalars = _FLOAT64, FLOAT64_SCALARS

    # The hot path of every elementwise op of two inputs: record() written out, the edges
    # inlined.
    def apply(x: Any, y: Any) -> Tensor:
        if type(x) is Tensor:
            xd = x.data
            if type(y) is Tensor:
                yd = y.data
                if xd.shape == yd.shape:
                    shapes = None
                else:
                    shapes = xs, ys = xd.shape, yd.shape  # backward sums gradients back down
                    # A one-element operand never grows the result: only then is a check
                    # needed.
                    if xd.size != 1 and yd.size != 1:
                        check_broadcast(name, xs, ys)
            elif type(y) is float and xd.dtype is f64 and (c := f64_scalars.get(y)) is not None:
                # A Python float beside a float64 tensor: its cached constant, found here
                # without the general conversion (``h * y + 0.5``); a 0-d constant never
                # grows the result.
                y = c
                yd = c.data
                shapes = None
            else:
                x, y, shapes = _operands(name, x, y)
                xd = x.data
                yd = y.data
        elif (
            type(x) is float
            and type(y) is Tensor
            and (yd := y.data).dtype is f64
            and (c := f64_scalars.get(x)) is not None
        ):
            x = c
            xd = c.data
            shapes = None
        else:
            x, y, shapes = _operands(name, x, y)
            xd = x.data
            yd = y.data
        out = run(xd, yd)
        if type(out) is not _ndarray:
            out = as_data(out)
        t = _new(Tensor)  # no __init__ runs (see Tensor)
        t.data = out
        t.grad = None
        if (x.requires_grad or y.requires_grad) and (not off_default or state.mode):
            tx = x.grad_fn
            if tx is not None:
                tx.uses += 1
            elif x.requires_grad:
                tx = accumulator(x)
                tx.uses += 1
            if y.requires_grad:  # (a constant, h + 0.5's, settled by one test)
                ty = y.grad_fn
                if ty is None:
                    ref = y._acc  # accumulator(y) inlined: a leaf used again (W2's y)
                    ty = ref() if ref is not None else None
                    if ty is None:
                        ty = accumulator(y)
                ty.uses += 1
            else:
                ty = None
            node = Node()  # no __init__: the quickest way to make one
            node.prim = prim
            node.next = (tx, ty)
            if keeps_nothing:  # add, sub: the flags tested once
                node.saved = ()
                node.ans = None
            elif keeps_inputs_only:  # mul
                node.saved = (xd, yd)
                node.ans = None
            else:
                node.saved = (
                    (xd if save_x else None, yd if save_y else None) if keeps_an_input else ()
                )
                node.ans = out if save_ans else None
            node.ctx = shapes
            node.seq = next(SEQ)
            node.uses = 0
            node.retained = None
            t.requires_grad = True
            t.grad_fn = node
        else:
            t.requires_grad = False
            t.grad_fn = None
            t._acc = None
        if off_default and state.mode > GRAD:  # graph's trace, or a plan's recording
            note(t, name, (x, y), run, state.mode)
        return t

    def reflected(x: Any, y: Any) -> Tensor:
        return apply(y, x)

    apply.__name__ = label
    apply.__doc__ = f"Elementwise {summary} with broadcasting; its VJPs: {doc}."
    install(
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
