"""``gradcli batch``: NDJSON requests in, one JSON response per line out.

Nothing is kept per line (memory stays flat over millions of lines) except, with
``accumulate``, one running gradient per input name. Repeated expression texts are parsed
once (``language.compile_program`` caches them). A line over the size limit is skipped
without being held in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Any

from .api import as_gradcli_error, evaluate, request_id, request_kwargs
from .compiled import Plans
from .errors import InputError, LimitError, ShapeError
from .io import dumps, json_array, parse_json_text
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
) -> int:
    """Answer every request of ``stream`` through ``write``; returns the number that failed."""
    totals: dict[str, Any] = {}
    ok = failed = 0
    # a stream's requests are mostly a few programs: each is planned once per input shapes
    # (when it comes a second time) and replayed after (gradcli.compiled), with the numbers
    # of a fresh evaluation; a program seen once costs no recording
    plans = Plans(first=False)
    progress = _progress(progress_total)
    try:
        for number, raw, size in read_lines(stream, max_line_bytes):
            if progress is not None:
                progress[0].advance(progress[1], size)
            if raw is not None and not raw.strip():
                continue  # blank lines are allowed between requests
            request: Any = None
            try:
                if raw is None:
                    raise LimitError(
                        f"line {number} is longer than {max_line_bytes:,} bytes "
                        "(raise it with --max-line-bytes)"
                    )
                text = _decode(raw, number).rstrip("\r\n")  # positions are within the line
                request = parse_json_text(text, what=f"line {number}")
                result = evaluate(
                    **request_kwargs(request),
                    max_elements=max_elements,
                    max_program_chars=max_program_chars,
                    plans=plans,
                )
                if accumulate:
                    _accumulate(totals, result.grads)
                response = dumps(result.to_json())
                ok += 1
            except Exception as exc:  # one bad line never stops the stream
                if debug:
                    raise
                err = as_gradcli_error(exc)
                response = dumps(
                    {"id": request_id(request), "error": err.to_json(), "input_line": number}
                )
                failed += 1
            # outside the try: output that cannot be written stops the stream (it is not the
            # line's fault, and no later answer could be written either)
            write(response)
    finally:
        if progress is not None:
            progress[0].stop()
    if accumulate:
        summary = {name: json_array(g) for name, g in totals.items()}
        write(dumps({"accumulated": summary, "requests": ok, "failed": failed}))
    return failed


def _decode(raw: bytes, number: int) -> str:
    try:  # the first line may begin with an editor's byte-order mark
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"line {number} is not UTF-8 text (byte {e.start + 1})") from None


def _accumulate(totals: dict[str, Any], grads: dict[str, Any]) -> None:
    """Add this request's gradients into the running sums (checked first, added all-or-none),
    as ``backward()`` per request without ``zero_grad()`` does."""
    for name, g in grads.items():
        if g is not None and name in totals and totals[name].shape != g.shape:
            raise ShapeError(
                f"--accumulate: the gradient of {name} has shape {g.shape}, but earlier "
                f"requests gave shape {totals[name].shape}"
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
