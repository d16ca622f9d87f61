"""What an evaluation runs under, kept per thread: grad mode, the element limit, the graph
trace of ``gradcli graph``, and counted floating-point errors.

Like torch's grad mode, every switch here belongs to the thread that set it: a thread in
``no_grad()`` never stops another from recording, and a limit one thread sets never
reaches another (docs/engine.md, "State").
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import LimitError
from ..i18n import msg
from .backend import NUMPY

DEFAULT_MAX_ELEMENTS = 10**8

#: ``State.mode``: no graph is recorded / recorded / recorded and traced for ``graph`` /
#: recorded and every op noted for a compiled program's plan (docs/engine.md, "Replay")
NO_GRAD, GRAD, TRACE, RECORD = 0, 1, 2, 3


class State(threading.local):
    """One thread's switches. ``mode`` is one field so the hot path reads one attribute."""

    def __init__(self) -> None:
        self.mode = GRAD
        self.max_elements = DEFAULT_MAX_ELEMENTS
        #: while tracing: (output tensor, op name, input tensors) of every recorded op
        self.trace: list[tuple[Any, str, tuple[Any, ...]]] | None = None
        #: while a compiled program's plan is recorded: its recorder (see replay.py)
        self.recorder: Any = None
        #: the innermost floating_errors counting in this thread
        self.errors: Any = None


STATE = State()

#: One element per thread whose mode is not GRAD at this moment. While it is empty, every
#: thread records, and the hot path need not read its thread's state (a thread-local read
#: costs a twentieth of a small op). A thread counts itself before it leaves GRAD and
#: uncounts itself after it is back, so a thread that finds the list empty is in GRAD.
#: ``append`` and ``pop`` are atomic: no lock.
OFF_DEFAULT: list[None] = []


def mode() -> int:
    """This thread's grad mode."""
    return STATE.mode if OFF_DEFAULT else GRAD


def set_mode(new: int) -> int:
    """Set this thread's grad mode (always through here: see OFF_DEFAULT); returns the
    mode it had."""
    state = STATE
    old = state.mode
    if old != new:
        if old == GRAD:
            OFF_DEFAULT.append(None)
        state.mode = new
        if new == GRAD:
            OFF_DEFAULT.pop()
    return old


def is_grad_enabled() -> bool:
    return mode() != NO_GRAD


class _GradMode:
    """Sets grad mode for a block (a context manager) or for every call of a function (a
    decorator), in this thread only."""

    __slots__ = ("_enabled", "_prev")

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._prev: list[int] = []

    def __enter__(self) -> None:
        prev = STATE.mode
        self._prev.append(prev)
        if not self._enabled:
            set_mode(NO_GRAD)
        elif prev == NO_GRAD:
            set_mode(GRAD)

    def __exit__(self, *exc: object) -> None:
        set_mode(self._prev.pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        enabled = self._enabled

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(enabled):
                return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = fn.__doc__
        return wrapper


class _FixedGradMode(_GradMode):
    """A grad mode of its own (``enabled``): a context manager, or a decorator with or
    without parentheses (``@no_grad()``, ``@no_grad``), as in torch 2."""

    enabled = True

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:
        if fn is not None:  # used as @no_grad, without parentheses
            return _GradMode(cls.enabled)(fn)
        return super().__new__(cls)

    def __init__(self, fn: Callable[..., Any] | None = None) -> None:
        super().__init__(self.enabled)


class no_grad(_FixedGradMode):
    """Record no graph in this block (or function), as ``torch.no_grad``."""

    enabled = False


class enable_grad(_FixedGradMode):
    """Record the graph in this block even inside ``no_grad``, as ``torch.enable_grad``."""

    enabled = True


class set_grad_enabled(_GradMode):
    """Record the graph or not, as ``torch.set_grad_enabled(mode)``: called on its own it
    sets this thread's grad mode at once; as a context manager or decorator, only for the
    block or the function."""

    def __init__(self, mode: bool) -> None:
        super().__init__(bool(mode))
        _GradMode.__enter__(self)  # at once, as torch; __exit__ restores the mode before

    def __enter__(self) -> None:
        pass  # already set by the call

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.__exit__()  # a decorator changes the mode only while fn runs
        return super().__call__(fn)


@contextlib.contextmanager
def tracing() -> Iterator[list[tuple[Any, str, tuple[Any, ...]]]]:
    """Record every op with its input tensors (constants too), for ``gradcli graph``."""
    state = STATE
    prev_trace = state.trace
    trace: list[tuple[Any, str, tuple[Any, ...]]] = []
    state.trace = trace
    prev_mode = set_mode(TRACE)
    try:
        yield trace
    finally:
        set_mode(prev_mode)
        state.trace = prev_trace


class element_limit:
    """The largest number of elements one tensor may have, in this block and thread."""

    def __init__(self, max_elements: int) -> None:
        self.max_elements = max_elements
        self._prev: list[int] = []

    def __enter__(self) -> None:
        self._prev.append(STATE.max_elements)
        STATE.max_elements = self.max_elements

    def __exit__(self, *exc: object) -> None:
        STATE.max_elements = self._prev.pop()


def check_size(shape: Sequence[int], what: str) -> None:
    """Refuse, before allocating, a tensor of more elements than the limit allows."""
    n = math.prod(shape)
    limit = STATE.max_elements
    if n > limit:
        raise LimitError(
            msg(
                "{what}: a tensor of shape {shape} would have {n:,} elements, over the "
                "limit of {limit:,} (raise it with --max-elements)",
                what=what,
                shape=tuple(shape),
                n=n,
                limit=limit,
            )
        )


class _CollectorPause:
    """Python's cyclic garbage collector paused while any thread builds or walks a graph.

    Graphs hold no reference cycles (docs/engine.md, "Lifetime"), so reference counting
    frees them; the collector would only rescan a growing graph again and again, which
    doubles the time of a 100,000-node program. The collector is process-wide, so the
    pauses of several threads are counted: the last one to leave turns it back on.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.enable()


_COLLECTOR_PAUSE = _CollectorPause()


def no_cycle_collection() -> _CollectorPause:
    return _COLLECTOR_PAUSE


class floating_errors:
    """Count NumPy's floating-point errors (overflow, invalid value, division by zero)
    instead of printing one warning per operation; report each kind once afterwards.

    NumPy's error state is per thread (a context variable), so counts never mix threads.
    No op of the engine issues a Python warning of its own (``mean`` of nothing divides by
    zero instead of warning), so no process-wide warning filter is touched.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._errstate: Any = None
        self._outer: floating_errors | None = None

    def _count(self, kind: str, flag: int) -> None:
        kind = f"{kind} encountered"
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def __enter__(self) -> floating_errors:
        # one callback for every count, which counts into this thread's innermost
        # counter: its NumPy error state is made once, not on every entry
        self._outer = STATE.errors
        STATE.errors = self
        self._errstate = NUMPY.count_errors(_count_here)
        self._errstate.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._errstate.__exit__(*exc)
        STATE.errors = self._outer

    def messages(self) -> list[str]:
        return [
            msg("{kind} in {n} operation", kind=_KIND_SAID.get(kind, kind), n=n)
            if n == 1
            else msg("{kind} in {n} operations", kind=_KIND_SAID.get(kind, kind), n=n)
            for kind, n in sorted(self.counts.items())
        ]


#: NumPy's kinds of floating-point error, as the warnings say them (docs/i18n.md)
_KIND_SAID = {
    "divide by zero encountered": msg("divide by zero encountered"),
    "overflow encountered": msg("overflow encountered"),
    "underflow encountered": msg("underflow encountered"),
    "invalid value encountered": msg("invalid value encountered"),
}


def _count_here(kind: str, flag: int) -> None:
    """NumPy's callback on a floating-point error: counted by this thread's counter."""
    errors = STATE.errors
    if errors is not None:
        errors._count(kind, flag)


@contextlib.contextmanager
def computation(max_elements: int) -> Iterator[floating_errors]:
    """What every evaluation runs under: grad mode on (an evaluation is self-contained,
    also inside ``no_grad()``), the element limit, counted floating-point errors (yielded,
    for the warnings) and no cyclic garbage collection."""
    with (
        enable_grad(),
        element_limit(max_elements),
        floating_errors() as errors,
        no_cycle_collection(),
    ):
        yield errors
