"""Bounded reads: files and streams read no further than an element limit allows.

A text file of values (``.json``/``.csv``/``.txt``, ``--inputs FILE``) is read up to
:func:`max_file_bytes` of ``--max-elements`` (:data:`FILE_BYTES_PER_ELEMENT` a number plus
:data:`FILE_BYTES_SLACK`; docs/cli.md, "Files"): a longer one is a
:class:`~gradcli.errors.LimitError`, refused before anything past the bound is read, and
memory follows the data, never the limit. An ``.npy``/``.npz`` file that is a device or a
pipe is read into memory under the same bound. Also here: the words an ``OSError`` is told
in (``no such file``, ``permission denied``).
"""

from __future__ import annotations

import codecs
import io
import os
import stat
from typing import IO

from ..errors import InputError, LimitError
from ..i18n import msg

#: How many bytes of a ``.json``/``.csv``/``.txt`` file (``@path``, ``--inputs FILE``) are
#: read per element of ``--max-elements``: a float64 written in full takes at most 24
#: characters as ``json.dumps``/``repr`` write it (``-2.2250738585072014e-308``) and 26 as
#: ``np.savetxt``'s default ``%.18e`` does; with its separator (``", "``) that is 26 to 28,
#: and ``json.dump(indent=2)`` of a 3-D array adds six spaces of indentation: 32. A file
#: holding ``max_elements`` numbers written any of these ways fits; anything longer could
#: only be more numbers than the limit (or not numbers at all), so it is refused unread.
FILE_BYTES_PER_ELEMENT = 32

#: Bytes allowed on top of the per-element figure: room for brackets, comments, a header
#: line and a byte-order mark in files of a few numbers (``--max-elements 1``).
FILE_BYTES_SLACK = 2**16

#: The element limit a file read is bounded by when the caller gives none (the CLI's default).
_DEFAULT_MAX_ELEMENTS = 10**8


def _os_cause(e: OSError) -> str:
    if isinstance(e, FileNotFoundError):
        return msg("no such file")
    if isinstance(e, IsADirectoryError):
        return msg("it is a directory")
    if isinstance(e, PermissionError):
        return msg("permission denied")
    return e.strerror or str(e)


def unreadable(name: str, shown: str, e: OSError) -> InputError:
    """The error for input ``name``'s file (``shown`` as the user wrote it) that the
    operating system would not let be read."""
    return InputError(
        msg(
            "{name}: cannot read file {shown}: {os_cause}",
            name=name,
            shown=shown,
            os_cause=_os_cause(e),
        )
    )


def read_at_most(stream: IO[bytes], limit: int) -> bytes | None:
    """All of ``stream``, or None when it holds more than ``limit`` bytes. Read in pieces:
    memory follows the data, not the limit (``read(limit)`` would allocate the limit)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(2**20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def max_file_bytes(max_elements: int | None) -> int:
    """The most bytes read of a text file of values for an element limit (docs/cli.md,
    "Files"): :data:`FILE_BYTES_PER_ELEMENT` a number, plus
    :data:`FILE_BYTES_SLACK`. ``None`` is the CLI's default limit, 10^8 elements."""
    elements = _DEFAULT_MAX_ELEMENTS if max_elements is None else max_elements
    return elements * FILE_BYTES_PER_ELEMENT + FILE_BYTES_SLACK


def _read_bounded_text(f: IO[bytes], limit: int) -> tuple[str | None, str | None]:
    """``(text, None)``, ``(None, why not text)``, or ``(None, None)`` when ``f`` holds more
    than ``limit`` bytes.

    Decoded as it is read; once a piece is not UTF-8 or holds a NUL byte (which no JSON or
    CSV text has: ``/dev/zero``, a sparse file) nothing more is kept, but reading goes on to
    the end or the limit, so memory follows the text, never the garbage."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pieces: list[str] = []
    why: str | None = None
    size = 0
    while size <= limit:
        chunk = f.read(min(2**20, limit + 1 - size))
        if why is None:
            pending = len(decoder.getstate()[0])
            try:
                piece = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                why = msg(
                    "is not UTF-8 text (byte {start}: {reason})",
                    start=size - pending + e.start,
                    reason=e.reason,
                )
            else:
                nul = piece.find("\0")
                if nul >= 0:
                    at = size - pending + len(piece[:nul].encode("utf-8"))
                    why = msg("is not text (a NUL byte at byte {at})", at=at)
                else:
                    pieces.append(piece)
            if why is not None:
                pieces.clear()
        if not chunk:
            if why is not None:
                return None, why
            text = "".join(pieces)
            return (text[1:] if text.startswith("\ufeff") else text), None  # an editor's BOM
        size += len(chunk)
    return None, None


def read_file_text(path: str, *, what: str, max_elements: int | None, prefix: str = "") -> str:
    """The text of a ``.json``/``.csv``/``.txt`` file or of ``--inputs FILE``, bounded.

    A file longer than :func:`max_file_bytes` is a :class:`LimitError`, refused before
    anything past the bound is read: a regular file by its size, without reading it; a
    device or a pipe (``/dev/zero``) after ``bound + 1`` bytes. A file that cannot be read,
    is not UTF-8 or holds a NUL byte is an :class:`InputError`. Messages read ``{prefix}cannot
    read {what}: ...``, ``what`` naming the file (``file "x.csv"``). A UTF-8 byte-order mark
    is dropped.
    """
    limit = max_file_bytes(max_elements)
    text: str | None = None
    why: str | None = None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not (stat.S_ISREG(st.st_mode) and st.st_size > limit):
                text, why = _read_bounded_text(f, limit)
    except OSError as e:
        raise InputError(
            msg(
                "{prefix}cannot read {what}: {os_cause}",
                prefix=prefix,
                what=what,
                os_cause=_os_cause(e),
            )
        ) from None
    if why is not None:
        raise InputError(msg("{prefix}{what} {why}", prefix=prefix, what=what, why=why))
    if text is None:
        raise _too_long(prefix, what, limit, max_elements)
    return text


def _too_long(prefix: str, what: str, limit: int, max_elements: int | None) -> LimitError:
    elements = _DEFAULT_MAX_ELEMENTS if max_elements is None else max_elements
    return LimitError(
        msg(
            "{prefix}{what} is longer than {limit:,} bytes, the most read for "
            "--max-elements {elements:,} ({FILE_BYTES_PER_ELEMENT} bytes a number); "
            "raise --max-elements to read it",
            prefix=prefix,
            what=what,
            limit=limit,
            elements=elements,
            FILE_BYTES_PER_ELEMENT=FILE_BYTES_PER_ELEMENT,
        )
    )


def _binary_file(
    path: str, *, what: str, prefix: str, max_elements: int | None
) -> tuple[IO[bytes], int]:
    """An ``.npy``/``.npz`` file open for reading, seekable, and its size in bytes.

    A regular file is read where it lies. A device or a pipe (``<(...)``, ``/dev/stdin``)
    can neither seek nor tell its size: at most :func:`max_file_bytes` of it is read into
    memory, and more is a :class:`LimitError` (docs/cli.md, "Files"). OSError goes on to the
    caller.
    """
    f = open(path, "rb")  # noqa: SIM115 - returned open, or closed below
    try:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode):
            return f, st.st_size
        limit = max_file_bytes(max_elements)
        data = read_at_most(f, limit)
    except BaseException:
        f.close()
        raise
    f.close()
    if data is None:
        raise _too_long(prefix, what, limit, max_elements)
    return io.BytesIO(data), len(data)
