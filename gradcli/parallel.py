"""``gradcli batch --jobs N``: a stream's requests answered by N worker processes, with the
output of one process, byte for byte (docs/commands.md, "batch").

Answering a request is Python work (threads would share one interpreter lock), so the
workers are processes. Each answers what it is given exactly as one process answers its
stream (:func:`batch._answer_all`, with a lane and plans of its own that live as long as
the worker), but a line costs tens of microseconds, and handing a process one line would
cost as much: the parent reads the stream (:func:`batch.read_lines`, so over-long lines
are skipped unread as always) and hands out *blocks* of lines, without parsing them. A
worker answers a block as one text, the responses joined by newlines, error responses
numbered by their line in the whole stream; the parent writes the blocks' texts in the
order of the blocks, each as soon as those before it are written.

Memory stays flat: a worker has one block at a time, and at most ``WINDOW_PER_JOB`` blocks
per worker are handed out and not yet written (a slow block holds the others back, it
does not make the parent read on). A coprocess that sends a request and waits for its
answer gets it: a block also ends where the stream has nothing more to read yet, and the
parent then waits for answers or more input, whichever comes first.

``--accumulate``: a worker sends every answered line's gradients with its block (packed:
:func:`_packed`), and the parent adds them in line order with :func:`batch._accumulate`
itself, so the sums are one process's to the last bit (partial sums per block, added
together, would differ from them in their last bits: floating-point addition is not
associative), and a gradient whose shape differs from an earlier line's in another block
fails its line as in one process. Only with ``--accumulate`` do gradients travel; they are
no larger than the inputs their line held, so a block's are within a few times its bytes.

The command's workers are forked from it once it has loaded NumPy and the engine: copies
made at once, with everything loaded. Forking copies only the thread that forks, and a
lock another thread held at that moment would stay held in the child for ever; so the
command's first step (:func:`warm_up`) keeps NumPy's BLAS to one thread (with a worker
a processor, more would only compete with the other workers; the workers inherit it),
and the command has a single thread when it forks (Linux says so: /proc). Forked before
the command loaded anything, each worker loaded NumPy and the engine itself: three loads
at once on two cores, 0.28 s more of the processors' time for W11 and 0.11 s more of its
wall time (0.85 s against 0.74 s for 100,000 requests). A command that draws a progress
bar (a thread of its own), and ``cli.main(argv)``, a command in a process that goes on,
fork their workers first thing instead, while they have one thread, and each worker
loads NumPy and the engine itself. Where one thread cannot be known (outside Linux), or
is not the case (a program that calls run_batch itself, whose threads are its own:
NumPy's BLAS pool, at least), the workers are forked from a fork server instead, a fresh
process that loads gradcli once ("forkserver"; "spawn" where there is none), started at
the first block if not before. Workers ignore Ctrl-C (the parent reports it), read and
write nothing but their pipe to the parent, and end when it closes; when the parent
stops early (Ctrl-C, a stdout that cannot be written, an error) it terminates them, and
no worker outlives it.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import select
import signal
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import forkserver, resource_tracker
from multiprocessing.connection import Connection, wait
from typing import IO, TYPE_CHECKING, Any, NoReturn

from .errors import GradcliError
from .i18n import msg

if TYPE_CHECKING:
    from .batch import _Lane

# gradcli.batch (NumPy, the engine) is imported where it is used, so that the command line
# can start the workers (warm_up) before it loads them itself

#: a block ends at this many lines or bytes, whichever comes first: large enough that
#: handing it over and back costs little beside answering it (a fraction of a millisecond
#: against ~10 ms for 256 small requests), small enough that the workers finish a stream
#: close together
BLOCK_LINES = 256
BLOCK_BYTES = 1 << 20
#: blocks handed out and not yet written, per worker: room for the others to go on while
#: one block is slow, and the bound on the parent's memory
WINDOW_PER_JOB = 4

#: a block: the number of its first line in the stream, and its lines as read_lines gives
#: them (None: a line over the size limit, skipped unread)
Block = tuple[int, list[bytes | None]]
#: what a worker answers with: max_line_bytes, max_elements, max_program_chars, accumulate
Settings = tuple[int, int, int, bool]

#: the workers warm_up started, for the next answer_in_parallel
_ready: list[_Worker] = []
#: whether answer_in_parallel forks its workers from this process, loaded, while it has
#: one thread (warm_up in the command's own process)
_fork_loaded = False


def warm_up(jobs: int, settings: Settings, own_process: bool = False) -> None:
    """The command line's first step, before this process loads NumPy and the engine. In
    the command's own process with one thread, NumPy's BLAS keeps to one thread (unless
    ``OPENBLAS_NUM_THREADS`` says otherwise) and the workers are forked later, loaded
    (see the module's text). Else, while this process has one thread, the workers are
    forked from it now, and load NumPy and the engine while it does; with more threads,
    the fork server they will be forked from is started."""
    global _fork_loaded
    if own_process and _one_thread():
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        _fork_loaded = True
        return
    if _one_thread():
        fork = multiprocessing.get_context("fork")
        for _ in range(jobs):
            _ready.append(_Worker.start(settings, fork, [w.conn for w in _ready]))
    elif _context().get_start_method() == "forkserver":
        resource_tracker.ensure_running()  # see _Worker.start
        with _sigint_blocked():
            forkserver.ensure_running()


def _one_thread() -> bool:
    """Whether this process has a single thread, so that a fork copies all of it: a lock
    that another thread held at the fork would stay held in the child for ever. Linux says
    (/proc); elsewhere, no fork."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            return any(line.split() == ["Threads:", "1"] for line in f)
    except OSError:
        return False


def _context() -> Any:
    """How workers start once this process has loaded NumPy (which starts threads): forked
    from the fork server where there is one, else spawned."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # what a worker needs, loaded once, in the server: the main module (as by default) and
    # this module with what its workers import
    context.set_forkserver_preload(["__main__", "gradcli.parallel", "gradcli.batch"])
    return context


def answer_in_parallel(
    stream: IO[bytes],
    write: Callable[[str], None],
    jobs: int,
    totals: dict[str, Any] | None,
    max_line_bytes: int,
    max_elements: int,
    max_program_chars: int,
    progress: tuple[Any, Any] | None,
) -> tuple[int, int]:
    """Answer ``stream`` on ``jobs`` worker processes as :func:`batch.run_batch` does in
    one, writing each block's responses at once; add the gradients into ``totals`` when
    given. Returns how many lines were answered and how many failed."""
    blocks = _Blocks(stream, max_line_bytes, progress)
    settings = (max_line_bytes, max_elements, max_program_chars, totals is not None)
    window = WINDOW_PER_JOB * jobs
    workers = _take_ready(jobs, settings)
    idle = list(workers)
    busy: dict[Connection, tuple[_Worker, int, Block]] = {}  # by the parent's end of the pipe
    answered: dict[int, tuple[Block, Any]] = {}  # by block index, until written
    handed = written = ok = failed = 0
    more, finished = True, False

    def room() -> bool:  # for another block to be handed out
        return handed - written < window and (bool(idle) or len(workers) < jobs)

    try:
        while more or busy:
            # hand out blocks while there is room; reading must not wait for input while
            # answers are due (a coprocess waits for them before it sends more)
            while more and room() and not (busy and blocks.waits()):
                block = blocks.next()
                if block is None:
                    more = False
                    break
                if idle:
                    worker = idle.pop()
                else:
                    loaded = _fork_loaded and _one_thread()
                    fork = multiprocessing.get_context("fork") if loaded else None
                    worker = _Worker.start(settings, fork, [w.conn for w in workers])
                    workers.append(worker)
                worker.send(block)
                busy[worker.conn] = (worker, handed, block)
                handed += 1
            if not busy:
                continue
            watched: list[Any] = list(busy)
            if more and room():  # only the input held the next block back
                watched.append(blocks.fd)
            for ready in wait(watched):
                if ready in busy:
                    worker, index, block = busy.pop(ready)
                    answered[index] = (block, worker.receive())
                    idle.append(worker)
            while written in answered:
                block, answer = answered.pop(written)
                n_ok, n_failed = _write_answer(answer, totals, write, _line_of(block))
                ok, failed, written = ok + n_ok, failed + n_failed, written + 1
        finished = True
    finally:
        for worker in workers:
            worker.stop(at_once=not finished)
    return ok, failed


def _take_ready(jobs: int, settings: Settings) -> list[_Worker]:
    """The workers warm_up started, if it started them for these; else none (they end)."""
    ready = list(_ready)
    _ready.clear()
    if len(ready) <= jobs and all(w.settings == settings for w in ready):
        return ready
    for worker in ready:
        worker.stop(at_once=True)
    return []


def _write_answer(
    answer: Any,
    totals: dict[str, Any] | None,
    write: Callable[[str], None],
    line: Callable[[int], bytes | None],
) -> tuple[int, int]:
    """Write a block's responses (:func:`_answer_lines`); with ``totals``, first add each
    answered line's gradients, in line order, as one process does (a line whose gradient
    shape does not fit fails here, with the response one process gives it: its request is
    read again from ``line(number)``, the line's bytes, asked in line order). The
    partitions of ``batch --scheduler`` are written by this too (:mod:`gradcli.cluster`)."""
    from .batch import _accumulate, _error_response, _parse_line

    text, gradients, ok, failed = answer
    if totals is not None:
        responses: list[str] | None = None
        for index, number, grads in _unpacked(*gradients):
            try:
                _accumulate(totals, grads)
            except Exception as exc:  # as in batch._answer_all: the line fails
                responses = responses or text.split("\n")  # JSON text holds no newline
                request = _parse_line(line(number) or b"", number)
                responses[index] = _error_response(request, exc, number)
                ok, failed = ok - 1, failed + 1
        if responses is not None:
            text = "\n".join(responses)
    if text:  # a block of blank lines has no response
        write(text)
    return ok, failed


def _line_of(block: Block) -> Callable[[int], bytes | None]:
    """The bytes of a line of ``block`` by its number (None: over the size limit)."""
    first, lines = block
    return lambda number: lines[number - first]


class _Blocks:
    """The request stream cut into blocks. A block ends after ``BLOCK_LINES`` lines or
    ``BLOCK_BYTES`` bytes, or where the stream has nothing more to read yet: its writer
    may be waiting for the answers to what it sent (a coprocess)."""

    def __init__(
        self, stream: IO[bytes], max_line_bytes: int, progress: tuple[Any, Any] | None
    ) -> None:
        self.stream = stream
        self.progress = progress
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream never waits
            self.fd = None
        self.given = 0  # bytes of the stream given to the buffer below
        self.consumed = 0  # bytes of it that lines were read from
        from .batch import read_lines

        buffered = io.BufferedReader(_Counted(self), 1 << 16)
        self.lines = read_lines(buffered, max_line_bytes)

    def waits(self) -> bool:
        """Whether reading the next line would wait for the stream's writer: everything
        read so far is in lines, and nothing more has come."""
        if self.consumed < self.given or self.fd is None:
            return False
        try:
            return not select.select([self.fd], [], [], 0)[0]
        except (OSError, ValueError):  # not a descriptor select can watch: read on
            return False

    def next(self) -> Block | None:
        """The next block, or None at the end of the stream."""
        lines: list[bytes | None] = []
        first = held = 0
        start = self.consumed
        for number, raw, size in self.lines:
            if not lines:
                first = number
            lines.append(raw)
            self.consumed += size
            if raw is not None:
                held += size
            if len(lines) >= BLOCK_LINES or held >= BLOCK_BYTES or self.waits():
                break
        if self.progress is not None:
            self.progress[0].advance(self.progress[1], self.consumed - start)
        return (first, lines) if lines else None


class _Counted(io.RawIOBase):
    """The request stream as the raw stream of the block reader's buffer, counting the
    bytes given (``blocks.given``), so that :meth:`_Blocks.waits` knows when the buffer is
    empty. Each read is one read of the stream, of what is there (``read1``): a pipe's
    writer may have sent only part of what the buffer could hold."""

    def __init__(self, blocks: _Blocks) -> None:
        self.blocks = blocks
        stream: Any = blocks.stream
        self.read_some = getattr(stream, "read1", stream.read)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.read_some(len(buffer))
        buffer[: len(data)] = data
        self.blocks.given += len(data)
        return len(data)


class _Worker:
    """A worker process and the parent's end of its pipe. A worker has at most one block
    at a time: the parent sends one only to a worker waiting for it, so neither ever waits
    to send while the other waits to send too."""

    def __init__(self, process: Any, conn: Connection, settings: Settings) -> None:
        self.process = process
        self.conn = conn
        self.settings = settings

    @classmethod
    def start(
        cls, settings: Settings, context: Any = None, others: list[Connection] | None = None
    ) -> _Worker:
        """A worker started by ``context`` (default: :func:`_context`); forked, it closes its
        copies of the parent's ends of its pipe and of the ``others`` (so that it sees the
        parent end)."""
        context = context or _context()
        conn, child_end = context.Pipe()
        forked = context.get_start_method() == "fork"
        inherited = [*(others or []), conn] if forked else []
        process = context.Process(
            target=_work, args=(child_end, settings, inherited), name="gradcli-batch", daemon=True
        )
        if not forked:  # started, it unblocks Ctrl-C in this process: before _sigint_blocked
            resource_tracker.ensure_running()
        with _sigint_blocked():
            process.start()
        child_end.close()  # the worker's alone: the parent sees it end when the worker does
        return cls(process, conn, settings)

    def send(self, block: Block | None) -> None:
        try:
            self.conn.send(block)
        except OSError:
            self.lost()

    def receive(self) -> Any:
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.lost()

    def lost(self) -> NoReturn:
        self.process.join(1)
        raise GradcliError(
            msg(
                "batch --jobs: a worker process ended unexpectedly (exit status "
                "{exitcode}); the lines of its block and after it got no response",
                exitcode=self.process.exitcode,
            )
        )

    def stop(self, *, at_once: bool) -> None:
        """Let the worker end (it has no block), or end it ``at_once``."""
        if at_once:
            self.process.terminate()
        else:
            try:
                self.conn.send(None)
            except OSError:
                self.process.terminate()
        self.process.join()
        self.conn.close()


class _sigint_blocked:
    """Ctrl-C held back while processes start (where signal masks exist), so that they
    start with it blocked: until a worker ignores it (:func:`_work`), and the fork server
    too, a Ctrl-C would end them with a traceback. One that comes meanwhile reaches this
    process when it is unblocked. (multiprocessing's resource tracker, which the fork server
    and spawned workers need, unblocks it when it starts: it is started before.)"""

    def __enter__(self) -> None:
        self.saved = None
        if hasattr(signal, "pthread_sigmask"):
            self.saved = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.saved)


def _work(conn: Connection, settings: Settings, inherited: list[Connection]) -> None:
    """A worker process: answer the blocks ``conn`` brings until it brings None or the
    parent closes it."""
    for end in inherited:
        end.close()
    gc.enable()  # forked from the command line, which runs without it (see cli.main)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to report
    if hasattr(signal, "pthread_sigmask"):  # blocked by _sigint_blocked: ignored from now on
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    null = os.open(os.devnull, os.O_RDWR)  # a worker's only input and output is its pipe
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    from .autograd.backend import NUMPY
    from .batch import _Lane
    from .compiled import Plans

    max_line_bytes, max_elements, max_program_chars, accumulate = settings
    lane = _Lane(Plans(first=False), max_elements)
    limits = (max_line_bytes, max_elements, max_program_chars)
    with NUMPY.quiet():
        while True:
            try:
                block = conn.recv()
            except (EOFError, OSError):
                return
            if block is None:
                return
            answer = _answer_block(block, lane, limits, accumulate)
            try:
                conn.send(answer)
            except OSError:
                return


def _answer_block(
    block: Block, lane: _Lane, limits: tuple[int, int, int], accumulate: bool
) -> tuple[str, Any, int, int]:
    """A block's answer (:func:`_answer_lines`)."""
    first, lines = block
    return _answer_lines(
        ((first + k, raw, 0) for k, raw in enumerate(lines)), lane, limits, accumulate
    )


def _answer_lines(
    numbered: Iterable[tuple[int, bytes | None, int]],
    lane: _Lane,
    limits: tuple[int, int, int],
    accumulate: bool,
) -> tuple[str, Any, int, int]:
    """The responses of ``numbered`` lines (as :func:`batch.read_lines` gives them, numbered
    in the whole stream) joined by newlines; with ``accumulate``, the gradients of the
    answered lines for the parent to add (:func:`_packed`); how many lines were answered
    and how many failed. A partition of ``batch --scheduler`` is answered by this too, on
    a worker of the cluster (:mod:`gradcli.cluster`)."""
    from .batch import _answer_all

    texts: list[str] = []
    added: list[tuple[int, int, dict[str, Any]]] = []

    def add(number: int, grads: dict[str, Any]) -> None:
        added.append((len(texts), number, grads))

    ok, failed = _answer_all(
        numbered, texts.append, lane, add if accumulate else None, *limits, None, False
    )
    return "\n".join(texts), _packed(added), ok, failed


def _packed(added: list[tuple[int, int, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """A block's gradients as they go to the parent: one array per input name, shape and
    dtype, whose rows are the gradients in line order, and for each answered line its
    (response index, line number, ((name, array, row), ...)), array -1 for a gradient not
    asked for (None). Small arrays pickled one at a time would cost ~10 µs a line on each
    side, more than a worker takes to answer the line."""
    import numpy as np

    where: dict[tuple[str, tuple[int, ...], Any], int] = {}
    rows: list[list[Any]] = []
    lines = []
    for index, number, grads in added:
        refs = []
        for name, g in grads.items():
            if g is None:
                refs.append((name, -1, 0))
                continue
            k = where.setdefault((name, g.shape, g.dtype), len(rows))
            if k == len(rows):
                rows.append([])
            refs.append((name, k, len(rows[k])))
            rows[k].append(g)
        lines.append((index, number, tuple(refs)))
    return [np.stack(r) for r in rows], lines


def _unpacked(arrays: list[Any], lines: list[Any]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Each answered line's (response index, line number, gradients) from :func:`_packed`;
    a gradient is a row of its array (``[row, ...]``: an array, also when 0-d)."""
    for index, number, refs in lines:
        yield index, number, {n: None if k < 0 else arrays[k][row, ...] for n, k, row in refs}
