"""Reading a command's program and inputs from the command line, files and stdin.

Here are EXPR or ``-f FILE|-``, the ``NAME=VALUE`` arguments (``x=@-`` among them),
``--inputs FILE|-``, the JSON request of ``eval -`` and the NDJSON stream of ``batch``; of
these, standard input is read by one at most (docs/cli.md, "Files"). :mod:`gradcli.io`
turns the text into values. This is a module of its own, not part of :mod:`gradcli.io`,
because a VALUE may be a constant expression: reading one needs the evaluator
(:mod:`gradcli.api`), which :mod:`gradcli.io` must not depend on. The CLI imports it
inside its commands only, so ``gradcli --help`` loads neither NumPy nor the engine.

Every bad input is an :class:`~gradcli.errors.InputError`, and input over a limit a
:class:`~gradcli.errors.LimitError`, whose messages name the flag that raises the limit.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import IO, Any

from .api import constant_value
from .errors import GradcliError, InputError, LimitError
from .i18n import msg
from .io import (
    is_zarr,
    load_npz_inputs,
    parse_cli_value,
    parse_json_text,
    quote_short,
    read_at_most,
    read_file_text,
    read_inputs_object,
    read_npz_arrays,
    shorten,
    value_from_bytes,
)
from .options import DEFAULT_MAX_STDIN_BYTES

__all__ = [
    "open_requests",
    "read_program_and_inputs",
    "read_stdin",
    "read_stdin_bytes",
    "read_value",
]

#: The stdin this process has read, and what read it (``-f -``, ``--inputs -``, ``x=@-``,
#: ``eval -``, ``batch``): standard input holds one document, so a second reader is an
#: input error that names the first (docs/cli.md, "Files"). The stream is kept, not its
#: id: typer's test runner gives each run a stdin of its own, and ids are reused.
_stdin_reader: list[tuple[object, str]] = []

#: how ``read_value`` reads a file: never a chunk at a time, always, or when it must
NEVER, ALWAYS, AUTO = "never", "always", "auto"


def _stdin(what: str) -> IO[bytes]:
    """Standard input as bytes, for ``what``. A closed one (``<&-``: Python's ``sys.stdin``
    is None) is an input error: the user asked for stdin and gave none. So is a stdin that
    something else of the same command line has read already."""
    if sys.stdin is None:
        raise InputError(msg("standard input is closed: nothing to read"))
    for stream, reader in _stdin_reader:
        if stream is sys.stdin:
            raise InputError(
                msg(
                    "standard input is read once, and {reader} reads it: {what} cannot read "
                    "it too (give one of them a file)",
                    reader=reader,
                    what=what,
                )
            )
    _stdin_reader[:] = [(sys.stdin, what)]
    return sys.stdin.buffer


def read_stdin_bytes(max_bytes: int, what: str = "eval -") -> bytes:
    """All of standard input, for ``what``; more than ``max_bytes`` bytes is a LimitError."""
    try:
        data = read_at_most(_stdin(what), max_bytes)
    except OSError as e:  # e.g. fd 0 closed after start-up, or a directory
        raise InputError(
            msg("cannot read standard input: {value}", value=e.strerror or e)
        ) from None
    if data is None:
        raise LimitError(
            msg(
                "standard input is longer than {max_bytes:,} bytes (raise it with "
                "--max-stdin-bytes)",
                max_bytes=max_bytes,
            )
        )
    return data


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            msg("standard input is not UTF-8 text (byte {start})", start=e.start)
        ) from None


def read_stdin(max_bytes: int, what: str = "eval -") -> str:
    """All of standard input as text, for ``what``; more than ``max_bytes`` bytes is a
    LimitError."""
    return _utf8(read_stdin_bytes(max_bytes, what))


def _read_program(
    expr: str | None, values: list[str] | None, file: Path | None, max_chars: int
) -> tuple[str, list[str]]:
    """The program text and the NAME=VALUE arguments (with -f, EXPR is the first value)."""
    args = list(values or [])
    if file is not None:
        if expr is not None:
            args.insert(0, expr)
        from_stdin = str(file) == "-"  # -f -: the program is standard input
        shown = "standard input (-f -)" if from_stdin else str(file)
        try:
            # a character is at most 4 bytes of UTF-8
            if from_stdin:
                data = read_at_most(_stdin("-f -"), 4 * max_chars)
            else:
                with file.open("rb") as f:
                    data = read_at_most(f, 4 * max_chars)
            if data is None:
                raise LimitError(
                    msg(
                        "{shown}: the program is longer than {max_chars:,} characters (raise it "
                        "with --max-program-chars)",
                        shown=shown,
                        max_chars=max_chars,
                    )
                )
            return data.decode("utf-8-sig"), args  # an editor's byte-order mark is no name
        except UnicodeDecodeError as e:
            raise InputError(
                msg("{shown}: not UTF-8 text (byte {start})", shown=shown, start=e.start)
            ) from None
        except OSError as e:
            what = (
                msg("standard input") if from_stdin else msg("the program file {file}", file=file)
            )
            raise InputError(
                msg("cannot read {what}: {value}", what=what, value=e.strerror or e)
            ) from None
    if expr is None:
        raise InputError(msg("missing EXPR (or -f FILE)"))
    return expr, args


def open_requests(source: str) -> tuple[IO[bytes], int | None]:
    """The request stream of ``batch FILE|-`` and its size in bytes (None for stdin, or
    when the size cannot be known)."""
    if source == "-":
        return _stdin("batch"), None
    try:
        stream = open(source, "rb")  # noqa: SIM115 - closed when the process ends
    except OSError as e:
        raise InputError(
            msg(
                "cannot read {quote_short}: {value}",
                quote_short=quote_short(source, 200),
                value=e.strerror or e,
            )
        ) from None
    try:
        return stream, os.fstat(stream.fileno()).st_size
    except OSError:
        return stream, None


def read_value(
    text: str,
    name: str,
    *,
    dtype: str,
    seed: int,
    max_elements: int,
    max_program_chars: int,
    max_stdin_bytes: int = DEFAULT_MAX_STDIN_BYTES,
    chunked: str = NEVER,
    chunk_bytes: int | None = None,
) -> Any:
    """A VALUE of the command line: JSON, @file, @- (standard input, ``@-:KEY`` for an
    array of an ``.npz`` on stdin; docs/cli.md, "Files"), or a constant expression.

    ``chunked``: whether a file is read lazily, a chunk at a time, for the Dask backend
    (docs/dask.md, "Files"): ``never``; ``always`` an ``.npy`` file or a Zarr store; ``auto``
    a Zarr store, and an ``.npy`` file larger than :func:`big_file_bytes`."""
    at = text.strip()
    if at == "@-" or at.startswith("@-:"):
        key = at[3:] if at.startswith("@-:") else None
        if key == "":
            raise InputError(msg("{name}: no array name after '@-:'", name=name))
        data = read_stdin_bytes(max_stdin_bytes, f"{shorten(name)}=@-")
        return value_from_bytes(data, name=name, key=key, dtype=dtype, max_elements=max_elements)
    if chunked != NEVER and at.startswith("@"):
        value = _chunked_file(at[1:], name, chunked, dtype, max_elements, chunk_bytes)
        if value is not None:
            return value
    elif at.startswith("@") and is_zarr(at[1:]):
        raise InputError(
            msg(
                "{name}: {quote_short} is a Zarr store, read a chunk at a time by the "
                "Dask backend: leave out --backend numpy",
                name=name,
                quote_short=quote_short(at[1:], 200),
            )
        )
    value = parse_cli_value(text, name=name, dtype=dtype, max_elements=max_elements)
    if value is not None:
        return value
    try:
        return constant_value(
            text,
            dtype=dtype,
            seed=seed,
            max_elements=max_elements,
            max_program_chars=max_program_chars,
        )
    except GradcliError as e:
        if e.kind not in ("parse", "name"):
            raise
        raise InputError(
            msg(
                "bad value for {name}: {text!r} is not JSON, an @file or a constant "
                "expression ({message})",
                name=name,
                text=text[:60],
                message=e.message,
            )
        ) from None


def big_file_bytes() -> int:
    """An ``.npy`` input larger than this is read a chunk at a time unless ``--backend
    numpy`` is given: a quarter of the machine's memory (8 GiB where it cannot be told)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (AttributeError, ValueError, OSError):
        return 8 * 2**30


def _chunked_file(
    path: str, name: str, chunked: str, dtype: str, max_elements: int, chunk_bytes: int | None
) -> Any:
    """The lazy array of ``@path`` when it is read a chunk at a time, else None."""
    zarr = is_zarr(path)
    if not zarr:
        if not path.lower().endswith(".npy"):
            return None
        if chunked == AUTO:
            try:
                if os.path.getsize(os.path.expanduser(path)) <= big_file_bytes():
                    return None
            except OSError:
                return None  # read as usual, which says what is wrong
    from .lazy import require_dask

    backend = require_dask()

    def chunks_for(shape: tuple[int, ...], dt: Any) -> Any:
        with backend.chunk_size(chunk_bytes):
            return backend.DASK.chunks_for(shape, dt)

    from .io.chunked import lazy_npy, lazy_zarr

    read = lazy_zarr if zarr else lazy_npy
    return read(path, name=name, dtype=dtype, max_elements=max_elements, chunks_for=chunks_for)


def _read_inputs_file(
    inputs_file: str, *, dtype: str, max_elements: int, max_stdin_bytes: int
) -> dict[str, Any]:
    """The values of ``--inputs FILE|-``: a JSON object of name -> value, or an ``.npz``
    archive, every array by its key (docs/cli.md, "Files"). On stdin (``-``), an archive is
    told by its first bytes."""
    if inputs_file == "-":
        data = read_stdin_bytes(max_stdin_bytes, "--inputs -")
        if data.startswith(b"PK"):  # a zip archive: an .npz
            return read_npz_arrays(
                io.BytesIO(data),
                where="--inputs - (standard input)",
                dtype=dtype,
                max_elements=max_elements,
            )
        text = _utf8(data)
    elif inputs_file.lower().endswith(".npz"):
        return load_npz_inputs(inputs_file, dtype=dtype, max_elements=max_elements)
    else:
        text = read_file_text(
            inputs_file,
            what=f"--inputs file {quote_short(inputs_file, 200)}",
            max_elements=max_elements,
        )
    obj = parse_json_text(text, what=f"--inputs {shorten(inputs_file, 200)}")
    return read_inputs_object(obj, dtype=dtype, max_elements=max_elements)


def _read_inputs(
    args: list[str],
    inputs_file: str | None,
    *,
    dtype: str,
    seed: int,
    max_elements: int,
    max_program_chars: int,
    max_stdin_bytes: int,
    chunked: str = NEVER,
    chunk_bytes: int | None = None,
) -> dict[str, Any]:
    """The ``--inputs`` object, then each NAME=VALUE of ``args``; a name given twice is an
    error, even across the two. ``chunked``, ``chunk_bytes``: as :func:`read_value`."""
    values: dict[str, Any] = {}
    if inputs_file is not None:
        values.update(
            _read_inputs_file(
                inputs_file, dtype=dtype, max_elements=max_elements, max_stdin_bytes=max_stdin_bytes
            )
        )
    for arg in args:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(msg("expected NAME=VALUE, got {arg!r}", arg=arg[:60]))
        if not name.isidentifier():
            raise InputError(
                msg("{name!r} is not a valid input name (an identifier)", name=name[:40])
            )
        if name in values:
            raise InputError(msg("the input `{name}` is given twice", name=shorten(name)))
        values[name] = read_value(
            text,
            name,
            dtype=dtype,
            seed=seed,
            max_elements=max_elements,
            max_program_chars=max_program_chars,
            max_stdin_bytes=max_stdin_bytes,
            chunked=chunked,
            chunk_bytes=chunk_bytes,
        )
    return values


def read_program_and_inputs(
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs_file: str | None,
    *,
    dtype: str,
    seed: int,
    max_elements: int,
    max_program_chars: int,
    max_stdin_bytes: int,
    chunked: str = NEVER,
    chunk_bytes: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """A command's program (EXPR, or ``-f FILE``) and its inputs by name (``--inputs`` and
    the NAME=VALUE arguments ``values``; with ``-f``, EXPR is the first of them).
    ``chunked``, ``chunk_bytes``: how files are read, as :func:`read_value` reads them."""
    text, args = _read_program(expr, values, file, max_program_chars)
    inputs = _read_inputs(
        args,
        inputs_file,
        dtype=dtype,
        seed=seed,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
        max_stdin_bytes=max_stdin_bytes,
        chunked=chunked,
        chunk_bytes=chunk_bytes,
    )
    return text, inputs
