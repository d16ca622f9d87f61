"""Plans: one evaluation's primitive calls, recorded once and replayed on new arrays
(docs/engine.md, "Replay").

While a :class:`Recorder` is active (grad mode ``RECORD``, this thread only), every op
that reads a value depending on the inputs is noted with the function that recomputes
its output from its inputs' arrays (its *redo*), and backward is walked by
:func:`Recorder.backward`, which runs the same rules in the same order as ``backward()``
and notes each call. The notes make a :class:`Plan`: a flat list of steps, each a function
and the slots of its arguments. Replaying it calls the same functions on the same kinds of
arrays in the same order, so its values and gradients are the bits a fresh evaluation
gives; no tensor, node or tree is made.

What a plan cannot hold makes the recording fail (``Recorder.failed``), and the caller
evaluates afresh: an op with no redo, a value that depends on the inputs read into Python
(an index, a shape, a number: ``Recorder.opaque``), or a redo that does not give the bits
the op gave. Data-dependent choices inside a forward function or a rule (where a tie
falls, whether a matrix is singular) are made again on every replay, as the functions
themselves run again.
"""

from __future__ import annotations

import heapq
import operator
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .backend import NUMPY
from .fusion import Quietly, Run, fuse, merge
from .node import ANS, FACTOR, identity
from .state import RECORD, STATE, set_mode
from .tensor import Tensor, edge


class RecordingFailed(Exception):
    """The evaluation being recorded does something a plan cannot hold."""


def _same_bits(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same array to the last bit (nan included)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    size = a.dtype.itemsize
    if a.size < POOL_MIN or size not in (1, 2, 4, 8):
        return a.tobytes() == b.tobytes()
    # large: compared as unsigned integers of the same width, with no copy to bytes
    bits = np.dtype(f"u{size}")
    return bool(np.array_equal(a.view(bits), b.view(bits)))


def _as_array(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose result is always an array (a 0-d one for a NumPy scalar)."""
    asarray = np.asarray

    def call(*args: Any) -> Any:
        return asarray(fn(*args))

    return call


class Recorder:
    """Notes the steps of one evaluation. Slots hold every value a step reads or makes:
    the inputs first, then constants (the namespace, contexts, arrays that depend on no
    input), then the values steps make."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        self.values: list[Any] = list(inputs)  # the slots' values while recording
        self.n_inputs = len(self.values)
        #: a value's slot, by the identity of the object (values are kept alive in
        #: ``values``, so an identity is never reused while recording)
        self.slot_of: dict[int, int] = {id(v): i for i, v in enumerate(self.values)}
        self.derived: set[int] = set(range(self.n_inputs))  # slots that depend on inputs
        self.steps: list[tuple[Callable[..., Any], tuple[int, ...], int]] = []
        self.failed: str | None = None
        self.leaf_grads: dict[int, int] = {}  # id(leaf tensor) -> slot of its gradient
        self.kept_grads: dict[int, int] = {}  # id(retained tensor) -> slot of its gradient

    # --- slots ----------------------------------------------------------------------
    def _slot(self, value: Any) -> int:
        """The slot of ``value``; a value not met before is a constant of the plan."""
        slot = self.slot_of.get(id(value))
        if slot is None:
            slot = len(self.values)
            self.values.append(value)
            self.slot_of[id(value)] = slot
        return slot

    def _call(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """Call ``fn(*args)`` and note it; its result gets a slot of its own."""
        slots = tuple(self._slot(a) for a in args)
        out = fn(*args)
        self._made(out, any(s in self.derived for s in slots))
        self.steps.append((fn, slots, len(self.values) - 1))
        return out

    def _made(self, value: Any, derived: bool) -> None:
        slot = len(self.values)
        self.values.append(value)
        self.slot_of[id(value)] = slot
        if derived:
            self.derived.add(slot)

    def fail(self, why: str) -> None:
        if self.failed is None:
            self.failed = why

    def depends(self, value: Any) -> bool:
        """Whether ``value`` (an array) depends on the inputs."""
        slot = self.slot_of.get(id(value))
        return slot is not None and slot in self.derived

    # --- forward ----------------------------------------------------------------------
    def op(self, t: Tensor, inputs: Sequence[Any], redo: Callable[..., Any] | None) -> None:
        """Note the op that made ``t`` from ``inputs``, if it read a value that depends on
        the inputs: its redo, checked to give ``t``'s bits from the inputs' arrays."""
        arrays = [i.data if type(i) is Tensor else i for i in inputs]
        if not any(self.depends(a) for a in arrays):
            return  # a constant of the plan, wherever it is read
        if redo is None:
            self.fail("an operation that cannot be replayed")
            return
        slots = tuple(self._slot(a) for a in arrays)
        try:
            with NUMPY.quiet():  # a check, not the evaluation: its errors are not counted
                again = redo(*arrays)
        except Exception:  # any failure means: evaluate afresh
            self.fail("an operation whose replay fails")
            return
        if type(again) is not type(t.data) and type(t.data) is np.ndarray:
            # a NumPy scalar from a 0-d operand, which the op made a 0-d array: so must the
            # replay, as later ops compute with a scalar in other ways (x ** y to 1 ulp)
            redo = _as_array(redo)
            again = np.asarray(again)
        if type(again) is not type(t.data) or not _same_bits(again, t.data):
            self.fail("an operation whose replay differs")
            return
        self._made(t.data, True)
        self.steps.append((redo, slots, len(self.values) - 1))

    def opaque(self, t: Any, what: str) -> None:
        """``t`` (a tensor or an array) is read into Python (a number, an index, a shape):
        a plan cannot hold that when it depends on the inputs."""
        if self.depends(t.data if type(t) is Tensor else t):
            self.fail(f"{what} reads a value that depends on the inputs")

    # --- backward ---------------------------------------------------------------------
    def backward(self, root: Tensor, gradient: Any) -> None:
        """``root.backward(gradient)`` (``gradient`` an array, or None for ones), noted.

        This is ``backward._run_plain`` step for step: the same nodes in the same order,
        the same rules, and the same buffers written in place, as the terms of a gradient
        must be added in the same order with the same operand first (the sign of a nan
        sum is its first operand's) and a 0-d array must stay an array where backward
        keeps one. The tests replay every function and random programs against fresh
        evaluations to the last bit; change the two walks together."""
        from . import registry
        from .backward import INPLACE_MIN, _ones, fits_into

        start = edge(root)  # its node, or the accumulator of a leaf (the program `x`)
        if start is None:
            return
        xp = registry.namespaces()[0]
        g = _ones(root.data) if gradient is None else gradient
        self._slot(g)
        call = self._call
        ndarray = np.ndarray
        node: Any = start
        gnode: Any = g
        own = False
        ready: list[tuple[Any, Any, bool]] = []
        nxt: Any = None
        gnxt: Any = None
        grads: dict[Any, Any] = {}
        owned: set[Any] = set()
        queue: list[tuple[int, Any]] = []
        with NUMPY.quiet():
            while True:
                if node is None:
                    if ready:
                        node, gnode, own = ready.pop()
                    elif queue:
                        node = heapq.heappop(queue)[1]
                        gnode = grads.pop(node)
                        own = node in owned
                    else:
                        break
                prim = node.prim
                if prim is None:
                    self.leaf_grads[id(node.variable)] = self._slot(gnode)
                    node = None
                    continue
                if node.retained is not None:
                    kept = node.retained()
                    if kept is not None:
                        self.kept_grads[id(kept)] = self._slot(gnode)
                form, local_rule, nary, vjps, broadcasts, nsaved, _, direct, _ = prim.plan
                saved, ans, ctx = node.saved, node.ans, node.ctx
                if form:
                    to = node.next[0]
                    if direct is not None:  # a saved value, read as _run_plain reads it
                        local = ans if direct == ANS else saved[direct]
                    else:
                        args = (xp, ans, ctx, saved[0]) if nsaved else (xp, ans, ctx)
                        local = call(local_rule, args)
                    if own and gnode.size >= INPLACE_MIN and fits_into(local, gnode):
                        into = NUMPY.multiply_into if form == FACTOR else NUMPY.divide_into
                        gnode = call(into, (gnode, local))
                    else:
                        op = operator.mul if form == FACTOR else operator.truediv
                        gnode = call(op, (gnode, local))
                        own = type(gnode) is ndarray
                    if to.uses == 1:
                        node = to
                        continue
                    self._collect(to, gnode, own, grads, owned, queue)
                    node = gnode = None
                    continue
                edges = node.next
                shapes = ctx if broadcasts else None
                node = nxt = None
                for i, to in enumerate(edges):
                    if to is None:
                        continue
                    if nary:
                        pg = call(vjps[0], (xp, gnode, ans, ctx, i))
                    else:
                        rule = vjps[i]
                        if rule is identity:
                            pg = gnode
                        elif rule is None:
                            continue
                        elif direct is not None:  # g times a saved input, as _run_plain
                            pg = call(operator.mul, (gnode, saved[direct[i]]))
                        else:
                            pg = call(rule, (xp, gnode, ans, ctx, *saved))
                            if pg is None:
                                continue
                    if shapes is not None and pg.shape != shapes[i]:
                        pg = call(xp.sum_to, (pg, shapes[i]))
                    fresh = pg is not gnode and type(pg) is ndarray and pg.base is None
                    if to.uses == 1:
                        if nxt is not None:
                            ready.append((nxt, gnxt, own))
                        nxt, gnxt, own = to, pg, fresh
                    elif to in owned:
                        grads[to] = call(operator.iadd, (grads[to], pg))
                    else:
                        self._collect(to, pg, fresh, grads, owned, queue)
                if nxt is not None:
                    node, gnode = nxt, gnxt
                    gnxt = None
                else:
                    gnode = None

    def _collect(
        self,
        to: Any,
        pg: Any,
        fresh: bool,
        grads: dict[Any, Any],
        owned: set[Any],
        queue: list[Any],
    ) -> None:
        """``backward._collect``, noted."""
        prev = grads.get(to)
        if prev is None:
            grads[to] = pg
            heapq.heappush(queue, (-to.seq, to))
            if fresh:
                owned.add(to)
        elif to in owned:
            grads[to] = self._call(operator.iadd, (prev, pg))
        elif fresh:
            grads[to] = self._call(operator.iadd, (pg, prev))
            owned.add(to)
        else:
            total = grads[to] = self._call(operator.add, (prev, pg))
            if type(total) is np.ndarray:
                owned.add(to)

    # --- the plan -----------------------------------------------------------------------
    def slot(self, value: Any) -> int:
        """The slot of a value met while recording (a new constant if it was not)."""
        return self._slot(value)

    def plan(self, outputs: Sequence[int | None], n_forward: int, pool: bool = False) -> Plan:
        """The plan that gives the values of the slots ``outputs`` (None: no value) from
        new inputs; its first ``n_forward`` steps are the forward pass. ``pool``: see
        :class:`Plan`."""
        return Plan(self, list(outputs), n_forward, pool)


#: a step's function that is an elementwise NumPy function of one output: the ufunc, which
#: takes ``out=`` (the operators are what the families and rules call)
_UFUNC_OF = {
    operator.mul: np.multiply, operator.add: np.add, operator.sub: np.subtract,
    operator.truediv: np.divide, operator.neg: np.negative,
}  # fmt: skip
#: arrays of at least this many elements are kept between replays (see Plan)
POOL_MIN = 1 << 14


#: the pool is kept only where reference counts are known to be exact: CPython 3.10-3.13
#: with the GIL (3.14's borrowed references, or threads without a GIL, could show an
#: array held by a caller as free; the pool is then off, which changes no number)
POOL_WORKS = (
    sys.implementation.name == "cpython"
    and (3, 10) <= sys.version_info[:2] <= (3, 13)
    and getattr(sys, "_is_gil_enabled", lambda: True)()
)


#: plans of at most this many steps are replayed by one function of their own
STRAIGHT_MAX = 256


def _straight_line(plan: Plan) -> Callable[..., list[Any]]:
    """``plan``'s replay as one function, made once: ``f(*inputs, quiet)``, the outputs.

    A replay that goes through the list of steps pays for each step's loop, the lookup of
    its slots and the clearing of the dead ones, about 0.3 µs: on small arrays as much as
    the NumPy call itself. Here each step is one line, ``v3 = f1(v2, v1)``, the slots are
    local variables, constants are names bound once, and a dead slot is ``del``-ed where
    :meth:`Plan.run` lets it go: the same calls in the same order, with the same arrays.
    The source is made as the standard library makes a dataclass's ``__init__``: it holds
    only slot and step numbers, never a value or a name of the program."""
    made = {out for steps in (plan.forward_steps, plan.backward_steps) for _, _, out, _ in steps}
    names: dict[str, Any] = {"_quiet": NUMPY.quiet}

    def slot(s: int) -> str:
        if s < plan.n_inputs or s in made:
            return f"v{s}"
        names[f"c{s}"] = plan.template[s]
        return f"c{s}"

    def lines(steps: list[Any], first: int, indent: str) -> list[str]:
        out = []
        for k, (fn, slots, made_slot, dead) in enumerate(steps, first):
            names[f"f{k}"] = fn
            out.append(f"{indent}v{made_slot} = f{k}({', '.join(map(slot, slots))})")
            if dead:
                out.append(f"{indent}del {', '.join(f'v{s}' for s in dead)}")
        return out or [f"{indent}pass"]

    inputs = [f"v{s}" for s in range(plan.n_inputs)]
    source = [f"def replay({', '.join([*inputs, 'quiet'])}):"]
    source += lines(plan.forward_steps, 0, "    ")
    if plan.backward_steps:
        backward = lines(plan.backward_steps, len(plan.forward_steps), "        ")
        source += ["    if quiet:", *backward, "    else:", "        with _quiet():"]
        source += ["    " + line for line in backward]  # as backward(): quietly
    outs = ", ".join("None" if s is None else slot(s) for s in plan.outputs)
    source.append(f"    return [{outs}]")
    exec("\n".join(source), names)  # slot and step numbers only (above)
    return names["replay"]


def _unchanging(v: Any) -> bool:
    """Whether ``v`` is a value no step and no caller can write into: a number, None, or an
    array that cannot be written whose bases cannot be either."""
    if v is None or type(v) in (float, int, bool, complex) or isinstance(v, np.generic):
        return True
    while type(v) is np.ndarray:
        if v.flags.writeable:
            return False
        v = v.base
        if v is None:
            return True
    return False


def _add_all(x: Any) -> Any:
    """The sum of all of ``x``'s elements, a 0-d array of its dtype."""
    return _ADD_REDUCE(x, None, None, _EMPTY((), x.dtype))  # type: ignore[call-overload]


_ADD_REDUCE, _EMPTY = np.add.reduce, np.empty


def _sum_all(redo: Any, x: Any, made: Any) -> Any:
    """The step that sums all of ``x`` into the 0-d ``made``: a redo that goes through the
    reduction's forward function and makes an array of NumPy's scalar, or, on a small
    array, the one NumPy call that writes the sum into a 0-d array (a third of the time).
    The same reduction of the same elements; taken only where it gives the step's bits."""
    if (
        type(x) is np.ndarray
        and x.ndim > 0
        and x.size < POOL_MIN
        and type(made) is np.ndarray
        and made.ndim == 0
        and made.dtype == x.dtype
    ):
        with NUMPY.quiet():  # a check, not the evaluation: its errors are not counted
            again = _add_all(x)
        if _same_bits(again, made):
            return _add_all
    return redo


def _pool_key(v: Any) -> tuple[Any, ...] | None:
    """What a buffer must share with a step's output to be written into by it: shape,
    dtype and memory order (a sum adds in memory order, so an F-ordered result written
    into a C-ordered buffer would change later bits); None for any other layout."""
    order = "C" if v.flags.c_contiguous else "F" if v.flags.f_contiguous else None
    return None if order is None else (v.shape, v.dtype, order)


def _ufunc(fn: Any) -> Any:
    u = _UFUNC_OF.get(fn) if not isinstance(fn, np.ufunc) else fn
    return u if u is not None and u.nout == 1 else None


class _Pooled:
    """A step of an elementwise ufunc whose output is a large array: written into a
    buffer of the plan's pool of that shape and dtype when there is one (no allocation,
    no page faults), else into a new array. The ufunc writes every element: the bits are
    those of the plain call."""

    __slots__ = ("key", "ufunc")

    def __init__(self, ufunc: Any, key: tuple[Any, ...]) -> None:
        self.ufunc = ufunc
        self.key = key

    def __call__(self, pool: dict[Any, list[Any]], *args: Any) -> Any:
        free = pool.get(self.key)
        if free:
            return self.ufunc(*args, out=free.pop())
        return self.ufunc(*args)


class Plan:
    """Steps to replay on new inputs (arrays of the recorded shapes and dtypes).

    With ``pool``, the large arrays a replay makes are kept for the next replay, by shape
    and dtype, and its elementwise steps write into them: a program on large arrays
    replayed many times (``gradcli.compile``, ``optimize``, ``check``) allocates them once, as
    torch's caching allocator does, instead of paying the operating system's page faults
    for fresh memory on every call. An array goes to the pool only when nothing but the
    plan holds it, as its reference count says: an array the replay let go before its end,
    or an output the caller has dropped by the next replay. An output kept, a view of an
    array, an array in two slots is never written again. A buffer is written into only by
    a step whose output has its shape, dtype and memory order (:func:`_pool_key`)."""

    __slots__ = (
        "_handed", "_lock", "_pool", "_straight", "backward_steps", "forward_steps", "fused",
        "made", "n_inputs", "outputs", "pooled", "template",
    )  # fmt: skip

    def __init__(
        self, rec: Recorder, outputs: list[int | None], n_forward: int, pool: bool = False
    ) -> None:
        self.n_inputs = rec.n_inputs
        # a backward step that reads no value of the inputs' (sum's gradient, a view of the
        # constant one) makes the same value on every replay: kept as a constant instead,
        # when nothing can change it (_unchanging)
        steps = rec.steps[:n_forward] + [
            step
            for step in rec.steps[n_forward:]
            if step[2] in rec.derived or not _unchanging(rec.values[step[2]])
        ]
        made = {out for _, _, out in steps}
        #: per output: whether a step makes it anew on every replay (else it is an input
        #: or a constant of the plan, which the caller must not be handed to write into)
        self.made = [s is not None and s in made for s in outputs]
        # constants stay in their slots; the rest are made by the steps on each replay
        self.template = [
            None if i in rec.derived or i in made else v for i, v in enumerate(rec.values)
        ]
        # after each step, the slots no later step reads and no output is: their arrays
        # are let go at once (a replay's peak memory is backward's, not all of it)
        keep = {s for s in outputs if s is not None}
        last: dict[int, int] = {}
        for k, (_, slots, _) in enumerate(steps):
            for s in slots:
                last[s] = k
        dead: list[list[int]] = [[] for _ in steps]
        for s, k in last.items():
            if s not in keep and (s in made or s < self.n_inputs):
                dead[k].append(s)
        #: the slots whose arrays may go to the pool when they die: large arrays made by
        #: an elementwise ufunc, by shape and dtype
        self.pooled: dict[int, tuple[Any, ...]] = {}
        planned: list[tuple[Any, ...]] = []
        for (fn, slots, out), d in zip(steps, dead, strict=True):
            made_value = rec.values[out]
            if getattr(fn, "adds_all", False):
                fn = _sum_all(fn, rec.values[slots[0]], made_value)
            u = _ufunc(fn) if pool and POOL_WORKS else None
            if u is not None and type(made_value) is np.ndarray and made_value.size >= POOL_MIN:
                key = _pool_key(made_value)
                if key is not None:
                    self.pooled[out] = key
                    fn = _Pooled(u, key)
            planned.append((fn, slots, out, tuple(d)))
        self.forward_steps = planned[:n_forward]
        self.backward_steps = planned[n_forward:]
        if pool and POOL_WORKS:  # runs of elementwise steps on large arrays, in blocks
            self.forward_steps = fuse(self.forward_steps, rec.values, keep, self.pooled)
            self.backward_steps = fuse(self.backward_steps, rec.values, keep, self.pooled)
            self.forward_steps, self.backward_steps = merge(
                self.forward_steps, self.backward_steps, rec.values, keep, self.pooled
            )
        #: whether a step is a fused run, which only the pooled replay runs
        self.fused = any(
            type(step[0]) in (Run, Quietly) for step in self.forward_steps + self.backward_steps
        )
        self.outputs = outputs
        #: a small plan's steps as one function (_straight_line), or None
        self._straight = (
            None
            if self.pooled or self.fused or len(planned) > STRAIGHT_MAX
            else _straight_line(self)
        )
        self._pool: dict[Any, list[Any]] = {}
        #: the pooled outputs of the last replay, with their keys: the pool's when the
        #: caller has let them go
        self._handed: list[tuple[Any, Any]] = []
        self._lock = threading.Lock()

    def run(
        self, inputs: Sequence[Any], finite: set[int] | None = None, quiet: bool = False
    ) -> list[Any]:
        """The outputs' values for ``inputs`` (None where an output is None). ``finite``:
        where to add the slots of outputs a fused run found all finite as it made them.
        ``quiet``: the caller has NumPy's floating-point reports off already (``batch``
        does, for its whole stream), so backward need not turn them off again."""
        if self._straight is not None:
            return self._straight(*inputs, quiet)
        values = self.template.copy()
        values[: self.n_inputs] = inputs
        del inputs  # the caller keeps its own; the plan drops an input when it is dead
        if self.pooled or self.fused:
            return self._run_pooled(values, finite)
        get = values.__getitem__
        for fn, slots, out, dead in self.forward_steps:
            values[out] = fn(*map(get, slots))
            for s in dead:
                values[s] = None
        with NUMPY.quiet():  # as backward(): its floating-point errors are not reported
            for fn, slots, out, dead in self.backward_steps:
                values[out] = fn(*map(get, slots))
                for s in dead:
                    values[s] = None
        return [None if s is None else values[s] for s in self.outputs]

    def _run_pooled(self, values: list[Any], finite: set[int] | None = None) -> list[Any]:
        """:meth:`run` with the pool: taken whole (another thread replaying at the same
        time allocates as without one), given back at the end."""
        with self._lock:
            pool, self._pool = self._pool, {}
            handed, self._handed = self._handed, []
        refs = sys.getrefcount
        for key, v in handed:
            # held by nothing but this list's tuple, the name v and getrefcount's argument
            if refs(v) == 3:
                pool.setdefault(key, []).append(v)
        handed.clear()  # the pool's now: no other reference may stay here
        v = None
        try:
            self._steps(self.forward_steps, values, pool, finite)
            with NUMPY.quiet():  # as backward(): its floating-point errors are not reported
                self._steps(self.backward_steps, values, pool, finite)
        finally:
            with self._lock:
                self._pool = pool
        outs = [None if s is None else values[s] for s in self.outputs]
        with self._lock:
            self._handed = [
                (key, v)
                for v in outs
                if type(v) is np.ndarray
                and v.base is None
                and v.size >= POOL_MIN
                and (key := _pool_key(v)) is not None
            ]
        return outs

    def _steps(
        self,
        steps: list[Any],
        values: list[Any],
        pool: dict[Any, list[Any]],
        finite: set[int] | None = None,
    ) -> None:
        pooled = self.pooled
        get = values.__getitem__
        refs = sys.getrefcount
        for fn, slots, out, dead in steps:
            if type(fn) is _Pooled:
                values[out] = fn(pool, *map(get, slots))
            elif type(fn) is Run:
                if fn.laid_out(values):
                    fn(values, pool, finite)
                else:  # arrays laid out otherwise than when recorded: step by step
                    self._steps(fn.unfused, values, pool)
            elif type(fn) is Quietly:  # a step of backward's, moved where forward's run
                with NUMPY.quiet():
                    self._steps([(fn.fn, slots, out, ())], values, pool)
            else:
                values[out] = fn(*map(get, slots))
            for s in dead:
                v = values[s]
                values[s] = None
                # held by nothing but the name v and getrefcount's argument: the pool's
                if s in pooled and refs(v) == 2 and (key := _pool_key(v)) is not None:
                    pool.setdefault(key, []).append(v)
                v = None


class recording:
    """Record the ops of a block (this thread only): ``with recording(inputs) as rec:``."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        self.recorder = Recorder(inputs)

    def __enter__(self) -> Recorder:
        self._prev = (STATE.recorder, set_mode(RECORD))
        STATE.recorder = self.recorder
        return self.recorder

    def __exit__(self, *exc: object) -> None:
        recorder, mode = self._prev
        STATE.recorder = recorder
        set_mode(mode)


class Rows:
    """Backward passes of one graph from one root with many seeds (a Jacobian's rows, a
    Hessian's): the first pass, ``backward()`` with the first seed, is recorded with the
    seed as the plan's one input and the graph's values as its constants; each later seed
    replays the recorded rule calls, with no walk of the graph. The graph is not released,
    and the rows have the bits ``autograd.grad(root, leaves, seed, retain_graph=True)``
    gives, as ``backward()`` gives those bits (docs/engine.md, "Replay")."""

    def __init__(self, root: Tensor, leaves: Sequence[Tensor], first: Any) -> None:
        rec = Recorder([first])
        rec.backward(root, first)
        outputs = [rec.leaf_grads.get(id(t)) for t in leaves]
        #: the gradients of ``leaves`` for the first seed (None: backward did not reach it)
        self.first = [None if s is None else rec.values[s] for s in outputs]
        # backward reads no value into Python (only forward ops can make a recording fail)
        self.plan = rec.plan(outputs, 0)

    def __call__(self, seed: Any) -> list[Any]:
        """The gradients of the leaves for ``seed`` (an array of the first seed's shape and
        dtype); None where backward does not reach a leaf."""
        return self.plan.run([seed])


def opaque(t: Any, what: str) -> None:
    """``t``'s value is about to be read into Python (see :meth:`Recorder.opaque`)."""
    recorder = STATE.recorder
    if recorder is not None:
        recorder.opaque(t, what)


__all__ = ["Plan", "Recorder", "RecordingFailed", "Rows", "opaque", "recording"]
