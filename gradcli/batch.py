"""``gradcli batch``: NDJSON requests in, one JSON response per line out.

Nothing is kept per line (memory stays flat over millions of lines) except, with
``accumulate``, one running gradient per input name. Repeated expression texts are parsed
once (``language.compile_program`` caches them), repeated programs with inputs of the same
shapes are planned and replayed (:class:`gradcli.compiled.Plans`), and from the third
time a plain request is answered by :class:`_Lane` with the same text, sooner
(docs/commands.md, "batch"). A line over the size limit is skipped without being held in
memory. ``--jobs N`` hands blocks of lines to N worker processes, which answer them with
:func:`_answer_all` as one process does (:mod:`gradcli.parallel`); ``--scheduler`` has the
workers of a Dask cluster answer partitions of request files so (:mod:`gradcli.cluster`).
Several files are one stream (:func:`open_files`).
"""

from __future__ import annotations

import io
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import numpy as np

from .api import Result, as_gradcli_error, evaluate, request_id, request_kwargs
from .autograd.backend import NUMPY
from .compiled import Plans, _Recorded
from .errors import InputError, LimitError, ShapeError
from .i18n import msg
from .io import dumps, json_array, numbers_text, parse_json_text, value_from_json
from .language import DEFAULT_MAX_PROGRAM_CHARS


def read_lines(stream: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """``(line number, bytes or None when too long, bytes consumed)`` for each line."""
    number = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            size = len(line)
            while True:  # drop the rest of the over-long line, a chunk at a time
                chunk = stream.readline(1 << 20)
                size += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield number, None, size
        else:
            yield number, line, len(line)


def run_batch(
    stream: IO[bytes],
    write: Callable[[str], None],
    *,
    accumulate: bool = False,
    max_line_bytes: int = 16 * 2**20,
    max_elements: int = 10**8,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    progress_total: int | None = None,
    debug: bool = False,
    jobs: int = 1,
) -> int:
    """Answer every request of ``stream`` through ``write``; returns the number that failed.

    ``jobs`` > 1: the lines are answered by that many worker processes, a block of lines
    at a time (:mod:`gradcli.parallel`), and ``write`` is given each block's responses at
    once, joined by newlines: the same text as one process writes. The workers are started
    by :mod:`multiprocessing`, so a program that calls this must start as its rule says
    (``if __name__ == "__main__":``). With ``debug`` the lines are answered here, so that
    the first failure stops the stream with its traceback."""
    totals: dict[str, Any] = {}
    progress = _progress(progress_total)
    try:
        # NumPy's floating-point errors, once for the stream: a response has no warnings,
        # and what the lane replays must not print NumPy's (the general way counts its own)
        with NUMPY.quiet():
            if jobs > 1 and not debug:
                from .parallel import answer_in_parallel

                ok, failed = answer_in_parallel(
                    stream, write, jobs, totals if accumulate else None, max_line_bytes,
                    max_elements, max_program_chars, progress,
                )  # fmt: skip
            else:
                # a stream's requests are mostly a few programs: each is planned once per
                # input shapes (when it comes a second time) and replayed after
                # (gradcli.compiled), with the numbers of a fresh evaluation; a program
                # seen once costs no recording
                lane = _Lane(Plans(first=False), max_elements, grads=accumulate)
                add = (lambda number, grads: _accumulate(totals, grads)) if accumulate else None
                ok, failed = _answer_all(
                    read_lines(stream, max_line_bytes), write, lane, add, max_line_bytes,
                    max_elements, max_program_chars, progress, debug,
                )  # fmt: skip
    finally:
        if progress is not None:
            progress[0].stop()
    if accumulate:
        write(_summary(totals, ok, failed))
    return failed


def _summary(totals: dict[str, Any], ok: int, failed: int) -> str:
    """``--accumulate``'s last line: the sums, and how many lines were answered and failed."""
    summary = {name: json_array(g) for name, g in totals.items()}
    return dumps({"accumulated": summary, "requests": ok, "failed": failed})


def open_files(sources: Sequence[str]) -> tuple[IO[bytes], int | None]:
    """The request stream of ``batch FILE|-...`` and its size in bytes (None when stdin is
    one of them, or a size cannot be known). Several files are one stream, read one after
    another, their lines numbered across them, as ``cat FILE...`` would give them; but a
    file whose last line has no newline ends that line at its end, where ``cat`` would run
    it into the next file's first (docs/commands.md, "batch"). Each file is opened first,
    so that one that cannot be read is an error before any answer; a regular file is closed
    again and opened when its turn comes (a shell pattern may name more files than a
    process may hold open), stdin and pipes are kept open (what they give is given once)."""
    import stat

    from .inputs import open_requests

    if len(sources) == 1:
        return open_requests(sources[0])
    opened: dict[int, IO[bytes]] = {}
    total: int | None = 0
    for k, source in enumerate(sources):
        stream, size = open_requests(source)
        if source != "-" and stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            stream.close()
        else:
            opened[k] = stream
        total = None if total is None or size is None else total + size
    return io.BufferedReader(_Files(sources, opened), 1 << 16), total


class _Files(io.RawIOBase):
    """Several request files as one raw stream: each read is one read of the current file,
    of what it has (``read1``), and a newline is given after a file whose last byte is not
    one, unless it is the last file."""

    def __init__(self, sources: Sequence[str], opened: dict[int, IO[bytes]]) -> None:
        self.sources = sources
        self.opened = opened
        self.next = 0  # index of the next file to open
        self.current: Any = None
        self.last = b""  # the last byte the current file gave

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        from .inputs import open_requests

        while True:
            if self.current is None:
                if self.next == len(self.sources):
                    return 0
                opened = self.opened.pop(self.next, None)
                self.current = opened or open_requests(self.sources[self.next])[0]
                self.next += 1
                self.last = b""
            data = getattr(self.current, "read1", self.current.read)(len(buffer))
            if data:
                buffer[: len(data)] = data
                self.last = data[-1:]
                return len(data)
            if self.sources[self.next - 1] != "-":
                self.current.close()
            self.current = None
            if self.last not in (b"", b"\n") and self.next < len(self.sources):
                buffer[:1] = b"\n"  # the line ends with its file
                return 1

    def close(self) -> None:
        if self.current is not None and self.sources[self.next - 1] != "-":
            self.current.close()
        for k, stream in self.opened.items():  # pipes not reached
            if self.sources[k] != "-":
                stream.close()
        super().close()


def _answer_all(
    lines: Iterable[tuple[int, bytes | None, int]],
    write: Callable[[str], None],
    lane: _Lane,
    add: Callable[[int, dict[str, Any]], None] | None,
    max_line_bytes: int,
    max_elements: int,
    max_program_chars: int,
    progress: tuple[Any, Any] | None,
    debug: bool,
) -> tuple[int, int]:
    """Answer each line (as :func:`read_lines` gives them) through ``write``: the lane
    first, else the general way. ``add(line number, gradients)`` is given each answer's
    gradients before it is written (``--accumulate``); if it raises, the line fails.
    Returns how many were answered and how many failed."""
    ok = failed = 0
    for number, raw, size in lines:
        if progress is not None:
            progress[0].advance(progress[1], size)
        if raw is not None and not raw.strip():
            continue  # blank lines are allowed between requests
        request: Any = None
        grads: Any
        try:
            if raw is None:
                raise LimitError(
                    msg(
                        "line {number} is longer than {max_line_bytes:,} bytes (raise it with "
                        "--max-line-bytes)",
                        number=number,
                        max_line_bytes=max_line_bytes,
                    )
                )
            request = _parse_line(raw, number)
            answered = lane.answer(request)
            if answered is None:
                result = evaluate(
                    **request_kwargs(request),
                    max_elements=max_elements,
                    max_program_chars=max_program_chars,
                    plans=lane.plans,
                )
                lane.learn(request, result)
                response, grads = _response_text(result), result.grads
            else:
                response, grads = answered
            if add is not None:
                add(number, grads)
            ok += 1
        except Exception as exc:  # one bad line never stops the stream
            if debug:
                raise
            response = _error_response(request, exc, number)
            failed += 1
        # outside the try: output that cannot be written stops the stream (it is not the
        # line's fault, and no later answer could be written either)
        write(response)
    return ok, failed


def _parse_line(raw: bytes, number: int) -> Any:
    """The request of line ``number``."""
    text = _decode(raw, number).rstrip("\r\n")  # positions are within the line
    return parse_json_text(text, what=f"line {number}")


def _response_text(result: Result) -> str:
    try:
        return dumps(result.to_json())
    except RecursionError:  # only the id, which is echoed as it came, can be that deep
        raise InputError(msg("the request's id is nested too deeply to be written back")) from None


def _error_response(request: Any, exc: Exception, number: int) -> str:
    """The error response of a line: its id echoed back, unless the id is nested too deep
    to be written (then null: one line never stops the stream)."""
    err = as_gradcli_error(exc).to_json()
    try:
        return dumps({"id": request_id(request), "error": err, "input_line": number})
    except RecursionError:
        return dumps({"id": None, "error": err, "input_line": number})


#: the fields of a request the lane answers; a request with any other goes the general way
_LANE_FIELDS = frozenset(("id", "expr", "inputs"))
#: programs (with their input names) the lane keeps, and shapes per program
_LANE_PROGRAMS, _LANE_SHAPES = 256, 16
#: the lane's entry for shapes whose plan it cannot answer from (bindings, a constant output)
_NOT_HERE = object()
#: the types of the items of a flat list the lane makes an array of itself (bool is not
#: one: ``type(True)`` is bool), as :func:`value_from_json` makes it
_NUMBER_TYPES = frozenset((float, int))


class _Lane:
    """The fast way through a stream's repeated requests (docs/commands.md, "batch").

    A request of only ``expr``, ``inputs`` and ``id``, whose program and input names the
    general way has answered before, with input shapes it has a plan for, is answered by
    replaying that plan on the inputs' arrays and writing the response straight from the
    arrays into text (:class:`_Answer`): no checks made again that the first answer made,
    no ``computation()`` per line, no result object, no dict of lists. The text is the
    general way's, ``dumps(evaluate(...).to_json())``, byte for byte, with the same
    gradients for ``--accumulate`` (the tests compare the two on every kind of request).
    Any other request, and any failure, is left to the general way (``answer`` is None),
    which answers or reports it as it always does. Its callers (:func:`run_batch`, the
    workers of ``--jobs`` and ``--scheduler``) have NumPy's floating-point reports off for
    the whole stream, so its replays do not turn them off again."""

    def __init__(self, plans: Plans, max_elements: int, grads: bool = True) -> None:
        self.plans = plans
        self.max_elements = max_elements
        self.grads = grads  # whether an answer carries its gradients (else None)
        #: (program, input names) -> {input shapes: _Answer or _NOT_HERE}
        self.known: dict[tuple[str, tuple[str, ...]], dict[Any, Any]] = {}

    def learn(self, request: Any, result: Result) -> None:
        """The general way answered ``request``: the lane may answer the next like it."""
        names = tuple(result.inputs)
        if (
            request.keys() <= _LANE_FIELDS
            and names == tuple(request["inputs"])  # the names were normalised as given
            and len(self.known) < _LANE_PROGRAMS
        ):
            self.known.setdefault((result.expr, names), {})

    def answer(self, request: Any) -> tuple[str, dict[str, Any] | None] | None:
        """The response and the gradients (None if not asked for), or None: the general
        way answers."""
        if type(request) is not dict:
            return None
        expr, inputs = request.get("expr"), request.get("inputs")
        if type(expr) is not str or type(inputs) is not dict:
            return None
        # expr and inputs are there: only id may be too (request.keys() <= _LANE_FIELDS)
        if len(request) != 2 and (len(request) != 3 or "id" not in request):
            return None
        by_shapes = self.known.get((expr, tuple(inputs)))
        if by_shapes is None:
            return None
        # the inputs' arrays, as value_from_json makes them: a flat list of numbers is made
        # here as value_from_json makes it, without the calls around that (the dtype's
        # check, the limit's), a third of its time
        arrays = []
        shapes = []
        limit = self.max_elements
        for name, value in inputs.items():
            array = None
            if (
                type(value) is list
                and 0 < len(value) <= limit
                and set(map(type, value)) <= _NUMBER_TYPES
            ):
                try:
                    array = _array(value, _FLOAT64)
                except OverflowError:  # an int beyond float64: value_from_json makes +-inf
                    array = None
            if array is None:
                try:
                    array = value_from_json(value, name=name, max_elements=limit)
                except Exception:  # the general way says what is wrong
                    return None
            arrays.append(array)
            shapes.append(array.shape)
        answer = by_shapes.get(tuple(shapes))
        if answer is None:
            values = dict(zip(inputs, arrays, strict=True))
            key = Plans.key(expr, tuple(inputs), "float64", 0, limit, True, values)
            recorded = self.plans.recorded(key)
            if recorded is None:
                return None  # not recorded yet: the general way records it
            if len(by_shapes) >= _LANE_SHAPES:
                by_shapes.clear()
            answer = by_shapes[tuple(shapes)] = _Answer.make(recorded, expr, values)
        if answer is _NOT_HERE:
            return None
        try:
            return answer.write(request.get("id"), arrays, self.grads)
        except Exception:  # a matrix singular for these values ...: reported the general way
            return None


_array = np.array
_FLOAT64 = np.dtype(np.float64)
#: arrays of at most this many elements are written by the response's format (_Answer)
_FORMAT_MAX = 64


class _Answer:
    """A response of one plan written from its arrays: the parts that do not change from
    one request to the next made once (with :func:`dumps`, as the general way writes them),
    the numbers of each request encoded as the general way encodes them.

    When every array of the response is a number or a short flat list, the whole response
    is one format made once, ``'{"id":%s,"expr":...,"value":[%r,%r,%r],...'``, filled with
    the request's floats: ``%r`` of a float is how json writes it, and a sum of them that
    is finite says that every one is (json writes the others as strings: those responses
    are written array by array, as :func:`numbers_text` does)."""

    __slots__ = ("format", "head", "kinds", "names", "recorded", "tail", "values")

    def __init__(
        self,
        recorded: _Recorded,
        head: str,
        names: list[str],
        values: list[str],
        format: str | None,
        shapes: list[tuple[int, ...]],
    ):
        self.recorded = recorded
        self.head = head  # from "expr" to the output's value
        self.names = names
        self.values = values  # per input: from its name to its value
        self.tail = '},"intermediates":{},"clip":null}'
        self.format = format  # the whole response after the id, or None
        #: the dtype and shape of each of the plan's outputs: the output, each gradient
        self.kinds = [(_FLOAT64, shape) for shape in shapes]

    @classmethod
    def make(cls, recorded: _Recorded, expr: str, values: dict[str, Any]) -> Any:
        """The writer of ``recorded``'s responses, or _NOT_HERE when the general way must
        write them: bindings, an output the plan does not make, gradients not asked of
        every input, text that :func:`dumps` would write in ASCII only."""
        if (
            recorded.bindings
            or not recorded.derived_value
            or recorded.wanted != list(values)
            or not _plain_text(expr, *values)
        ):
            return _NOT_HERE
        out = recorded.out_shape
        head = f',"expr":{dumps(expr)},"output":{{"shape":{dumps(list(out))},"value":'
        parts = [f'{dumps(n)}:{{"shape":{dumps(list(v.shape))},"value":' for n, v in values.items()]
        reduction = "null" if recorded.reduction is None else dumps(recorded.reduction)
        shapes = [out, *(v.shape for v in values.values())]
        format = None
        if all(len(s) <= 1 and math.prod(s) <= _FORMAT_MAX for s in shapes) and all(
            s is not None for s in recorded.plan.outputs
        ):
            f = _numbers_format
            pieces = [_text(head), f(out), '},"reduction":', _text(reduction), ',"inputs":{']
            for k, v in enumerate(values.values()):
                pieces += ["," if k else "", _text(parts[k]), f(v.shape)]
                pieces += [',"requires_grad":true,"grad":', f(v.shape), "}"]
            format = '{"id":%s' + "".join(pieces) + '},"intermediates":{},"clip":null}'
        return cls(recorded, head, list(values), parts, format, shapes)

    def write(
        self, id: Any, arrays: list[Any], with_grads: bool = True
    ) -> tuple[str, dict[str, Any] | None]:
        recorded = self.recorded
        outs = recorded.plan.run(arrays, quiet=True)
        if type(id) is int or id is None:
            id_text = "null" if id is None else repr(id)
        else:
            # a lone surrogate anywhere in the id makes dumps write the whole response in
            # ASCII (dumps(id) alone is then ASCII already, so the id itself is looked at)
            if not _plain_text(id if type(id) is str else json.dumps(id, ensure_ascii=False)):
                raise ValueError("written in ASCII by the general way")
            id_text = dumps(id)
        if self.format is not None:
            text = self._formatted(id_text, outs, arrays)
            if text is not None:
                grads = dict(zip(self.names, outs[1:], strict=True)) if with_grads else None
                return text, grads
        encode = numbers_text
        reduction = "null" if recorded.reduction is None else dumps(recorded.reduction)
        parts = ['{"id":', id_text, self.head, encode(outs[0]),
                 '},"reduction":', reduction, ',"inputs":{']  # fmt: skip
        grads = {}
        for k, name in enumerate(self.names):
            v, g = arrays[k], outs[1 + k]
            if g is None:
                g = NUMPY.zeros_like(v)
            grads[name] = g
            parts += [
                "," if k else "", self.values[k], encode(v),
                ',"requires_grad":true,"grad":', encode(g), "}",
            ]  # fmt: skip
        parts.append(self.tail)
        return "".join(parts), grads

    def _formatted(self, id_text: str, outs: list[Any], arrays: list[Any]) -> str | None:
        """The response by the format, or None when an output is not of float64 and its
        shape or a number is not finite. (The inputs are: the lane made them so.)"""
        if list(map(_DTYPE_SHAPE, outs)) != self.kinds:  # dtypes compared by identity first
            return None
        value = outs[0].tolist()
        numbers: list[Any] = value if self.kinds[0][1] else [value]
        for k, v in enumerate(arrays, 1):  # (zip(strict=True) costs 0.1 µs a call)
            if v.ndim:
                numbers += v.tolist()
                numbers += outs[k].tolist()
            else:
                numbers.append(v.tolist())
                numbers.append(outs[k].tolist())
        total = sum(numbers)
        if total - total != 0.0:  # an inf or a nan among them (or a sum beyond float64)
            return None
        return self.format % (id_text, *numbers)  # type: ignore[operator]


_DTYPE_SHAPE = operator.attrgetter("dtype", "shape")


def _text(text: str) -> str:
    """``text`` in a format, as it is."""
    return text.replace("%", "%%")


def _numbers_format(shape: tuple[int, ...]) -> str:
    """The format of an array's numbers: ``%r`` for a number, ``[%r,...]`` for a list."""
    return "%r" if not shape else "[" + ",".join(["%r"] * shape[0]) + "]"


def _plain_text(*texts: str) -> bool:
    """Whether :func:`dumps` writes these as they are (no lone surrogate: it would write
    the whole response in ASCII)."""
    try:
        for t in texts:
            t.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decode(raw: bytes, number: int) -> str:
    try:  # the first line may begin with an editor's byte-order mark
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            msg("line {number} is not UTF-8 text (byte {start})", number=number, start=e.start + 1)
        ) from None


def _accumulate(totals: dict[str, Any], grads: dict[str, Any]) -> None:
    """Add this request's gradients into the running sums (checked first, added all-or-none),
    as ``backward()`` per request without ``zero_grad()`` does."""
    for name, g in grads.items():
        if g is not None and name in totals and totals[name].shape != g.shape:
            raise ShapeError(
                msg(
                    "--accumulate: the gradient of {name} has shape {shape}, but earlier "
                    "requests gave shape {shape2}",
                    name=name,
                    shape=g.shape,
                    shape2=totals[name].shape,
                )
            )
    for name, g in grads.items():
        if g is None:
            continue
        if name in totals:
            totals[name] = totals[name] + g
        else:
            totals[name] = g.copy()


def _progress(total: int | None) -> tuple[Any, Any] | None:
    """A progress bar of the bytes read, on stderr (the CLI asks for it when reading a file
    with stderr a terminal and stdout not); the responses still go to stdout
    (:func:`streams.progress`)."""
    if total is None:
        return None
    from rich.progress import BarColumn, DownloadColumn, TimeElapsedColumn, TimeRemainingColumn

    from .streams import progress

    display = progress(BarColumn(), DownloadColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    return display, display.add_task("batch", total=total)
