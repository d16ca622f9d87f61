"""Compiled programs: parsed once; on the first evaluation with given input shapes, the
engine's calls are recorded as a plan, and later evaluations with those shapes replay it
(docs/api.md, "Compiled programs"; docs/engine.md, "Replay").

A replay gives the bits a fresh evaluation gives; a program the plan cannot hold (see
``autograd/replay.py``) is evaluated afresh every time, and so is a replay that fails
(a matrix singular for these values), which then reports what a fresh evaluation reports.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from . import autograd as E
from .api import Result, Setup, _grad_output, _root, _Run, evaluate
from .autograd.replay import Plan, recording
from .i18n import msg
from .language import DEFAULT_MAX_PROGRAM_CHARS, check_program_length, compile_program

#: a key whose evaluation cannot be planned: evaluated afresh every time
_UNPLANNED = object()
#: a key seen once by ``Plans(first=False)``: recorded when it is seen again
_SEEN = object()


class _Recorded:
    """A plan and how to read a :class:`_Run` out of its outputs."""

    __slots__ = ("bindings", "constant_errors", "derived_value", "names", "out_shape",
                 "overflow", "plan", "reduction", "wanted")  # fmt: skip

    def __init__(
        self,
        plan: Plan,
        names: list[str],
        wanted: list[str],
        bindings: list[tuple[str, str]],
        reduction: str | None,
        overflow: bool,
        out_shape: tuple[int, ...],
        derived_value: bool,
    ) -> None:
        self.plan = plan
        self.names = names  # the inputs, in order
        self.wanted = wanted  # those with a gradient
        #: per binding: its name and where its gradient comes from ("none": it has none,
        #: "grad": the plan's output, zeros when the plan gives none)
        self.bindings = bindings
        self.reduction = reduction
        self.overflow = overflow
        self.out_shape = out_shape
        self.derived_value = derived_value  # else the output is a constant of the plan
        #: the floating-point errors of the parts of the forward pass that depend on no
        #: input: computed once, when recording, and counted by every replay as they were
        #: by the recording (:meth:`Plans.run`)
        self.constant_errors: dict[str, int] = {}

    def run(self, setup: Setup, grad_output: Any, max_elements: int, zeros: bool = True) -> _Run:
        """The evaluation for ``setup``'s values; a gradient backward never reached is
        zeros (as ``evaluate`` reports it), or None with ``zeros=False`` (as ``.grad``)."""
        inputs = [setup.values[n] for n in self.names]
        if grad_output is not None:
            g = _grad_output(grad_output, setup, max_elements)
            if g.shape != self.out_shape:
                raise _Fallback  # a fresh evaluation says what is wrong, as it would
            inputs.append(g)
        # the outputs the replay's fused runs found all finite as they made them
        known: set[int] | None = set() if self.plan.fused else None
        outs = self.plan.run(inputs, known)
        value = outs[0]
        if not self.derived_value:
            value = np.array(value, copy=True)  # the plan's constant is not the caller's
        n = len(self.wanted)
        # the arrays of the result that are not gradients: no gradient handed out may be one
        taken = {id(a) for a in inputs}
        taken.add(id(value))
        taken.update(id(v) for v in outs[1 + n :: 2])
        made = iter(self.plan.made[1:])
        gs = iter(outs[1:])
        grads: dict[str, np.ndarray | None] = {}
        for name in self.names:
            if name in self.wanted:
                g, new = next(gs), next(made)
                like = setup.values[name]
                grads[name] = None if g is None and not zeros else _own(g, like, new, taken)
            else:
                grads[name] = None
        intermediates: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        for name, kind in self.bindings:
            v, g_b = next(gs), next(gs)
            next(made)
            new = next(made)
            intermediates[name] = (v, None if kind == "none" else _own(g_b, v, new, taken))
        finite = None
        if known:
            slots = self.plan.outputs
            asked = [name for name in self.names if name in self.wanted]  # the outputs' order
            finite = {name: True for name, s in zip(asked, slots[1:], strict=False) if s in known}
            if slots[0] in known:
                finite["output"] = True
        return _Run(value, grads, intermediates, self.reduction, self.overflow, finite)

    def count_constant_errors(self, errors: Any) -> None:
        """Count, into ``errors``, the floating-point errors of the plan's constants, which
        a replay does not compute again (as the recording counted them)."""
        for kind, n in self.constant_errors.items():
            errors.counts[kind] = errors.counts.get(kind, 0) + n


def _own(g: Any, like: np.ndarray, new: bool, taken: set[int]) -> np.ndarray:
    """A gradient of the caller's own (clipping writes into it), in ``like``'s dtype; zeros
    where backward reached nothing. An array a step made on this replay, that owns its
    memory, is writable and is no other part of the result, is handed out as it is (as
    backward hands a buffer of its own to ``.grad``); anything else is copied."""
    if g is None:
        return np.zeros_like(like)
    if (
        new
        and type(g) is np.ndarray
        and g.base is None
        and g.flags.writeable
        and g.dtype == like.dtype
        and g.shape == like.shape
        and id(g) not in taken
    ):
        taken.add(id(g))
        return g
    return np.array(g, dtype=like.dtype, copy=True)


class _Fallback(Exception):
    """This evaluation is made afresh."""


class Plans:
    """Plans of evaluations by program, options and input shapes (the last ``size`` kept).
    Give one to :func:`gradcli.evaluate` (``plans=``) to have evaluations of a program seen
    before replayed; thread-safe.

    ``first``: record a plan on the first evaluation of a key (a program that will surely
    be evaluated again: :func:`compile`, ``optimize``); else on the second, so that a stream
    of programs each seen once (``batch`` of generated programs) pays for no recording.
    ``pool``: a plan keeps the large arrays a replay lets go for the next replay (see
    ``autograd.replay.Plan``): for programs on large arrays evaluated many times."""

    def __init__(self, size: int = 64, *, first: bool = True, pool: bool = False) -> None:
        self.size = size
        self.first = first
        self.pool = pool
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def run(
        self,
        setup: Setup,
        grad_output: Any,
        seed: int,
        max_elements: int,
        errors: Any,
        zeros: bool = True,
    ) -> _Run | None:
        """The evaluation by a plan (recorded now if need be), or None: evaluate afresh.
        ``errors``: where floating-point errors are counted (only this evaluation's are
        added: a recording's and a failed replay's are taken back). ``zeros``: see
        :meth:`_Recorded.run`."""
        before = dict(errors.counts)
        key = self.key(
            setup.program.text, tuple(setup.wanted), setup.dtype, seed, max_elements,
            grad_output is None, setup.values,
        )  # fmt: skip
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is _UNPLANNED:
            return None
        if entry is None and not self.first:
            self._store(key, _SEEN)  # seen once: evaluated afresh, recorded if seen again
            return None
        recorded: dict[str, int] | None = None
        if entry is None or entry is _SEEN:
            entry = _record(setup, grad_output, seed, max_elements, self.pool)
            recorded = _added(errors.counts, before)  # the recording's own errors ...
            _restore(errors, before)  # ... which the replay below counts again
            if entry is None:
                return None  # an error for these values: a fresh evaluation reports it
            if entry is _UNPLANNED:
                self._store(key, entry)
                return None
        try:
            run = entry.run(setup, grad_output, max_elements, zeros)
        except Exception:  # a singular matrix for these values, a bad grad_output ...
            if recorded is not None:
                self._store(key, entry)
            _restore(errors, before)  # counted by the failed replay: the fresh one counts
            return None  # ... is answered as a fresh evaluation answers it
        if recorded is not None:
            # what the replay did not count again came from the constants it did not
            # compute again (on the same values as the recording: the same errors)
            replayed = _added(errors.counts, before)
            entry.constant_errors = {
                k: n - replayed.get(k, 0) for k, n in recorded.items() if n > replayed.get(k, 0)
            }
            self._store(key, entry)
        entry.count_constant_errors(errors)
        return run

    def values_replay(
        self, setup: Setup, seed: int, max_elements: int, errors: Any
    ) -> Callable[[Mapping[str, np.ndarray]], np.ndarray | None] | None:
        """For many evaluations of the forward pass alone on values of ``setup``'s shapes
        (check's finite differences): the plan kept for them, replayed with no key made,
        no lock taken and no Result built. ``replay(values)`` is the output, raveled in
        float64, with errors counted as :meth:`run` counts them; None when a replay fails
        (a fresh evaluation then answers, as :meth:`run`'s caller does). None when no plan
        is kept for ``setup``."""
        key = self.key(
            setup.program.text, (), setup.dtype, seed, max_elements, True, setup.values
        )  # fmt: skip
        entry = self.recorded(key)
        if entry is None:
            return None
        names, plan = entry.names, entry.plan

        def replay(values: Mapping[str, np.ndarray]) -> np.ndarray | None:
            before = dict(errors.counts)
            try:
                value = plan.run([values[n] for n in names])[0]
            except Exception:  # as in run: its errors undone, evaluated afresh
                _restore(errors, before)
                return None
            entry.count_constant_errors(errors)
            return np.asarray(value).astype(np.float64).ravel()

        return replay

    @staticmethod
    def key(
        text: str,
        wanted: tuple[str, ...],
        dtype: str,
        seed: int,
        max_elements: int,
        no_grad_output: bool,
        values: Mapping[str, np.ndarray],
    ) -> tuple[Any, ...]:
        """What a plan is kept by: the program, the request's options, the inputs' names,
        shapes and dtypes."""
        shapes = tuple((n, v.shape, v.dtype.str) for n, v in values.items())
        return (text, wanted, dtype, seed, max_elements, no_grad_output, shapes)

    def recorded(self, key: tuple[Any, ...]) -> _Recorded | None:
        """The plan kept by ``key``, if one was recorded."""
        with self._lock:
            entry = self._entries.get(key)
        return entry if isinstance(entry, _Recorded) else None

    def _store(self, key: Any, entry: Any) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def _added(counts: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """The errors counted since ``before``, by kind."""
    return {k: n - before.get(k, 0) for k, n in counts.items() if n > before.get(k, 0)}


def _restore(errors: Any, counts: dict[str, int]) -> None:
    errors.counts.clear()
    errors.counts.update(counts)


def _record(setup: Setup, grad_output: Any, seed: int, max_elements: int, pool: bool) -> Any:
    """Evaluate once with the engine's calls recorded: a :class:`_Recorded`, or
    ``_UNPLANNED`` when the evaluation cannot be planned, or None when it raised."""
    try:
        leaves = setup.leaves()
        names = list(leaves)
        g = None if grad_output is None else _grad_output(grad_output, setup, max_elements)
        inputs = [leaves[n].data for n in names] + ([] if g is None else [g])
        with recording(inputs) as rec:
            ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
            out = ev.output
            root, reduction = _root(out, g)
            n_forward = len(rec.steps)
            if root.requires_grad:
                rec.backward(root, g)
    except Exception:  # a fresh evaluation raises it, as it would
        return None
    if rec.failed is not None:
        return _UNPLANNED
    outputs: list[int | None] = [rec.slot(out.data)]
    wanted = [n for n in names if n in setup.wanted]
    outputs += [rec.leaf_grads.get(id(leaves[n])) for n in wanted]
    bindings: list[tuple[str, str]] = []
    for name, t in ev.bindings.items():
        outputs.append(rec.slot(t.data))
        if not t.requires_grad:
            bindings.append((name, "none"))
            outputs.append(None)
        else:
            bindings.append((name, "grad"))
            grads = rec.leaf_grads if t.is_leaf else rec.kept_grads
            outputs.append(grads.get(id(t)))
    plan = rec.plan(outputs, n_forward, pool)
    return _Recorded(
        plan, names, wanted, bindings, reduction, ev.literal_overflow, out.shape,
        rec.depends(out.data),
    )  # fmt: skip


class Compiled:
    """A program compiled by :func:`compile`: call it with inputs for a :class:`Result`."""

    def __init__(
        self,
        expr: str,
        *,
        wrt: Iterable[str] | None = None,
        dtype: Any = "float64",
        seed: int = 0,
        max_elements: int = E.DEFAULT_MAX_ELEMENTS,
        max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
        plans: int = 16,
        copy: bool = True,
    ) -> None:
        from .api import _shown
        from .errors import InputError

        if not isinstance(expr, str):
            raise InputError(msg("expr must be a string, not {expr}", expr=_shown(expr)))
        check_program_length(expr, max_program_chars)
        compile_program(expr)  # a parse error now, not at the first call
        self.expr = expr
        self.wrt = None if wrt is None else list(wrt)
        self.dtype = dtype
        self.seed = seed
        self.max_elements = max_elements
        self.max_program_chars = max_program_chars
        self.plans = Plans(plans, pool=True)
        self.copy = copy

    def __repr__(self) -> str:
        return f"<compiled {self.expr!r}, {len(self.plans)} plan(s)>"

    def __call__(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        grad_output: Any = None,
        clip_norm: float | None = None,
        norm_type: Any = 2.0,
        clip_value: float | None = None,
        id: Any = None,
    ) -> Result:
        return evaluate(
            self.expr,
            inputs,
            wrt=self.wrt,
            grad_output=grad_output,
            clip_norm=clip_norm,
            norm_type=norm_type,
            clip_value=clip_value,
            dtype=self.dtype,
            seed=self.seed,
            max_elements=self.max_elements,
            max_program_chars=self.max_program_chars,
            id=id,
            plans=self.plans,
            copy=self.copy,
        )


def compile(
    expr: str,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    copy: bool = True,
) -> Compiled:
    """``expr`` parsed once, to be evaluated many times: ``f = gradcli.compile("sum(a*b+b)")``,
    then ``f({"a": [3, 4], "b": [5, 6]})`` is ``evaluate("sum(a*b+b)", {...})``, the same
    numbers to the last bit. The first call with given input shapes records the engine's
    calls; later calls with those shapes replay them, with no parsing, tree or graph.
    ``copy=False``: arrays given as inputs are read where they are instead of copied (see
    :func:`evaluate`)."""
    return Compiled(
        expr, wrt=wrt, dtype=dtype, seed=seed, max_elements=max_elements,
        max_program_chars=max_program_chars, copy=copy,
    )  # fmt: skip
