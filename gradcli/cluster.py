"""``gradcli batch --scheduler ADDRESS FILE...``: request files answered on a Dask cluster,
with the output of one process, byte for byte (docs/commands.md, "batch").

The files are not sent to the cluster: the command cuts each into byte ranges (partitions
of ``PARTITION_BYTES``) and the workers read their ranges themselves, so the files must be
at the same path for the command and for every worker. A line belongs to the partition
where it starts, as Hadoop's and Dask's ``read_text`` have it: a partition's lines may end
past its range, and a partition inside one long line has none. Each partition is answered
by a task (:func:`answer_lines`) with the code one process answers its stream with
(:func:`parallel._answer_lines`, so :func:`batch._answer_all`): the bytes read by
:func:`batch.read_lines` (a line over ``--max-line-bytes`` is skipped unread, also where
it runs over many partitions), and a lane and plans kept by each worker thread from one
partition to the next (:func:`_lane`).

An error response names its line in the whole input, so a partition's task must know the
number of its first line: first a cheap task per partition counts the lines that start
in it (:func:`count_lines`: newlines counted in pieces of the range, no line held), and
as the counts come in, in order, the command adds them up and hands out the answering
tasks. Counting reads each byte once more (from the page cache, as a rule), which costs
little beside answering; its tasks go before the answering tasks (a higher priority), and
never run far ahead of the writing (the window below).

The responses are written in the order of the partitions, each partition's as soon as
those before it are written, with at most ``WINDOW_PER_THREAD`` partitions per worker
thread counted, answered and not yet written: the command's memory is that of a few
partitions' responses, however large the files. ``--accumulate``: the workers send each
answered line's gradients back with their partition's responses and the command adds them
in line order (:func:`parallel._write_answer`, as for ``--jobs``), so the sums are one
process's to the last bit.

Whatever ends the command early (Ctrl-C, a reader that goes away, an error), the tasks
still out are cancelled, and the client, with the cluster of ``local:N``, is closed
(:func:`lazy.scheduler`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .autograd.backend import NUMPY
from .batch import _Lane, _progress, _summary, read_lines
from .compiled import Plans
from .errors import GradcliError, InputError
from .i18n import msg
from .io import quote_short
from .language import DEFAULT_MAX_PROGRAM_CHARS
from .parallel import Settings, _answer_lines, _write_answer

#: a partition's bytes: answering a MiB of small requests takes a few tenths of a second on
#: one core, against milliseconds for a task's round trip; small enough that a file of a
#: few MiB already keeps several workers busy and they finish it close together
PARTITION_BYTES = 1 << 20
#: partitions counted or answered and not yet written, per worker thread: room for the
#: others to go on while one is slow, and the bound on the command's memory
WINDOW_PER_THREAD = 4
#: counting reads its range in pieces of this size
PIECE_BYTES = 1 << 20
#: how long the command waits for a first worker to join the scheduler
WORKERS_TIMEOUT = 30


@dataclass(frozen=True)
class Part:
    """Bytes ``start`` to ``end`` of the file ``path``: the lines that start there."""

    path: str
    start: int
    end: int


def partitions(files: Sequence[tuple[str, int]], partition_bytes: int) -> Iterator[Part]:
    """Each file of ``(path, size)`` cut into ranges of ``partition_bytes``, in order; an
    empty file has none."""
    for path, size in files:
        for start in range(0, size, partition_bytes):
            yield Part(path, start, min(start + partition_bytes, size))


def count_lines(path: str, start: int, end: int) -> tuple[int, int]:
    """A task: how many lines start in bytes ``start`` to ``end`` of the file (after a
    newline, or at 0), and the byte where the first of them starts (``end`` when none)."""
    count, first = (1, 0) if start == 0 else (0, -1)
    at = max(start - 1, 0)  # a newline at start - 1 starts a line at start
    with open(path, "rb") as f:
        f.seek(at)
        while at < end - 1:  # (a newline at end - 1 starts the next partition's line)
            piece = f.read(min(PIECE_BYTES, end - 1 - at))
            if not piece:
                break
            if first < 0 and (k := piece.find(b"\n")) >= 0:
                first = at + k + 1
            count += piece.count(b"\n")
            at += len(piece)
    return count, first if count else end


def answer_lines(
    path: str, start: int, count: int, first: int, settings: Settings
) -> tuple[str, Any, int, int]:
    """A task: the answer of the ``count`` lines of the file from byte ``start``, the first
    numbered ``first`` (:func:`parallel._answer_lines`)."""
    max_line_bytes, max_elements, max_program_chars, accumulate = settings
    with NUMPY.quiet(), open(path, "rb") as f:
        f.seek(start)
        numbered = (
            (first + n - 1, raw, size)
            for n, raw, size in islice(read_lines(f, max_line_bytes), count)
        )
        limits = (max_line_bytes, max_elements, max_program_chars)
        return _answer_lines(numbered, _lane(settings), limits, accumulate)


#: each worker thread's lanes, by the settings they answer with
_lanes = threading.local()


def _lane(settings: Settings) -> _Lane:
    """This thread's lane for these limits, kept from one partition to the next as a
    ``--jobs`` worker keeps its own: a stream's programs are planned once per worker thread,
    not once per partition (a lane is one thread's; a worker may run several)."""
    kept: dict[tuple[int, ...], _Lane] = _lanes.__dict__.setdefault("kept", {})
    key = settings[:3]  # (not --accumulate: the lane answers the same either way)
    lane = kept.get(key)
    if lane is None:
        if len(kept) >= 4:  # commands with other limits came before: theirs go
            kept.clear()
        lane = kept[key] = _Lane(Plans(first=False), settings[1])
    return lane


# --- the command's side -------------------------------------------------------------------


def run_on_cluster(
    address: str,
    paths: Sequence[str],
    write: Callable[[str], None],
    *,
    accumulate: bool = False,
    max_line_bytes: int = 16 * 2**20,
    max_elements: int = 10**8,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    progress: bool = False,
    partition_bytes: int = PARTITION_BYTES,
) -> int:
    """Answer the requests of the files ``paths`` on the cluster at ``address`` (as
    :func:`lazy.scheduler` takes it: ``tcp://host:8786``, ``local:N``) as
    :func:`batch.run_batch` answers them in one process, through ``write``, a partition's
    responses at once; returns the number of lines that failed. ``progress``: a progress
    bar of the bytes written, on stderr."""
    files = [_regular_file(path) for path in paths]  # before a cluster is started
    settings = (max_line_bytes, max_elements, max_program_chars, accumulate)
    totals: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        client = _connect(stack, address)
        if client is None:
            raise InputError(
                msg("batch --scheduler needs a distributed scheduler (tcp://host:8786) or local:N")
            )
        _check_workers(client)
        if address.startswith("local:"):
            client.run(_quiet_logs)
        bar = _progress(sum(size for _, size in files) if progress else None)
        try:
            with NUMPY.quiet():  # the sums of --accumulate, as in run_batch
                ok, failed = _answer(
                    client, files, write, totals if accumulate else None, settings,
                    partition_bytes, bar,
                )  # fmt: skip
        finally:
            if bar is not None:
                bar[0].stop()
        if accumulate:
            write(_summary(totals, ok, failed))
    return failed


def _connect(stack: contextlib.ExitStack[Any], address: str) -> Any:
    """The client of :func:`lazy.scheduler` at ``address``, closed by ``stack``. The worker
    processes of ``local:N`` start with Ctrl-C blocked (and so the processes they start):
    a terminal sends it to every process of the command, and it is the command's to report,
    once, as it cancels the tasks and closes the cluster, not each worker's with a
    traceback. A Ctrl-C that comes while they start reaches the command after. Where the
    scheduler's web server (no dashboard, but its other pages) finds its usual port taken,
    it takes another without a warning."""
    from multiprocessing import resource_tracker

    from .lazy import scheduler
    from .parallel import _sigint_blocked

    if address.startswith("local:"):
        # started, it unblocks Ctrl-C in the thread that starts it (see _sigint_blocked)
        resource_tracker.ensure_running()
    with _sigint_blocked(), warnings.catch_warnings():
        # the scheduler's web server, which no one looks at here, takes another port
        warnings.filterwarnings("ignore", "Port .* is already in use")
        return stack.enter_context(scheduler(address))


def _regular_file(path: str) -> tuple[str, int]:
    """``path`` made absolute (the workers open it, from another working directory or
    machine) and its size. It must be a file the workers can open too: not stdin, not a
    pipe."""
    from .inputs import open_requests

    stream, _ = open_requests(path)  # one that cannot be read: the message batch gives
    with stream:
        info = os.fstat(stream.fileno())
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            msg(
                "batch --scheduler reads regular files, and {quote_short} is not one: "
                "the workers read their parts of the files themselves (for a stream, "
                "--jobs N)",
                quote_short=quote_short(path, 200),
            )
        )
    return os.path.abspath(path), info.st_size


def _check_workers(client: Any) -> None:
    """A worker has joined, and the workers can import gradcli: a task whose function they
    cannot import breaks the worker's connection (distributed retries it, and waits) instead
    of failing, so it is asked before any task is sent."""
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
    except TimeoutError:
        raise GradcliError(
            msg(
                "batch --scheduler: no worker joined the scheduler within {WORKERS_TIMEOUT} s",
                WORKERS_TIMEOUT=WORKERS_TIMEOUT,
            )
        ) from None
    try:
        # exec, a builtin, reaches any worker; {}: its own globals, not distributed's
        client.run(exec, "import gradcli.cluster", {})
    except ImportError as e:
        raise GradcliError(
            msg(
                "batch --scheduler: a worker cannot import {value} ({e}): the workers "
                "answer the requests themselves, and need gradcli, this version, "
                "installed",
                value=e.name or "gradcli",
                e=e,
            )
        ) from None


def _quiet_logs() -> None:
    """On the workers of ``local:N``, which write on the command's stderr: only distributed's
    errors. Its warnings are of its own working (a task cancelled as the command stops
    early, its memory, its garbage collector), not the requests'; a failed task is the
    command's to report."""
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)


@dataclass
class _Slot:
    """A partition in the window, from its counting until its responses are written."""

    part: Part
    counting: Any  # the future of count_lines, until counted
    first: int = 0  # the number of its first line
    start: int = 0  # the byte where its first line starts
    answering: Any = None  # the future of answer_lines, until written


def _answer(
    client: Any,
    files: Sequence[tuple[str, int]],
    write: Callable[[str], None],
    totals: dict[str, Any] | None,
    settings: Settings,
    partition_bytes: int,
    progress: tuple[Any, Any] | None,
) -> tuple[int, int]:
    """Count, answer and write the partitions of ``files`` in order, a window of them at a
    time; returns how many lines were answered and how many failed."""
    from distributed import wait

    parts = partitions(files, partition_bytes)
    window = WINDOW_PER_THREAD * max(1, sum(client.nthreads().values()))
    slots: deque[_Slot] = deque()
    numbered = 0  # the first slots, whose line numbers are known
    last_line = ok = failed = 0  # (last_line: the number of the last line numbered)
    finished = False
    try:
        while True:
            while len(slots) < window and (part := next(parts, None)) is not None:
                counting = client.submit(
                    count_lines, part.path, part.start, part.end, priority=1, pure=False
                )
                slots.append(_Slot(part, counting))
            if not slots:
                break
            while numbered < len(slots) and slots[numbered].counting.done():
                slot = slots[numbered]
                if slot.counting.status == "error":
                    break  # said when the partitions before it are written
                count, slot.start = _result(slot.counting, slot.part)
                slot.counting, slot.first, last_line = None, last_line + 1, last_line + count
                if count:
                    slot.answering = client.submit(
                        answer_lines, slot.part.path, slot.start, count, slot.first, settings,
                        pure=False,
                    )  # fmt: skip
                numbered += 1
            head = slots[0]
            if not numbered:  # the head is being counted, or its counting failed
                if head.counting.status == "error":
                    raise _failure(head.counting, head.part)
                wait([head.counting])
                continue
            if head.answering is None or head.answering.done():
                slots.popleft()
                numbered -= 1
                if head.answering is not None:
                    answer = _result(head.answering, head.part)
                    head.answering = None  # the cluster lets the responses go
                    reread = _reader(head, settings[0])
                    n_ok, n_failed = _write_answer(answer, totals, write, reread)
                    ok, failed = ok + n_ok, failed + n_failed
                if progress is not None:
                    progress[0].advance(progress[1], head.part.end - head.part.start)
                continue
            due = [head.answering]
            if numbered < len(slots) and slots[numbered].counting.status != "error":
                due.append(slots[numbered].counting)  # its answering can be handed out
            wait(due, return_when="FIRST_COMPLETED")
        finished = True
    finally:
        if not finished:
            out = [f for s in slots for f in (s.counting, s.answering) if f is not None]
            with contextlib.suppress(Exception):  # (the scheduler gone): what stopped us is said
                client.cancel(out)
    return ok, failed


def _result(future: Any, part: Part) -> Any:
    """What the task of ``future``, on ``part``, gave."""
    if future.status == "error":
        raise _failure(future, part)
    return future.result()


def _failure(future: Any, part: Part) -> GradcliError:
    """The error the task of ``future`` raised, said in one line."""
    exc = future.exception()
    if isinstance(exc, OSError):
        return InputError(
            msg(
                "a worker cannot read {quote_short}: {value} (with --scheduler the "
                "workers read the files themselves: they must be at the same path for "
                "them)",
                quote_short=quote_short(part.path, 200),
                value=exc.strerror or exc,
            )
        )
    said = " ".join(str(exc).split())  # one line
    return GradcliError(
        msg(
            "batch --scheduler: a task failed on the cluster ({name}: {said}); the "
            "lines of its partition and after it got no response",
            name=type(exc).__name__,
            said=said,
        )
    )


def _reader(slot: _Slot, max_line_bytes: int) -> Callable[[int], bytes | None]:
    """The bytes of a line of ``slot``'s partition by its number, read again from the file,
    forward: only when ``--accumulate`` fails a line does its request have to be read
    again, for the id its error response carries (:func:`parallel._write_answer`)."""
    lines: Iterator[tuple[int, bytes | None]] | None = None

    def read(path: str) -> Iterator[tuple[int, bytes | None]]:
        with open(path, "rb") as f:
            f.seek(slot.start)
            for n, raw, _ in read_lines(f, max_line_bytes):
                yield slot.first + n - 1, raw

    def line(number: int) -> bytes | None:
        nonlocal lines
        if lines is None:
            lines = read(slot.part.path)
        try:
            for n, raw in lines:
                if n == number:
                    return raw
        except OSError as e:
            raise InputError(
                msg(
                    "cannot read {quote_short} again: {value}",
                    quote_short=quote_short(slot.part.path, 200),
                    value=e.strerror or e,
                )
            ) from None
        return None

    return line
