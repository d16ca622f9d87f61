"""Fused runs: a plan's consecutive elementwise steps on large arrays, replayed a block at
a time (docs/engine.md, "Fused runs").

A replayed plan calls one NumPy function after another, each over whole arrays: on 10⁷
elements every step reads its operands from memory and writes its result back, and memory
traffic, not arithmetic, is what the replay costs. A *run* is a sequence of consecutive
steps that are all elementwise ufuncs over arrays of one shape (or one value broadcast to
it): replayed block by block, each block's intermediates stay in the processor's cache,
and an intermediate that no step after the run reads is never written to memory at all.

The bits are the plain replay's: an elementwise ufunc computes each element from the same
elements of its operands whatever block they are in, and the blocks are the same calls on
slices. What changes is only how often a call is made, which NumPy's floating-point error
reports would see (one report per call): a run counts each step's errors once, as the
step's one call would (:class:`_Collector`).

A run may end in the sum of all the elements of a value it makes (``sum(a*b+b)``): NumPy
adds a contiguous array pairwise, halving it (at a multiple of 8) down to pieces of at
most 128 elements, so the blocks are taken where those halvings fall, each block is added
by NumPy as the whole array's call would add that piece, and the blocks' sums are added
up the same tree: the bits of the one call (:func:`_tree`). Only runs of exactly rounded
arithmetic (``+ - * /``) end in a sum, in float64.

Forward's last run and backward's first become one run (:func:`merge`) when nothing between
them needs what forward's run makes, so that each block of the inputs is read once for
both passes; and a run learns, block by block, which arrays it hands out are all finite,
so that the result need not read them again.

A run of many blocks is shared among threads, one consecutive share of blocks per
processor (:func:`_shares`, :func:`_in_threads`): NumPy lets go of the GIL inside a ufunc's
loop, each thread has block buffers and an error collector of its own, and the blocks'
sums are added up in block order once all are done, so the bits stay the one thread's.

Only plans that keep a pool of buffers (``gradcli.compile``, ``optimize``, ``check``) fuse,
and only from :data:`FUSE_MIN` elements: on small arrays the per-block calls would cost
more than the memory they save. Plans are NumPy's only (docs/engine.md, "Backends"), and
so is this module.
"""

from __future__ import annotations

import contextvars
import math
import operator
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .backend import NUMPY
from .state import STATE

#: arrays of at least this many elements are replayed in blocks
FUSE_MIN = 1 << 17
#: elements per block (a multiple of 8, at least 128): a block of each array a run
#: reads or makes stays in the processor's caches while the run's steps go over it
BLOCK = 1 << 17


def _processors() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: the threads a run's blocks are shared among: the processors this process may use
THREADS = _processors()
#: blocks per thread at the least: handing a share to a thread costs tens of
#: microseconds, about what one block's steps take
SHARE_MIN = 4

# How a step's argument is read in a block:
FULL = 0  # an array of the run's shape, C-contiguous: its slice (or written in place)
SCALAR = 1  # a 0-d array or a Python/NumPy number: as it is
SPREAD = 2  # one value broadcast to the run's shape (all strides 0): a block-long view of it
LOCAL = 3  # made by the run and read only inside it: a block-long buffer
MADE = 4  # made by the run and read after it: its slice of an array kept whole

#: ufuncs exactly rounded the same way whatever code path NumPy takes (SIMD body or
#: tail), so that blocks of any length give the whole call's bits
_EXACT = {np.add, np.subtract, np.multiply, np.divide, np.negative, np.positive}

#: the in-place operators backward's plans call, and the ufunc each writes with
_INPLACE = {
    operator.iadd: np.add, operator.isub: np.subtract, operator.imul: np.multiply,
    operator.itruediv: np.divide, NUMPY.multiply_into: np.multiply,
    NUMPY.divide_into: np.divide,
}  # fmt: skip


def _kind(value: Any, shape: tuple[int, ...]) -> int | None:
    """How ``value`` is read by a step of a run over ``shape`` (None: it cannot be)."""
    if type(value) is np.ndarray:
        if value.ndim == 0:
            return SCALAR
        if value.shape != shape:
            return None
        if value.flags.c_contiguous:
            return FULL
        if not any(value.strides):
            return SPREAD
        return None
    if isinstance(value, (float, int, np.number)) and not isinstance(value, bool):
        return SCALAR
    return None


def _elementwise(step: Sequence[Any], values: Sequence[Any]) -> tuple[Any, bool] | None:
    """``(ufunc, in_place)`` of a step that is an elementwise ufunc of one output over a
    large C-contiguous array, or None."""
    from .replay import _Pooled

    fn, slots, out = step[0], step[1], step[2]
    made = values[out]
    if type(made) is not np.ndarray or made.size < FUSE_MIN or not made.flags.c_contiguous:
        return None
    if type(fn) is _Pooled:
        # an elementwise ufunc; not a generalized one (matmul), whose core dimensions
        # a block would cut through
        return (fn.ufunc, False) if fn.ufunc.signature is None else None
    ufunc = _INPLACE.get(fn) if not isinstance(fn, np.ufunc) else None
    if ufunc is not None and values[slots[0]] is made:
        return ufunc, True
    return None


class Run:
    """Consecutive elementwise steps replayed block by block (see the module's text)."""

    __slots__ = ("bounds", "claims", "dead", "external", "locals", "made", "outs",
                 "parts", "reads", "shape", "size", "split", "steps", "total", "tree",
                 "unfused")  # fmt: skip

    def __init__(
        self,
        steps: list[tuple[Any, ...]],
        ufuncs: list[tuple[Any, bool]],
        values: Sequence[Any],
        keep: set[int],
        pooled: dict[int, tuple[Any, ...]],
        total: tuple[Any, ...] | None = None,
        quiet: list[tuple[Any, ...]] | None = None,
        quiet_ufuncs: list[tuple[Any, bool]] | None = None,
    ) -> None:
        first = values[steps[0][2]]
        self.shape: tuple[int, ...] = first.shape
        self.size = int(first.size)
        #: what the run was made of, for merge(): its steps, their ufuncs, its sum
        self.parts = (steps, ufuncs, total)
        #: the steps as the plain replay runs them, for arrays laid out otherwise
        self.unfused = [*steps, *([total] if total is not None else [])]
        #: the number of steps before the sum is taken in each block; steps after the
        #: first ``len(steps)`` are backward's (``quiet``), whose errors are not counted
        self.split = len(steps)
        if quiet:
            self.unfused += [(Quietly(step[0]), *step[1:]) for step in quiet]
            steps = [*steps, *quiet]
            ufuncs = [*ufuncs, *(quiet_ufuncs or [])]
        dying: set[int] = set()
        for step in self.unfused:
            dying.update(step[3])
        # Where each value the run makes is stored: its own array, or, for an in-place
        # step, the array of the value it writes into (made by the run or before it).
        root: dict[int, int] = {}
        planned = []
        reads: dict[int, None] = {}  # the slots the run reads that were made before it
        for k, (step, (ufunc, in_place)) in enumerate(zip(steps, ufuncs, strict=True)):
            _, slots, out, _ = step
            args = []
            for s in slots:
                if s in root:
                    args.append(root[s])
                else:
                    reads[s] = None
                    args.append(s)
            root[out] = root.get(slots[0], slots[0]) if in_place else out
            planned.append((ufunc, tuple(args), root[out], k))
        fresh = {r for r in root.values() if r in root}
        #: arrays made before the run that an in-place step writes into
        self.external = tuple({r for r in root.values() if r not in root})
        survives = {root[s] for s in root if s not in dying or s in keep}
        #: fresh arrays kept whole (read after the run), with the pool key to take a
        #: buffer by; the others live a block at a time, in buffers of the run's own
        self.made = {r: (values[r].dtype, pooled.get(r)) for r in fresh if r in survives}
        self.locals = {r: values[r].dtype for r in fresh if r not in survives}
        # how each argument and target is read in a block
        kinds: dict[int, int] = {r: (MADE if r in self.made else LOCAL) for r in fresh}
        kinds.update({r: FULL for r in self.external})
        for s in reads:
            if s not in kinds:
                kind = _kind(values[s], self.shape)
                if kind is None:
                    raise ValueError("not a run")  # fuse() tests every argument first
                kinds[s] = kind
        # a quiet step's errors are counted as -1: not at all
        self.steps = [
            (ufunc, tuple((kinds[a], a) for a in args), (kinds[target], target),
             k if k < self.split else -1)
            for ufunc, args, target, k in planned
        ]  # fmt: skip
        #: the sum the run ends in: (how the value it adds is read and its slot, the sum's
        #: own slot, shape and dtype), or None
        self.total: tuple[Any, ...] | None = None
        if total is not None:
            added = root[total[1][0]]
            made = values[total[2]]
            self.total = ((kinds[added], added), total[2], made.shape, made.dtype)
            if total[2] in reads:
                raise ValueError("a step of the run reads its sum")  # merge() tests it
        #: how the sum adds its pieces (see _tree), made once here for every replay
        self.tree = _tree(self.size, BLOCK) if total is not None else []
        #: the blocks, as (start, end): the sum's pieces, or BLOCK apart
        self.bounds = (
            [node for node in self.tree if node is not None] if total is not None
            else [(lo, min(lo + BLOCK, self.size)) for lo in range(0, self.size, BLOCK)]
        )  # fmt: skip
        self.reads = tuple(reads)
        #: the slots the run makes, and the array each ends up in (for values)
        self.outs = tuple((s, r) for s, r in root.items() if r not in self.locals)
        #: per array the run makes and the plan hands out: the output slots it is, which
        #: the run says are all finite when every block's sum is (a nan or an inf term
        #: makes a sum non-finite); fuse() drops an array a later step writes into
        self.claims: dict[int, tuple[int, ...]] = {}
        for s, r in self.outs:
            if s in keep and r in self.made:
                self.claims[r] = (*self.claims.get(r, ()), s)
        #: what dies in the run and is not a block buffer: let go after it, as by any step
        self.dead = tuple(s for s in dying if root.get(s) not in self.locals)

    def laid_out(self, values: Sequence[Any]) -> bool:
        """Whether the arrays the run reads are laid out as when it was planned (and, for
        a run with backward's steps, whether errors are being counted: only then does
        the run tell its steps' errors apart)."""
        if self.split < len(self.steps) and STATE.errors is None:
            return False
        shape = self.shape
        for _, args, _, _ in self.steps:
            for kind, s in args:
                if kind in (FULL, SPREAD):
                    v = values[s]
                    if type(v) is not np.ndarray or v.shape != shape:
                        return False
                    if not (v.flags.c_contiguous if kind == FULL else not any(v.strides)):
                        return False
        return True

    def __call__(
        self, values: list[Any], pool: dict[Any, list[Any]], finite: set[int] | None = None
    ) -> None:
        """Replay the run: what it keeps whole is in ``values`` afterwards; the output
        slots found all finite are added to ``finite``."""
        shape = self.shape
        whole: dict[int, Any] = {r: values[r] for r in self.external}
        for r, (dtype, key) in self.made.items():
            free = pool.get(key) if key is not None else None
            whole[r] = free.pop() if free else np.empty(shape, dtype)
        # per slot: what a block slices (a flat view), or takes whole (a number); the
        # block buffers are each thread's own (_blocks)
        block = max(hi - lo for lo, hi in self.bounds)
        src: dict[int, Any] = {r: a.reshape(-1) for r, a in whole.items()}
        for _, args, _, _ in self.steps:
            for kind, s in args:
                if s in src or kind == LOCAL:
                    continue
                v = values[s]
                if kind == FULL:
                    src[s] = v.reshape(-1)
                elif kind == SPREAD:
                    src[s] = as_strided(v, (block,), (0,), writeable=False)
                else:
                    src[s] = v
        errors = STATE.errors
        counting, checking = errors is not None, finite is not None
        shares = _shares(self.bounds)
        if len(shares) == 1:
            done = [self._blocks(shares[0], src, block, counting, checking)]
        else:
            done = _in_threads(self._blocks, shares, src, block, counting, checking)
        sums = [total for share in done for total in share[0]]
        seen = set().union(*(share[2] for share in done)) if counting else set()
        if self.total is not None:
            _, out, made_shape, dtype = self.total
            collector = _Collector() if counting else None
            if collector is not None:
                collector.step = len(self.steps)  # the pieces' additions are the sum's own
                STATE.errors = collector
            try:
                total = _combine(sums, self.tree)
                if math.isnan(total):
                    # which nan a sum gives (its sign) follows the order NumPy's compiled
                    # loop adds in, which Python's additions need not: added whole instead
                    if collector is not None:
                        collector.step = -1  # counted already, by the blocks
                    total = self._whole_sum(values, src)
            finally:
                if collector is not None:
                    STATE.errors = errors
                    seen |= collector.seen
            values[out] = np.asarray(total, dtype).reshape(made_shape)
        if counting:
            for step, error, flag in sorted(seen):
                if step >= 0:
                    errors._count(error, flag)
        if finite is not None:
            for i, r in enumerate(self.claims):
                if all(math.isfinite(part) for share in done for part in share[1][i]):
                    finite.update(self.claims[r])
        for s, r in self.outs:
            values[s] = whole[r]

    def _blocks(
        self,
        bounds: Sequence[tuple[int, int]],
        shared: dict[int, Any],
        block: int,
        counting: bool,
        checking: bool,
    ) -> tuple[list[Any], list[list[Any]], set[tuple[int, str, int]]]:
        """The steps over the blocks ``bounds``, in this thread: the sums of the blocks
        (when the run ends in one), per claimed array the sums of its blocks (which
        tell whether it is all finite: when ``checking``), and the errors seen (when
        ``counting``)."""
        src = dict(shared)
        src.update((r, np.empty(block, dtype)) for r, dtype in self.locals.items())
        # per step: the ufunc, per argument (sliced?, the array or number, sliced from
        # the start of a block-long buffer?), the target, whether it is a block buffer, k
        steps = [
            (ufunc, [(kind != SCALAR, src[a], kind in (LOCAL, SPREAD)) for kind, a in args],
             src[target], tkind == LOCAL, k)
            for ufunc, args, (tkind, target), k in self.steps
        ]  # fmt: skip
        # the sum of the block is taken after forward's steps, before backward's
        total_at = self.split if self.total is not None else -1
        collector = _Collector() if counting else None
        errors = STATE.errors
        if collector is not None:
            STATE.errors = collector
        if self.total is not None:
            (kind, s), _, _, _ = self.total
            added, added_head = src[s], kind == LOCAL
            reduce = np.add.reduce
        sums: list[Any] = []
        checks: list[tuple[Any, list[Any]]] = (
            [(src[r], []) for r in self.claims] if checking else []
        )
        try:
            for lo, hi in bounds:
                m = hi - lo
                for i, (ufunc, operands_of, target, local, k) in enumerate(steps):
                    if i == total_at:
                        if collector is not None:
                            collector.step = len(steps)
                        sums.append(reduce(added[:m] if added_head else added[lo:hi]))
                    operands = [
                        (a[:m] if head else a[lo:hi]) if sliced else a
                        for sliced, a, head in operands_of
                    ]
                    if collector is not None:
                        collector.step = k
                    ufunc(*operands, out=target[:m] if local else target[lo:hi])
                if total_at == len(steps):  # a run that is forward's only
                    if collector is not None:
                        collector.step = len(steps)
                    sums.append(reduce(added[:m] if added_head else added[lo:hi]))
                if checks:
                    if collector is not None:
                        collector.step = -1  # a check's own errors are not the program's
                    for array, parts in checks:
                        parts.append(np.add.reduce(array[lo:hi]))
        finally:
            if collector is not None:
                STATE.errors = errors
        return sums, [parts for _, parts in checks], collector.seen if collector else set()

    def _whole_sum(self, values: list[Any], src: dict[int, Any]) -> Any:
        """The run's sum as one NumPy call adds it: forward's steps made again over whole
        arrays of their own (they write nothing they read: forward has no in-place step),
        then one ``np.add.reduce`` of the value the sum adds."""
        size = self.size
        whole: dict[int, Any] = {}
        for ufunc, args, (_, target), _ in self.steps[: self.split]:
            operands = []
            for kind, slot in args:
                if kind == SPREAD:
                    operands.append(as_strided(values[slot], (size,), (0,), writeable=False))
                elif kind in (LOCAL, MADE):
                    operands.append(whole[slot])
                else:
                    operands.append(src[slot])
            whole[target] = ufunc(*operands)
        (_, added), _, _, _ = self.total  # type: ignore[misc]
        return np.add.reduce(whole[added])


class Quietly:
    """A step of backward's run where a plan's forward steps run: its floating-point
    errors are not reported, as backward's are not."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn


class _Collector:
    """Stands in for an evaluation's error counter while a run replays: NumPy reports an
    error once per call, and a run makes a step's call once per block, so each step's
    errors of a kind are counted once, as its one call would count them."""

    __slots__ = ("seen", "step")

    def __init__(self) -> None:
        self.seen: set[tuple[int, str, int]] = set()
        self.step = 0

    def _count(self, kind: str, flag: int) -> None:
        self.seen.add((self.step, kind, flag))


def _shares(bounds: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The blocks in consecutive shares, one per thread: as many threads as there are
    processors and SHARE_MIN blocks for each."""
    n = max(1, min(THREADS, len(bounds) // SHARE_MIN))
    return [bounds[i * len(bounds) // n : (i + 1) * len(bounds) // n] for i in range(n)]


_POOL: Any = None
_POOL_LOCK = threading.Lock()


def _pool() -> Any:
    """The threads that replay runs' shares, started at the first shared run (and again
    in a forked child, which has none of its parent's threads: _forget_pool)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max(1, THREADS - 1), thread_name_prefix="gradcli-run")
        return _POOL


def _forget_pool() -> None:
    """In a forked child: none of the parent's threads is there, and the lock may have
    been held by one of them when the process forked."""
    global _POOL, _POOL_LOCK
    _POOL = None
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _in_threads(fn: Callable[..., Any], shares: list[Any], *args: Any) -> list[Any]:
    """``fn(share, *args)`` for each share: the first in this thread, the others in the
    pool's, each in a copy of this thread's context (NumPy's error state is in it, so
    errors call the same callback); the results in the shares' order. Every share is
    done when this returns, raising or not: none writes into arrays its caller has let
    go of."""
    from concurrent.futures import wait

    pool = _pool()
    futures = []
    for share in shares[1:]:
        try:
            futures.append(pool.submit(contextvars.copy_context().run, fn, share, *args))
        except RuntimeError:  # the interpreter is shutting down: the rest in this thread
            break
    try:
        here = [fn(share, *args) for share in (shares[0], *shares[1 + len(futures) :])]
    finally:
        wait(futures)
    return [here[0], *(f.result() for f in futures), *here[1:]]


def fuse(
    steps: list[tuple[Any, ...]],
    values: Sequence[Any],
    keep: set[int],
    pooled: dict[int, tuple[Any, ...]],
) -> list[tuple[Any, ...]]:
    """``steps`` (a plan's, as ``(fn, slots, out, dead)``) with each run of two or more
    fusable steps over one shape made one step ``(run, run.reads, None, run.dead)``."""
    result: list[tuple[Any, ...]] = []
    i = 0
    while i < len(steps):
        j = i
        ufuncs: list[tuple[Any, bool]] = []
        shape = None
        while j < len(steps):
            found = _elementwise(steps[j], values)
            if found is None:
                break
            made = values[steps[j][2]]
            if shape is None:
                shape = made.shape
            if made.shape != shape:
                break
            produced = {s[2] for s in steps[i:j]}
            if any(s not in produced and _kind(values[s], shape) is None for s in steps[j][1]):
                break
            ufuncs.append(found)
            j += 1
        total = None
        if j - i >= 1 and j < len(steps) and _adds_all(steps[j], steps[i:j], ufuncs, values):
            total = steps[j]
        if j - i >= 2 or total is not None:
            run = Run(steps[i:j], ufuncs, values, keep, pooled, total)
            result.append((run, run.reads, None, run.dead))
            i = j + (total is not None)
        else:
            result.append(steps[i])
            i += 1
    _written_later(result)
    return result


def merge(
    forward: list[tuple[Any, ...]],
    backward: list[tuple[Any, ...]],
    values: Sequence[Any],
    keep: set[int],
    pooled: dict[int, tuple[Any, ...]],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Forward's last run and backward's first, made one run when nothing between them
    needs forward's run done (``sum(a*b+b)``: the sum's gradient is its seed broadcast):
    the steps between go first, quietly, and each block is then read once for both passes.
    Backward's steps keep their order; the forward's sum is taken in each block before
    them, and none of them may read it."""
    if not forward or not backward or type(forward[-1][0]) is not Run:
        return forward, backward
    first = forward[-1][0]
    j = next((j for j, step in enumerate(backward) if type(step[0]) is Run), None)
    if j is None:
        return forward, backward
    second = backward[j][0]
    between = backward[:j]
    made = {s for s, _ in first.outs} | set(first.locals)
    if first.total is not None:
        made.add(first.total[1])
    if (
        second.shape != first.shape
        or first.external  # forward's run writes into an array made before it
        or any(type(step[0]) is Run or made.intersection(step[1]) for step in between)
    ):
        return forward, backward
    steps, ufuncs, total = first.parts
    later, later_ufuncs, later_total = second.parts
    if later_total is not None or (total is not None and total[2] in second.reads):
        return forward, backward
    try:
        run = Run(steps, ufuncs, values, keep, pooled, total, later, later_ufuncs)
    except ValueError:
        return forward, backward
    # the steps between run before it, quietly; what they let go is let go after it
    moved = [(Quietly(fn), slots, out, ()) for fn, slots, out, _ in between]
    dead = tuple(dict.fromkeys([*run.dead, *(s for step in between for s in step[3])]))
    run.dead = dead
    _written_later([(run, run.reads, None, dead), *backward[j + 1 :]])
    return [*forward[:-1], *moved, (run, run.reads, None, dead)], backward[j + 1 :]


def _written_later(steps: list[tuple[Any, ...]]) -> None:
    """Drop the finiteness claims of each run's arrays that a later step writes into in
    place (they may change after the run has seen them)."""
    for k, step in enumerate(steps):
        run = step[0]
        if type(run) is not Run or not run.claims:
            continue
        names = {r: set(slots) | {r} for r, slots in run.claims.items()}
        for later in steps[k + 1 :]:
            fn, slots, out = later[0], later[1], later[2]
            if type(fn) is Run:
                written = set(fn.external)
            elif fn in _INPLACE and slots:
                written = {slots[0]}
            else:
                continue
            for r, known in list(names.items()):
                if known & written:
                    del run.claims[r], names[r]
            if type(fn) is not Run:
                for known in names.values():
                    if slots[0] in known:
                        known.add(out)


def _adds_all(
    step: tuple[Any, ...],
    run: list[tuple[Any, ...]],
    ufuncs: list[tuple[Any, bool]],
    values: Sequence[Any],
) -> bool:
    """Whether ``step`` is the sum of all the elements of a float64 value the run makes,
    and the run is of exactly rounded arithmetic only."""
    fn, slots = step[0], step[1]
    if not getattr(fn, "adds_all", False) or len(slots) != 1:
        return False
    v = values[slots[0]]
    if type(v) is not np.ndarray or v.dtype != np.float64 or not v.flags.c_contiguous:
        return False
    return any(s[2] == slots[0] for s in run) and all(u in _EXACT for u, _ in ufuncs)


def _tree(n: int, block: int) -> list[tuple[int, int] | None]:
    """How NumPy's pairwise sum of ``n`` elements adds them, down to pieces of at most
    ``block`` elements (``block`` >= 128, so no piece is cut below NumPy's own), in the
    order the additions need them: a piece ``(start, end)``, or None for the sum of the two
    nodes before it (left + right). The pieces come in order along the array."""
    order: list[tuple[int, int] | None] = []
    todo = [(0, n, False)]
    while todo:
        lo, m, halved = todo.pop()
        if m <= block:
            order.append((lo, lo + m))
        elif halved:
            order.append(None)
        else:
            half = m // 2
            half -= half % 8
            todo += [(lo, m, True), (lo + half, m - half, False), (lo, half, False)]
    return order


def _combine(sums: list[Any], tree: list[tuple[int, int] | None]) -> Any:
    """The pieces' sums (in order) added up ``tree`` (:func:`_tree`), as NumPy adds the
    halves of a pairwise sum."""
    stack: list[Any] = []
    pieces = iter(sums)
    for node in tree:
        if node is not None:
            stack.append(next(pieces))
        else:
            right = stack.pop()
            stack.append(stack.pop() + right)
    return stack[0]
