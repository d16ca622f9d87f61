"""Evaluation on the Dask backend (docs/dask.md): the same program, rules and checks as
:func:`gradcli.evaluate`, on chunked lazy arrays, computed at the end in one pass.

The engine builds one lazy graph of the forward and the backward pass (the Dask array
namespace, ``autograd/dask_backend.py``), which is computed in one pass: the output, the
bindings and the gradients together, each chunk let go once the chunks made from it are
made. Floating-point errors are counted as an evaluation counts them, those of the
forward pass only: each task's key is noted as it runs (:func:`_note_task`) and an error
counts when the task is one of the forward values' (:func:`forward_keys`).
:func:`evaluate` computes into memory (a :class:`~gradcli.api.Result` of NumPy arrays);
:func:`evaluate_into` writes the output and the gradients into a Zarr store chunk by
chunk, for answers larger than memory.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import autograd as E
from .errors import InputError
from .i18n import msg, tr
from .layout import shown_part

#: the extra that installs what this module needs
EXTRA = "gradcli[dask]"
BACKENDS = ("numpy", "dask")


def require_dask() -> Any:
    """The Dask backend module, or an ``InputError`` naming the extra to install."""
    try:
        from .autograd import dask_backend

        return dask_backend
    except ImportError as e:
        missing = getattr(e, "name", None) or "dask"
        raise InputError(
            msg(
                "--backend dask needs {missing}, which is not installed: pip install '{EXTRA}'",
                missing=missing,
                EXTRA=EXTRA,
            )
        ) from None


def check_backend(backend: Any) -> str:
    if backend not in BACKENDS:
        raise InputError(
            msg(
                "backend must be one of {join}, not {backend!r}",
                join=", ".join(BACKENDS),
                backend=backend,
            )
        )
    return str(backend)


def parse_chunks(text: Any) -> int | None:
    """``--chunks``: bytes per chunk, as ``128MB``, ``64MiB``, ``1e6`` (bytes) or a number;
    None: the default (32 MiB)."""
    if text is None:
        return None
    if isinstance(text, bool):
        raise InputError(msg("chunks must be a size in bytes, not {text!r}", text=text))
    if isinstance(text, (int, float)):
        n = int(text)
    else:
        from dask.utils import parse_bytes

        try:
            n = int(parse_bytes(str(text).strip()))
        except (ValueError, TypeError):
            raise InputError(
                msg(
                    "chunks must be a size in bytes such as 128MB, 64MiB or 1e6, not {text!r}",
                    text=text,
                )
            ) from None
    if n < 1:
        raise InputError(msg("chunks must be at least 1 byte, not {text!r}", text=text))
    return n


# --- floating-point errors counted in Dask's worker threads --------------------------


class _Counts:
    """Floating-point errors counted from any thread (Dask computes chunks in a pool), of
    the tasks in ``only`` (the forward pass's) when it is given."""

    def __init__(self, only: frozenset[Any] | None = None) -> None:
        self.counts: dict[str, int] = {}
        self.only = only
        self._lock = threading.Lock()

    def add(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1


#: the counter of the computation running in this context. Dask's threaded scheduler
#: runs each chunk in a copy of the submitting thread's context, NumPy's error state
#: included, so one callback made once finds the right counter from any worker thread.
_COUNTER: contextvars.ContextVar[_Counts | None] = contextvars.ContextVar(
    "gradcli_dask_counter", default=None
)
#: the key of the task a worker thread is running (:func:`_note_task`)
_TASK: contextvars.ContextVar[Any] = contextvars.ContextVar("gradcli_dask_task", default=None)


def _count(kind: str, flag: int) -> None:
    counter = _COUNTER.get()
    if counter is not None and (counter.only is None or _TASK.get() in counter.only):
        counter.add(f"{kind} encountered")


def _note_task(info: Any) -> Any:
    """The threaded scheduler's ``loads``: called in the worker thread on ``(task, its
    inputs)`` just before the task runs, it notes the task's key for :func:`_count`."""
    if type(info) is tuple and len(info) == 2:
        key = getattr(info[0], "key", None)
        if key is not None:
            _TASK.set(key)
    return info


def forward_keys(*arrays: Any) -> frozenset[Any]:
    """The keys of the tasks that compute ``arrays`` (the forward values): their errors
    are counted when the gradients are computed in the same pass."""
    keys: set[Any] = set()
    for a in arrays:
        if hasattr(a, "__dask_graph__"):  # (a value of constants only is NumPy's)
            keys.update(dict(a.__dask_graph__()))
    return frozenset(keys)


@contextlib.contextmanager
def _counted(into: Any, only: frozenset[Any] | None = None) -> Iterator[None]:
    """Count the floating-point errors of the chunks computed inside into ``into`` (an
    evaluation's ``floating_errors``), each chunk of an operation that errs once; only
    those of the tasks in ``only`` when it is given."""
    counter = _Counts(only)
    token = _COUNTER.set(counter)
    try:
        with E.NUMPY.count_errors(_count):
            yield
    finally:
        _COUNTER.reset(token)
        for kind, n in counter.counts.items():
            into.counts[kind] = into.counts.get(kind, 0) + n


# --- schedulers -------------------------------------------------------------------------


@contextlib.contextmanager
def scheduler(address: str | None) -> Iterator[Any]:
    """Where chunks are computed: Dask's threads (None), a ``distributed`` cluster of N
    local worker processes (``local:N``), or the scheduler at ``address``."""
    if address is None or address == "threads":
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError(
            msg(
                "--scheduler needs distributed, which is not installed: pip install '{EXTRA}'",
                EXTRA=EXTRA,
            )
        ) from None
    if address.startswith("local:"):
        try:
            n = int(address[len("local:") :])
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(
                msg(
                    "--scheduler local:N needs a number of workers >= 1, not {address}",
                    address=address,
                )
            )
        with (
            LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(address, timeout="10s")
    except OSError as e:
        raise InputError(
            msg("cannot reach the Dask scheduler at {address}: {e}", address=address, e=e)
        ) from None
    with client:
        yield client


@contextlib.contextmanager
def progress(show: bool, console: Any = None) -> Iterator[None]:
    """A progress bar of the chunks computed, on ``console`` (stderr), while Dask's threads
    compute: one bar a pass, gone when done. Nothing when ``show`` is false. (Dask's
    callbacks are the process's: for a command, not for the API.)"""
    if not show:
        yield
        return
    from dask.callbacks import Callback
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        # said here: Dask may call back from threads of its own, which have no language
        words = (tr("computing"), tr("clipping"))  # (clipping: a second pass)
        task = bar.add_task(words[0], total=None)
        passes = [0]

        class Bar(Callback):
            def _start_state(self, dsk: Any, state: Any) -> None:
                passes[0] += 1
                what = words[0] if passes[0] == 1 else words[1]
                bar.update(task, total=len(dsk), completed=0, description=what)

            def _posttask(self, *args: Any) -> None:
                bar.advance(task)

        with Bar():
            yield


def compute(*arrays: Any, client: Any = None, writes: bool = False) -> tuple[Any, ...]:
    """The arrays computed in one pass, on ``client``'s cluster or Dask's threads.

    On threads the graph is computed as it was built, not fused: every task keeps its key,
    so that a floating-point error is counted only in a forward task (:func:`_counted`).
    Unfused was not slower here (W10's value and gradients: 3.0 s, against 3.8 s fused).
    ``writes``: the tasks write chunks to a disk, and a thread waits while its chunk is
    written, so two threads more than the cores keep the cores busy (W10 on 2 cores: 2.6 s
    with 4 threads, 3.1 to 3.4 s with 2; each thread holds a few chunks: 0.7 GB against 0.5
    GB). Dask's own ``num_workers`` setting, where one is made, is kept."""
    import functools

    import dask
    import dask.system
    import dask.threaded

    if client is not None:
        return tuple(client.compute(list(arrays), sync=True))
    threads = dask.config.get("num_workers", None)
    if threads is None and writes:
        threads = dask.system.CPU_COUNT + 2  # (the CPUs this process may use, as Dask counts)
    get = functools.partial(dask.threaded.get, loads=_note_task, num_workers=threads)
    return tuple(dask.compute(*arrays, scheduler=get, optimize_graph=False))


# --- one evaluation -----------------------------------------------------------------------


@dataclass
class Lazy:
    """One evaluation as lazy arrays, before any chunk is computed."""

    setup: Any
    run: Any  # api._Run of Dask arrays
    fp: Any  # the evaluation's floating_errors: what making the graph counted
    given: dict[str, Any]  # the inputs as given: NumPy arrays, or lazy ones (files)

    @property
    def read(self) -> list[str]:
        """The inputs that are not in memory (files, Dask arrays given)."""
        return [n for n, v in self.given.items() if not isinstance(v, E.NUMPY.ndarray)]


def build(
    expr: str,
    inputs: Mapping[str, Any] | None,
    *,
    wrt: Any = None,
    grad_output: Any = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int | None = None,
    chunks: Any = None,
) -> Lazy:
    """Parse, check and run ``expr`` on lazy inputs: the graph of the whole evaluation."""
    from .api import _fresh, check_seed
    from .language import DEFAULT_MAX_PROGRAM_CHARS

    backend = require_dask()
    nbytes = parse_chunks(chunks)
    seed = check_seed(seed)
    with backend.chunk_size(nbytes):
        setup, given = lazy_setup(
            expr,
            inputs,
            wrt=wrt,
            dtype=dtype,
            max_elements=max_elements,
            max_program_chars=DEFAULT_MAX_PROGRAM_CHARS
            if max_program_chars is None
            else max_program_chars,
        )
        with E.computation(max_elements) as fp:
            run = _fresh(setup, grad_output, seed, max_elements)
    return Lazy(setup, run, fp, given)


def lazy_setup(
    expr: str,
    inputs: Mapping[str, Any] | None,
    *,
    wrt: Any,
    dtype: Any,
    max_elements: int,
    max_program_chars: int,
    keep: Callable[[Any], Iterable[str]] = lambda setup: (),
) -> tuple[Any, dict[str, Any]]:
    """:func:`~gradcli.api.prepare`, each input then a Dask array in the chunks of
    :func:`chunk_size` in force, but those named by ``keep(setup)``, which stay as they
    were given; and the values as given (NumPy arrays, or lazy ones read from files)."""
    from .api import prepare

    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    given = dict(setup.values)
    kept = set(keep(setup))
    backend = require_dask()
    setup.values = {n: v if n in kept else backend.DASK.from_array(v) for n, v in given.items()}
    return setup, given


@dataclass
class _Clip:
    """The clipping asked for, checked as :func:`gradcli.evaluate` checks it."""

    norm: float | None
    value: float | None
    p: float

    @classmethod
    def checked(cls, clip_norm: Any, clip_value: Any, norm_type: Any) -> _Clip:
        from .api import check_clipping

        return cls(*check_clipping(clip_norm, clip_value, norm_type))


def _norm(p: float) -> Any:
    """A lazy array's ``p``-norm, as clipping takes it of each gradient."""
    from .autograd.ops.reduce import NORM

    backend = require_dask()
    return lambda a: NORM.fwd(backend.DASK, _flat(a), (0,), False, p)


def _flat(a: Any) -> Any:
    return a.reshape(-1) if a.ndim != 1 else a


def evaluate(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Any = None,
    grad_output: Any = None,
    clip_norm: float | None = None,
    norm_type: Any = 2.0,
    clip_value: float | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int | None = None,
    id: Any = None,
    chunks: Any = None,
    scheduler_address: str | None = None,
    into: str | None = None,
) -> Any:
    """:func:`gradcli.evaluate` on the Dask backend: the same :class:`Result`, of NumPy
    arrays, computed chunk by chunk (``chunks``: bytes per chunk) on Dask's threads or
    the cluster at ``scheduler_address`` (``local:N``, ``tcp://host:8786``). ``into``: a
    Zarr group to write the output and the gradients into instead (:func:`evaluate_into`).
    """
    clipping = _Clip.checked(clip_norm, clip_value, norm_type)
    lazy = build(
        expr,
        inputs,
        wrt=wrt,
        grad_output=grad_output,
        dtype=dtype,
        seed=seed,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
        chunks=chunks,
    )
    if into is not None:
        return _into_zarr(into, lazy, clipping, scheduler_address, expr, id)
    return _into_memory(lazy, clipping, scheduler_address, expr, id)


def _into_memory(
    lazy: Lazy, clipping: _Clip, scheduler_address: str | None, expr: str, id: Any
) -> Any:
    from .api import _clip, _finish, _Run

    run = lazy.run
    names = list(run.intermediates)
    asked = [n for n, g in run.grads.items() if g is not None]
    kept = [n for n in names if run.intermediates[n][1] is not None]
    forward = [run.value, *(run.intermediates[n][0] for n in names)]
    with scheduler(scheduler_address) as client, _counted(lazy.fp, forward_keys(*forward)):
        value, *values = everything = compute(
            *forward,
            *(run.grads[n] for n in asked),
            *(run.intermediates[n][1] for n in kept),
            *(lazy.setup.values[n] for n in lazy.read),
            client=client,
        )
    grads = everything[len(forward) :]
    values = values[: len(names)]
    by_name = dict(zip(asked, grads[: len(asked)], strict=True))
    kept_grads = dict(zip(kept, grads[len(asked) : len(asked) + len(kept)], strict=True))
    read = dict(zip(lazy.read, grads[len(asked) + len(kept) :], strict=True))
    lazy.setup.values = {n: read.get(n, v) for n, v in lazy.given.items()}
    done = _Run(
        value=value,
        grads={n: by_name.get(n) for n in run.grads},
        intermediates={n: (v, kept_grads.get(n)) for n, v in zip(names, values, strict=True)},
        reduction=run.reduction,
        literal_overflow=run.literal_overflow,
    )
    with _counted(lazy.fp):  # in memory, as gradcli.evaluate clips (and counts)
        clip = _clip(done, clipping.norm, clipping.value, clipping.p)
    return _finish(expr, lazy.setup, done, clip, lazy.fp, id)


def evaluate_into(
    path: str, expr: str, inputs: Mapping[str, Any] | None = None, **options: Any
) -> Any:
    """:func:`evaluate`, with the output and the gradients written into the Zarr group
    ``path`` chunk by chunk (``--save out.zarr``: ``output`` and ``grad_NAME``, as
    ``--save`` names them) instead of into memory, in one pass; ``options`` as
    :func:`evaluate` takes them. The Result's arrays are read back from the group lazily,
    its inputs and bindings are lazy too: showing one reads only what is shown."""
    return evaluate(expr, inputs, into=path, **options)


def _into_zarr(
    path: str, lazy: Lazy, clipping: _Clip, scheduler_address: str | None, expr: str, id: Any
) -> Any:
    from .api import _finish, _Run
    from .io.chunked import Stored, ZarrWriter, read_zarr_group

    run = lazy.run
    grads = {f"grad_{n}": g for n, g in run.grads.items() if g is not None}
    grads.update({f"grad_{n}": g for n, (_, g) in run.intermediates.items() if g is not None})
    with ZarrWriter(path) as writer, scheduler(scheduler_address) as client:

        def on_cluster(*arrays: Any) -> tuple[Any, ...]:
            return compute(*arrays, client=client, writes=True)

        # the store learns each array's finiteness and 2-norm, and here the part of it a
        # table shows (read back, it would be a whole chunk from the disk); clipping by
        # norm takes the engine's own p-norm (as gradcli.evaluate's clipping does): all in
        # the same pass
        measures = [shown_part]
        if clipping.norm is not None:
            measures.append(_norm(clipping.p))
        with _counted(lazy.fp, forward_keys(run.value)):  # one pass: output, gradients
            stats = writer.store({"output": run.value, **grads}, on_cluster, measures)
        asked = [n for n, g in run.grads.items() if g is not None]
        with _counted(lazy.fp):  # a second pass, only when clipping changes them
            clip = _clip_stored(writer, asked, clipping, stats, on_cluster)
    saved = {n: Stored.of(a, stats[n][_SHOWN]) for n, a in read_zarr_group(path).items()}
    done = _Run(
        value=saved["output"],
        grads={n: None if g is None else saved[f"grad_{n}"] for n, g in run.grads.items()},
        intermediates={
            n: (v, None if g is None else saved[f"grad_{n}"])
            for n, (v, g) in run.intermediates.items()
        },
        reduction=run.reduction,
        literal_overflow=run.literal_overflow,
    )
    finite = {"output": stats["output"][0], **{n: stats[f"grad_{n}"][0] for n in asked}}
    result = _finish(expr, lazy.setup, done, clip, lazy.fp, id, finite=finite)
    result.grad_norm = math.sqrt(math.fsum(stats[f"grad_{n}"][1] ** 2 for n in asked))
    return result


#: where :meth:`ZarrWriter.store`'s answers hold the measures ``_into_zarr`` asks for: the
#: part shown, then the clipping's p-norm
_SHOWN, _NORM_P = 2, 3


def _clip_stored(
    writer: Any, asked: list[str], clipping: _Clip, stats: dict[str, Any], on_cluster: Any
) -> dict[str, float] | None:
    """Clip the input gradients written by ``writer`` as torch's ``clip_grad_norm_`` /
    ``clip_grad_value_`` do, from the norms the first pass learnt: a second pass rewrites
    them, chunk by chunk where they lie, only when that changes them. ``stats`` is updated with
    the new values' finiteness and norms."""
    names = [f"grad_{n}" for n in asked]
    if clipping.norm is not None:
        norms = [float(stats[name][_NORM_P]) for name in names]
        total, scale = E.clip_by_norm(
            [], clipping.norm, clipping.p, total=_total(norms, clipping.p)
        )
        if scale != 1.0:
            stored = writer.read()
            rescaled = {name: stored[name] * scale for name in names}
            stats.update(writer.store(rescaled, on_cluster, [shown_part]))
        return {
            "max_norm": clipping.norm, "norm_type": clipping.p, "total_norm": total,
            "scale": scale,
        }  # fmt: skip
    if clipping.value is not None:
        stored = writer.read()
        bounded = {}
        for name in names:
            a = stored[name]
            with E.NUMPY.quiet():
                bound = a.dtype.type(clipping.value)
            bounded[name] = a.clip(-bound, bound)
        stats.update(writer.store(bounded, on_cluster, [shown_part]))
        return {"clip_value": clipping.value}
    return None


def _total(norms: list[float], p: float) -> float:
    """The ``p``-norm of the per-gradient norms, as ``clip.total_norm`` takes it."""
    return E.total_norm([E.NUMPY.asarray([n]) for n in norms], p)
