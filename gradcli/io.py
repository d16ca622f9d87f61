"""Values in and out: JSON documents, command-line values, files (docs/cli.md, "Files").

Everything a user hands gradcli as a number passes through here, and every bad value becomes
an :class:`~gradcli.errors.InputError` whose message names the input and the cause. Output
goes the other way: arrays become plain Python lists of floats and non-finite numbers become
the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that every response is strict JSON. Where
the text comes from (EXPR, ``-f``, ``--inputs``, stdin) is :mod:`gradcli.inputs`.

Nothing here uses ``eval``, ``exec`` or pickle; ``.npy`` files are read with
``allow_pickle=False`` and their header is checked before any data is read.
"""

from __future__ import annotations

import codecs
import errno
import io
import json
import math
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import numpy as np

from .errors import InputError, LimitError, shorten

__all__ = [
    "FILE_BYTES_PER_ELEMENT",
    "FILE_BYTES_SLACK",
    "MAX_DIMS",
    "SAVE_EXTENSIONS",
    "SUPPORTED_EXTENSIONS",
    "DTypeArg",
    "arrays_to_save",
    "check_save_path",
    "dumps",
    "json_array",
    "load_file_value",
    "load_npz_inputs",
    "max_file_bytes",
    "parse_cli_value",
    "parse_json_text",
    "quote_short",
    "read_at_most",
    "read_file_text",
    "read_inputs_object",
    "read_npy",
    "read_npz_arrays",
    "save_npz",
    "save_result",
    "shorten",
    "value_from_bytes",
    "value_from_json",
]

#: NumPy's own limit on the number of dimensions; deeper JSON nesting is refused.
MAX_DIMS = 64

#: File extensions ``@path`` understands (compared case-insensitively); an ``.npz`` path may
#: name one of its arrays: ``@grads.npz:grad_a`` (docs/cli.md, "Files").
SUPPORTED_EXTENSIONS = (".npy", ".npz", ".json", ".csv", ".tsv", ".txt")

#: The formats ``--save`` writes, chosen by the file's extension (docs/cli.md, "Files").
SAVE_EXTENSIONS = (".npz", ".json", ".npy")

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

#: What the ``dtype`` parameters accept: "float64", "float32", np.float32, np.dtype(...).
DTypeArg = np.dtype[Any] | str | type

# Accepted spellings of the non-finite numbers in JSON strings and CSV cells (lower-cased).
_NONFINITE = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}

# Characters that json.dumps(ensure_ascii=False) leaves raw but that some line readers
# (str.splitlines, JavaScript) treat as line breaks: escaped so one response is one line.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


# --------------------------------------------------------------------------- output


def json_array(a: np.ndarray | None) -> Any:
    """An array as plain JSON-able Python: ``None``, a float, or nested lists of floats.

    Non-finite numbers become ``"nan"``, ``"inf"``, ``"-inf"`` (strict JSON has no such
    numbers). Integer and boolean arrays come out as floats, like every gradcli value.
    """
    if a is None:
        return None
    arr = np.asarray(a)
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f":
        raise TypeError(f"json_array needs a real numeric array, got dtype {arr.dtype}")
    if arr.ndim <= 1 and arr.size <= 32:
        # a small vector or a number: its floats checked in Python, no NumPy call
        out = arr.tolist()
        if all(map(math.isfinite, out)) if arr.ndim else math.isfinite(out):
            return out
    elif np.isfinite(arr).all():
        # tolist() is the fast path: C speed, Python floats out (also for float32).
        return arr.tolist()
    # Only here do we pay for per-element objects: an object array keeps the nesting that
    # tolist() builds, and the masks replace the non-finite entries without a Python walk.
    out = arr.astype(object)
    out[np.isnan(arr)] = "nan"
    out[np.isposinf(arr)] = "inf"
    out[np.isneginf(arr)] = "-inf"
    return out.tolist()


def _nonfinite_str(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _json_default(o: Any) -> Any:
    """``json.dumps`` hook for the NumPy values that may stray into a response."""
    if isinstance(o, np.ndarray):
        return json_array(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        x = float(o)
        return x if math.isfinite(x) else _nonfinite_str(x)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _sanitize(obj: Any) -> Any:
    """A copy of ``obj`` with every non-finite Python float replaced by its string."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else _nonfinite_str(obj)
    if isinstance(obj, dict):
        return {_sanitize(k): _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    return obj


def _encoder(ascii_only: bool) -> json.JSONEncoder:
    return json.JSONEncoder(
        allow_nan=False,
        ensure_ascii=ascii_only,
        separators=(",", ":"),
        default=_json_default,
    )


#: by ensure_ascii (see _DECODER)
_ENCODERS = {False: _encoder(False), True: _encoder(True)}


def dumps(obj: Any) -> str:
    """Compact strict JSON on one line; stray nan/inf floats become ``"nan"``/``"inf"``/``"-inf"``.

    NumPy arrays and scalars are accepted too (through :func:`json_array`).
    """

    def encode(o: Any, ascii_only: bool = False) -> str:
        return _ENCODERS[ascii_only].encode(o)

    try:
        text = encode(obj)
    except ValueError:
        # Only a non-finite float gets here (allow_nan=False); the common case never walks.
        obj = _sanitize(obj)
        text = encode(obj)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (undecodable bytes in argv) cannot be written as UTF-8: escape them.
        text = encode(obj, ascii_only=True)
    for raw, escaped in _LINE_BREAKS.items():
        if raw in text:
            text = text.replace(raw, escaped)
    return text


# --------------------------------------------------------------------------- JSON input


class _DuplicateKeyError(Exception):
    pass


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _parse_int(text: str) -> int | float:
    # Python refuses int() of more than 4300 digits (a ValueError, not a JSONDecodeError);
    # such a number is still a number, so it becomes a float (inf when out of range).
    try:
        n = int(text)
    except ValueError:
        return float(text)
    if n == 0 and text.startswith("-"):
        return -0.0  # JSON's -0 is negative zero, as in NumPy and JavaScript (int has no -0)
    return n


def _loads(text: str) -> Any:
    if text.startswith("\ufeff"):  # json.loads's own error for a byte-order mark
        return json.loads(text, parse_int=_parse_int, object_pairs_hook=_pairs_no_duplicates)
    return _DECODER.decode(text)


#: made once: json.loads and json.dumps with options make a new one on every call
_DECODER = json.JSONDecoder(parse_int=_parse_int, object_pairs_hook=_pairs_no_duplicates)


def parse_json_text(text: str, *, what: str) -> Any:
    """``json.loads`` with the user in mind: every failure is an :class:`InputError`.

    Accepts the tokens ``NaN``, ``Infinity`` and ``-Infinity``. A syntax error reports line
    and column; nesting too deep for the parser and duplicate object keys (which ``json``
    would silently resolve to the last one) are refused. ``what`` names the document in the
    message, e.g. ``"value of a"`` or ``"request"``.
    """
    try:
        return _loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{what}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}",
            line=e.lineno,
            column=e.colno,
        ) from None
    except RecursionError:
        raise InputError(f"{what}: JSON is nested too deeply") from None
    except _DuplicateKeyError as e:
        raise InputError(
            f"{what}: duplicate key {_short(str(e.args[0]))} in a JSON object"
        ) from None


# --------------------------------------------------------------------------- values


_FLOAT64 = np.dtype(np.float64)


def _float_dtype(dtype: DTypeArg) -> np.dtype[Any]:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InputError(f"unknown dtype {dtype!r}; use float64 or float32") from None
    if dt.kind != "f":
        raise InputError(f"unsupported dtype {dt.name}; use float64 or float32")
    return dt


def quote_short(text: str, limit: int = 40) -> str:
    """``text`` shortened (:func:`shorten`) and quoted as a JSON string for a message."""
    return json.dumps(shorten(text, limit), ensure_ascii=False)


_short = quote_short


def _describe(x: Any) -> str:
    """What a bad JSON item is, in JSON's words (never repr: it may be nested very deeply)."""
    if x is None:
        return "null"
    if x is np.ma.masked:
        return "masked (numpy.ma.masked)"
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, str):
        return f"the string {_short(x)}"
    if isinstance(x, dict):
        return "an object"
    if _is_seq(x):
        return f"a list of {len(x)}"
    if isinstance(x, (int, float, np.integer, np.floating)):
        return "a number"
    return f"a {type(x).__name__}"


def _is_seq(x: Any) -> bool:
    if isinstance(x, (list, tuple)):
        return True
    return isinstance(x, np.ndarray) and x.ndim > 0


def _where(index: int, shape: Sequence[int]) -> str:
    """The position of the ``index``-th item of a level of a (so far regular) nesting."""
    if not shape:
        return "the value"
    idx = np.unravel_index(index, tuple(shape)) if math.prod(shape) else (0,) * len(shape)
    return "element [" + ", ".join(str(int(i)) for i in idx) + "]"


def _scalar(x: Any) -> float | None:
    """``x`` as a float, or ``None`` when it is not a number gradcli accepts."""
    if isinstance(x, (bool, np.bool_)):
        return None  # true is not a number, even though Python says bool is an int
    if isinstance(x, (int, np.integer)):
        try:
            return float(x)
        except OverflowError:
            return math.inf if x > 0 else -math.inf
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, str):
        return _NONFINITE.get(x.lower())
    return None


def _bad_scalar(name: str, where: str, x: Any) -> InputError:
    hint = ""
    if isinstance(x, str):
        hint = ' (the only strings accepted are "nan", "inf" and "-inf")'
    return InputError(f"bad value for {name}: {where} is {_describe(x)}, not a number{hint}")


def _check_limit(name: str, shape: Sequence[int], max_elements: int | None) -> None:
    if max_elements is not None:
        size = math.prod(shape)
        if size > max_elements:
            raise LimitError(
                f"{name} has {size} elements (shape {tuple(shape)}), "
                f"more than the limit of {max_elements}"
            )


def _from_ndarray(
    arr: np.ndarray, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    if isinstance(arr, np.ma.MaskedArray):
        # NumPy's asarray() drops a mask without a word, and there is no one right value
        # for a masked element (filled() puts 1e+20 in a float array): the caller chooses.
        if np.ma.is_masked(arr):
            count = int(np.ma.count_masked(arr))
            raise InputError(
                f"bad value for {name}: a masked array with {count} masked "
                f"element{'s' if count != 1 else ''}; gradcli has no masks: pass "
                f"m.filled(value) to choose the masked elements' value, or m.data to ignore "
                f"the mask"
            )
        arr = np.ma.getdata(arr)  # nothing is masked: the data is the whole value
    if arr.dtype.kind not in "iuf":
        raise InputError(f"bad value for {name}: an array of dtype {arr.dtype} is not numeric")
    _check_limit(name, arr.shape, max_elements)
    with np.errstate(over="ignore"):
        # A copy: the caller's array must not change when gradcli's does (and vice versa).
        return np.array(arr, dtype=dt, order="C", copy=True)


def value_from_json(
    obj: Any,
    *,
    name: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> np.ndarray:
    """A value from a JSON document: a number, nested lists of numbers, or a non-finite string.

    Walks the nesting level by level (no recursion, at most :data:`MAX_DIMS` levels), so any
    depth gives a clean :class:`InputError`. Rejects booleans, ``null``, objects, other strings
    and ragged lists, saying where. ``[]`` is a shape-``(0,)`` array. Tuples and NumPy arrays
    (from the Python API) are taken like lists. Returns a C-contiguous array of ``dtype``;
    numbers beyond the dtype's range become ``inf`` as in NumPy (the caller warns about
    non-finite values). ``max_elements`` raises :class:`LimitError` above it.
    """
    dt = _float_dtype(dtype)
    if isinstance(obj, np.ndarray):
        return _from_ndarray(obj, name, dt, max_elements)
    if type(obj) is list and obj and dt is _FLOAT64 and set(map(type, obj)) <= {float, int}:
        # the common case, a flat list of numbers, without the walk below (an empty list
        # and one of lists go the long way)
        _check_limit(name, (len(obj),), max_elements)
        try:
            return np.array(obj, dtype=np.float64)
        except OverflowError:  # an int beyond float64: the walk makes it +-inf
            pass

    shape: list[int] = []
    level: list[Any] = [obj]
    while level:
        head = level[0]
        if not _is_seq(head):
            for k, item in enumerate(level):
                if _is_seq(item):
                    raise InputError(
                        f"bad value for {name}: ragged nested list: {_where(k, shape)} is "
                        f"{_describe(item)} but {_where(0, shape)} is {_describe(head)}"
                    )
            break
        if len(shape) >= MAX_DIMS:
            raise InputError(f"bad value for {name}: lists nested more than {MAX_DIMS} levels deep")
        n = len(head)
        nxt: list[Any] = []
        for k, item in enumerate(level):
            if not _is_seq(item) or len(item) != n:
                raise InputError(
                    f"bad value for {name}: ragged nested list: {_where(k, shape)} is "
                    f"{_describe(item)} but {_where(0, shape)} is a list of {n}"
                )
            nxt.extend(item)
        shape.append(n)
        level = nxt

    _check_limit(name, shape, max_elements)
    flat = level
    values: np.ndarray | None = None
    if set(map(type, flat)) <= {float, int}:
        try:
            values = np.array(flat, dtype=np.float64)
        except OverflowError:  # an int beyond float64: _scalar below makes it +-inf
            values = None
    if values is None:
        # Floats pass straight through; only the other items (non-finite strings, ints,
        # NumPy scalars, bad values) pay for a call.
        converted = [x if type(x) is float else _scalar(x) for x in flat]
        if None in converted:
            k = converted.index(None)
            raise _bad_scalar(name, _where(k, shape), flat[k])
        values = np.array(converted, dtype=np.float64)
    if dt is _FLOAT64:  # nothing to overflow
        return np.asarray(values.reshape(shape), order="C")
    with np.errstate(over="ignore"):
        return np.asarray(values.reshape(shape), dtype=dt, order="C")


def read_inputs_object(
    obj: Any, *, dtype: DTypeArg = "float64", max_elements: int | None = None
) -> dict[str, np.ndarray]:
    """The ``--inputs`` document or a request's ``"inputs"``: a JSON object name → value.

    Values are JSON values only; a string such as ``"@x.npy"`` is not read as a file.
    """
    if not isinstance(obj, dict):
        raise InputError(
            f"inputs must be a JSON object mapping names to values, not {_describe(obj)}"
        )
    out: dict[str, np.ndarray] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise InputError(f"input names must be strings, not {_describe(key)}")
        out[key] = value_from_json(value, name=key, dtype=dtype, max_elements=max_elements)
    return out


def parse_cli_value(
    text: str,
    *,
    name: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> np.ndarray | None:
    """The VALUE of ``NAME=VALUE`` on the command line.

    ``@path`` loads a file; JSON text becomes a value (a bad JSON value is an
    :class:`InputError`); anything that is not JSON returns ``None`` so that the caller can
    read it as a constant expression of the language (``linspace(0, pi, 5)``, ``pi``, ``.5``).
    Empty text is an :class:`InputError`: nothing can make a value of it.
    """
    stripped = text.strip()
    if not stripped:
        raise InputError(f"no value given for {name} (write {name}=VALUE)")
    if stripped.startswith("@"):
        return load_file_value(stripped[1:], name=name, dtype=dtype, max_elements=max_elements)
    try:
        obj = _loads(stripped)
    except json.JSONDecodeError:
        return None  # not JSON: maybe an expression
    except RecursionError:
        raise InputError(f"value of {name}: JSON is nested too deeply") from None
    except _DuplicateKeyError:
        # Valid JSON syntax, and an object is never a value anyway.
        raise InputError(f"bad value for {name}: the value is an object, not a number") from None
    return value_from_json(obj, name=name, dtype=dtype, max_elements=max_elements)


# --------------------------------------------------------------------------- files


def _os_cause(e: OSError) -> str:
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, IsADirectoryError):
        return "it is a directory"
    if isinstance(e, PermissionError):
        return "permission denied"
    return e.strerror or str(e)


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
                why = f"is not UTF-8 text (byte {size - pending + e.start}: {e.reason})"
            else:
                nul = piece.find("\0")
                if nul >= 0:
                    at = size - pending + len(piece[:nul].encode("utf-8"))
                    why = f"is not text (a NUL byte at byte {at})"
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
        raise InputError(f"{prefix}cannot read {what}: {_os_cause(e)}") from None
    if why is not None:
        raise InputError(f"{prefix}{what} {why}")
    if text is None:
        raise _too_long(prefix, what, limit, max_elements)
    return text


def _read_text(path: str, shown: str, name: str, max_elements: int | None) -> str:
    return read_file_text(path, what=f"file {shown}", prefix=f"{name}: ", max_elements=max_elements)


#: Row ends of a CSV/text file: those of np.loadtxt (and of Python's universal newlines).
#: str.splitlines() would also split on form feed, U+2028 and others inside a row.
_ROW_END = re.compile(r"\r\n|\r|\n")


def read_npy(
    f: IO[bytes], *, size: int | None, name: str, shown: str, max_elements: int | None
) -> np.ndarray:
    """The array of one ``.npy`` stream (a file, or a member of an ``.npz`` archive).

    The header is read and checked first: an object array, a dtype that is not a real number
    type, a shape over ``max_elements`` (a :class:`LimitError`) or, when ``size`` (the bytes
    the stream holds) is known, a truncated stream is refused before any data is allocated
    or read. Format versions 1.0, 2.0 and 3.0 are read (3.0 differs from 2.0 only in a UTF-8
    header, which for a numeric array is ASCII). ``f`` must be seekable; the array is read
    with ``allow_pickle=False``.
    """

    def bad(cause: str) -> InputError:
        return InputError(f"{name}: cannot read {shown} as .npy: {cause}")

    start = f.tell()
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            header = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            header = np.lib.format.read_array_header_2_0(f)
        else:
            raise bad(f"unsupported format version {version[0]}.{version[1]}")
    except (ValueError, EOFError, SyntaxError, TypeError) as e:
        raise bad(f"not a valid .npy file ({e})") from None
    shape, _fortran, file_dtype = header
    if file_dtype.hasobject:
        raise bad("it holds Python objects; only numeric arrays are read")
    if file_dtype.kind not in "iuf":
        raise bad(f"dtype {file_dtype} is not a real number type")
    _check_limit(name, shape, max_elements)
    need = f.tell() - start + math.prod(shape) * file_dtype.itemsize
    if size is not None and size < need:
        raise bad(f"the file is truncated ({size} bytes, the header says {need})")
    f.seek(start)
    try:
        arr = np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, SyntaxError, TypeError) as e:
        raise bad(str(e)) from None
    if not isinstance(arr, np.ndarray):  # pragma: no cover - read_array returns arrays
        raise bad("not a single array")
    _check_limit(name, arr.shape, max_elements)
    return arr


def _too_long(prefix: str, what: str, limit: int, max_elements: int | None) -> LimitError:
    elements = _DEFAULT_MAX_ELEMENTS if max_elements is None else max_elements
    return LimitError(
        f"{prefix}{what} is longer than {limit:,} bytes, the most read for --max-elements "
        f"{elements:,} ({FILE_BYTES_PER_ELEMENT} bytes a number); raise --max-elements "
        "to read it"
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


def _as_dtype(arr: np.ndarray, dt: np.dtype[Any]) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=dt, order="C")


def _load_npy(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    try:
        f, size = _binary_file(
            path, what=f"file {shown}", prefix=f"{name}: ", max_elements=max_elements
        )
        with f:
            arr = read_npy(f, size=size, name=name, shown=shown, max_elements=max_elements)
    except OSError as e:
        raise InputError(f"{name}: cannot read file {shown}: {_os_cause(e)}") from None
    return _as_dtype(arr, dt)


# ----------------------------------------------------------------------- .npz archives

#: ``PATH.npz:KEY`` names one array of an archive (``@grads.npz:grad_a``): the first
#: ``.npz:`` splits, so a key may hold ``:`` and a Windows drive letter is no key.
_NPZ_KEY = re.compile(r"(.*?\.npz):(.*)", re.IGNORECASE | re.DOTALL)

#: The first bytes of a .npy file and of a zip archive (an .npz): how ``@-`` tells them.
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK"


def _keys_text(keys: Any, most: int = 20) -> str:
    """The keys of an archive for a message: ``"output", "grad_a"``, at most ``most``."""
    keys = list(keys)
    text = ", ".join(_short(k) for k in keys[:most])
    if len(keys) > most:
        text += f" and {len(keys) - most} more"
    return text


def _open_zip(f: IO[bytes], prefix: str, where: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        raise InputError(f"{prefix}cannot read {where} as .npz: it is not a zip archive") from None
    except (zipfile.LargeZipFile, ValueError, EOFError, NotImplementedError) as e:
        raise InputError(f"{prefix}cannot read {where} as .npz: {e}") from None


def _npz_members(zf: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """An archive's arrays by key: its ``KEY.npy`` members, named as ``np.load`` names them
    (other members are not arrays, and are left alone)."""
    return {info.filename[:-4]: info for info in zf.infolist() if info.filename.endswith(".npy")}


def _npz_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    *,
    key: str,
    where: str,
    name: str,
    max_elements: int | None,
) -> np.ndarray:
    """One array of an archive, read as a ``.npy`` stream: the header is checked against
    ``max_elements`` and the member's declared size before any data is read."""
    shown = f"{where}, array {_short(key)}"
    try:
        with zf.open(info) as member:
            return read_npy(
                member, size=info.file_size, name=name, shown=shown, max_elements=max_elements
            )
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as e:
        # a bad CRC or deflate stream, an unknown compression method, an encrypted member
        raise InputError(f"{name}: cannot read {shown}: {e}") from None


def _npz_value(
    f: IO[bytes],
    *,
    where: str,
    at: str,
    name: str,
    key: str | None,
    dt: np.dtype[Any],
    max_elements: int | None,
) -> np.ndarray:
    """The array ``key`` of the archive ``f`` or, with no key, its only array. ``at`` is how
    the user names the archive (``@grads.npz``), for the hint of a message."""
    with _open_zip(f, f"{name}: ", where) as zf:
        members = _npz_members(zf)
        if key is None:
            if not members:
                raise InputError(f"{name}: {where} holds no arrays")
            if len(members) > 1:
                raise InputError(
                    f"{name}: {where} holds {len(members)} arrays ({_keys_text(members)}); "
                    f"name one as {name}={shorten(at, 200)}:KEY"
                )
            key = next(iter(members))
        elif key not in members:
            holds = f"it holds {_keys_text(members)}" if members else "it holds no arrays"
            raise InputError(f"{name}: {where} has no array {_short(key)}; {holds}")
        arr = _npz_member(
            zf, members[key], key=key, where=where, name=name, max_elements=max_elements
        )
    return _as_dtype(arr, dt)


def read_npz_arrays(
    f: IO[bytes],
    *,
    where: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``f`` (seekable) by key, as ``--inputs FILE.npz``
    reads them (docs/cli.md, "Files"). Each is read as :func:`read_npy` reads one, with
    ``allow_pickle=False`` and its header checked against ``max_elements``. ``where`` names
    the archive in messages (``--inputs file "in.npz"``)."""
    dt = _float_dtype(dtype)
    out: dict[str, np.ndarray] = {}
    with _open_zip(f, "", where) as zf:
        for key, info in _npz_members(zf).items():
            arr = _npz_member(zf, info, key=key, where=where, name=key, max_elements=max_elements)
            out[key] = _as_dtype(arr, dt)
    return out


def load_npz_inputs(
    path: str, *, dtype: DTypeArg = "float64", max_elements: int | None = None
) -> dict[str, np.ndarray]:
    """The inputs of ``--inputs FILE.npz``: every array of the archive, by its key."""
    what = f"--inputs file {_short(path, 200)}"
    try:
        f, _size = _binary_file(
            os.path.expanduser(path), what=what, prefix="", max_elements=max_elements
        )
        with f:
            return read_npz_arrays(f, where=what, dtype=dtype, max_elements=max_elements)
    except OSError as e:
        raise InputError(f"cannot read {what}: {_os_cause(e)}") from None


# ----------------------------------------------------------------------- CSV and text

#: Cell separators of a CSV/text file, sniffed in this order in its first row (outside
#: quotes); a row with none of them is split at whitespace (docs/cli.md, "Files").
_DELIMITERS = (",", ";", "\t")

_QUOTED = re.compile(r'"[^"]*"')
#: ``#`` outside quotes starts a comment that runs to the end of the row.
_COMMENT = re.compile(r'("[^"]*")|#.*', re.DOTALL)


def _sniff_delimiter(row: str) -> str | None:
    bare = _QUOTED.sub("", row)
    return next((d for d in _DELIMITERS if d in bare), None)


class _RowForm:
    """How the rows of a file with delimiter ``delim`` (None: whitespace) are put in the
    form np.loadtxt reads: whitespace around a delimiter is dropped, and whitespace between
    two numbers separates them as a delimiter does (``1,2 3`` is three numbers, as it always
    was), so that only the delimiter itself can leave an empty cell (``1,,2``). Quoted
    cells are kept whole, for np.loadtxt to unquote."""

    def __init__(self, delim: str | None) -> None:
        self.delim = delim
        space = r"[^\S\t]" if delim == "\t" else r"\s"  # in a TSV, a tab is no whitespace
        self.ends = re.compile(rf"^{space}+|{space}+$")
        sep = f"{space}*{re.escape(delim)}{space}*|" if delim else ""
        self.inner = re.compile(rf'("[^"]*")|{sep}{space}+')
        self.join = delim or " "

    def __call__(self, row: str) -> str:
        row = self.ends.sub("", row)
        return self.inner.sub(lambda m: m.group(1) or self.join, row)

    def cells(self, row: str) -> list[str]:
        """The cells of a row in this form, unquoted (NumPy splits them)."""
        return list(
            np.loadtxt(
                [row], dtype=str, delimiter=self.delim, comments=None, quotechar='"', ndmin=1
            )
        )


def _is_number(cell: str) -> bool:
    """Whether np.loadtxt reads ``cell`` as a number (it refuses ``1_000`` and ``0x10``,
    which Python's float() and NumPy's casts differ on)."""
    if not cell.strip():
        return False
    try:
        np.loadtxt([cell], dtype=np.float64, delimiter="\0", comments=None, quotechar=None)
    except ValueError:
        return False
    return True


def _loadtxt(rows: list[str], form: _RowForm, max_rows: int | None) -> np.ndarray:
    return np.loadtxt(
        rows,
        dtype=np.float64,
        delimiter=form.delim,
        comments=None,
        quotechar='"',
        ndmin=2,
        max_rows=max_rows,
    )


def _csv_error(
    rows: list[str],
    linenos: list[int],
    form: _RowForm,
    ncols: int,
    name: str,
    where: str,
    cause: str,
) -> InputError:
    """The error of the first row np.loadtxt refuses, with its line and cell. NumPy's own
    message counts rows in a way that has changed between versions, so the row is found
    again by bisection: ``log2(rows)`` more reads, on the error path only."""
    ok, bad = 0, len(rows)  # rows[:ok] are read, rows[:bad] are not
    while bad - ok > 1:
        mid = (ok + bad) // 2
        try:
            _loadtxt(rows[:mid], form, None)
        except ValueError:
            bad = mid
        else:
            ok = mid
    row, lineno = rows[bad - 1], linenos[bad - 1]
    cells = form.cells(row)
    for col, cell in enumerate(cells, start=1):
        if not cell.strip():
            return InputError(f"{name}: {where}, line {lineno}, cell {col}: empty cell")
        if not _is_number(cell):
            return InputError(
                f"{name}: {where}, line {lineno}, cell {col}: {_short(cell)} is not a number"
            )
    if len(cells) != ncols:
        return InputError(
            f"{name}: {where}, line {lineno} has {len(cells)} numbers but the first row has {ncols}"
        )
    return InputError(f"{name}: {where}, line {lineno}: {cause}")  # pragma: no cover


def _too_many(name: str, where: str, max_elements: int) -> LimitError:
    return LimitError(
        f"{name}: {where} has more than {max_elements:,} numbers (raise it with --max-elements)"
    )


def _csv_value(
    text: str, *, name: str, where: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    """The numbers of a CSV/text document, read by np.loadtxt (docs/cli.md, "Files").

    Rows end only at ``\\n``, ``\\r\\n`` and ``\\r`` (never at a form feed or U+2028 inside a
    row); blank rows and ``#`` comments are skipped; the delimiter is sniffed from the first
    row (``,`` ``;`` tab, else whitespace); quoted cells are unquoted; a first row with no
    number in it is a header, and is skipped. Shapes as np.loadtxt gives them: one number
    → ``()``, one row or one column → 1-D, otherwise 2-D, no rows → ``(0,)``. At most
    ``max_elements // columns + 1`` rows are converted: more is a :class:`LimitError`.
    """
    rows: list[str] = []
    linenos: list[int] = []
    comments = "#" in text
    for lineno, raw in enumerate(_ROW_END.split(text), start=1):
        if comments and "#" in raw:
            raw = _COMMENT.sub(lambda m: m.group(1) or "", raw)
        if raw and not raw.isspace():
            rows.append(raw)
            linenos.append(lineno)
    if not rows:
        return np.zeros((0,), dtype=dt)
    form = _RowForm(_sniff_delimiter(rows[0]))
    if not any(_is_number(cell) for cell in form.cells(form(rows[0]))):
        del rows[0], linenos[0]  # a header row (names), as genfromtxt(names=True) skips it
        if not rows:
            return np.zeros((0,), dtype=dt)
    ncols = len(form.cells(form(rows[0])))
    max_rows = None
    if max_elements is not None:
        if ncols > max_elements:
            raise _too_many(name, where, max_elements)
        max_rows = max_elements // ncols + 1  # one row over the limit tells it is over
        del rows[max_rows:], linenos[max_rows:]
    try:
        # Rows as they are first: np.loadtxt strips the whitespace around a number itself.
        arr = _loadtxt(rows, form, max_rows)
    except ValueError:
        # Only whitespace inside a cell ("2 3", "2\f3") needs the rows' normal form.
        rows = [form(row) for row in rows]
        try:
            arr = _loadtxt(rows, form, max_rows)
        except ValueError as e:
            raise _csv_error(rows, linenos, form, ncols, name, where, str(e)) from None
    if max_elements is not None and arr.size > max_elements:
        raise _too_many(name, where, max_elements)
    return _as_dtype(np.squeeze(arr), dt)


def _load_csv(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    text = _read_text(path, shown, name, max_elements)
    return _csv_value(text, name=name, where=f"file {shown}", dt=dt, max_elements=max_elements)


def load_file_value(
    path: str,
    *,
    name: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> np.ndarray:
    """The value in a ``.npy``, ``.npz``, ``.json``, or ``.csv``/``.tsv``/``.txt`` file (the
    ``@path`` of VALUE; docs/cli.md, "Files").

    ``~`` is expanded. ``.npz``: ``PATH.npz:KEY`` is the array ``KEY``; without a key, an
    archive of exactly one array. CSV/text: as :func:`_csv_value` reads it.
    """
    dt = _float_dtype(dtype)
    if not path:
        raise InputError(f"{name}: no file name after '@'")
    key = None
    m = _NPZ_KEY.fullmatch(path)
    if m is not None:
        path, key = m.group(1), m.group(2)
        if not key:
            raise InputError(f"{name}: no array name after {_short(path + ':', 200)}")
    shown = _short(path, 200)
    full = os.path.expanduser(path)
    ext = os.path.splitext(full)[1].lower()
    if ext not in SUPPORTED_EXTENSIONS:
        kind = f"unknown file type {_short(ext)}" if ext else "the file name has no extension"
        raise InputError(
            f"{name}: cannot read {shown}: {kind}; supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if ext == ".npy":
        return _load_npy(full, shown, name, dt, max_elements)
    if ext == ".npz":
        where = f"file {shown}"
        try:
            f, _size = _binary_file(full, what=where, prefix=f"{name}: ", max_elements=max_elements)
            with f:
                return _npz_value(
                    f,
                    where=where,
                    at=f"@{path}",
                    name=name,
                    key=key,
                    dt=dt,
                    max_elements=max_elements,
                )
        except OSError as e:
            raise InputError(f"{name}: cannot read file {shown}: {_os_cause(e)}") from None
    if ext == ".json":
        text = _read_text(full, shown, name, max_elements)
        return _json_file_value(
            text, where=f"file {shown}", name=name, dt=dt, max_elements=max_elements
        )
    return _load_csv(full, shown, name, dt, max_elements)


def _json_file_value(
    text: str, *, where: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    obj = parse_json_text(text, what=f"{name}: {where}")
    try:
        return value_from_json(obj, name=name, dtype=dt, max_elements=max_elements)
    except InputError as e:
        raise InputError(f"{e.message} (in {where})") from None


def value_from_bytes(
    data: bytes,
    *,
    name: str,
    where: str = "standard input",
    at: str = "@-",
    key: str | None = None,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> np.ndarray:
    """A value from bytes that have no file name, ``x=@-`` (docs/cli.md, "Files"): the
    format is told by the content. ``.npy`` and ``.npz`` by their first bytes (``key``
    names an archive's array, as ``@-:KEY``); UTF-8 text whose first character is ``[`` or
    ``{`` is JSON; any other text is CSV, read as a ``.csv`` file is (a bare number, or
    ``"nan"``, reads the same either way)."""
    dt = _float_dtype(dtype)
    if key is not None and not data.startswith(_ZIP_MAGIC):
        raise InputError(
            f"{name}: {at}:{shorten(key)} names an array of an .npz archive, but {where} is not one"
        )
    if data.startswith(_NPY_MAGIC):
        arr = read_npy(
            io.BytesIO(data), size=len(data), name=name, shown=where, max_elements=max_elements
        )
        return _as_dtype(arr, dt)
    if data.startswith(_ZIP_MAGIC):
        return _npz_value(
            io.BytesIO(data),
            where=where,
            at=at,
            name=name,
            key=key,
            dt=dt,
            max_elements=max_elements,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{name}: {where} is not UTF-8 text (byte {e.start}: {e.reason})"
        ) from None
    if "\0" in text:
        raise InputError(f"{name}: {where} is not text (a NUL byte)")
    if not text.strip():
        raise InputError(f"{name}: {where} is empty: no value to read")
    if text.lstrip()[:1] in ("[", "{"):
        return _json_file_value(text, where=where, name=name, dt=dt, max_elements=max_elements)
    return _csv_value(text, name=name, where=where, dt=dt, max_elements=max_elements)


# ----------------------------------------------------------------------- saving


def arrays_to_save(result: Any) -> dict[str, Any]:
    """What ``--save`` writes of a ``Result``: ``output``, and ``grad_<name>`` for each input
    and binding with a gradient."""
    arrays = {"output": result.value}
    for name, g in result.grads.items():
        if g is not None:
            arrays[f"grad_{name}"] = g
    for name, (_, g) in result.intermediates.items():
        if g is not None:
            arrays[f"grad_{name}"] = g
    return arrays


def check_save_path(path: str) -> str:
    """The format ``--save PATH`` writes, told by PATH's extension (any case): ``".npz"``,
    ``".json"`` or ``".npy"`` (docs/cli.md, "Files"). Any other extension, or none, is an
    :class:`InputError`: the CLI calls this before any work, so that a typo costs nothing."""
    ext = os.path.splitext(path)[1].lower()
    if ext in SAVE_EXTENSIONS:
        return ext
    kind = f"unknown file type {_short(ext)}" if ext else "the file name has no extension"
    raise InputError(
        f"--save {_short(path, 200)}: {kind}; the extension chooses the format: "
        ".npz (every array), .json (the --json response) or .npy (one array)"
    )


def save_result(
    path: str,
    response: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    arrays: Mapping[str, Any],
) -> None:
    """``--save PATH``: write a command's result in the format PATH's extension chooses
    (:func:`check_save_path`; docs/cli.md, "Files").

    ``.npz``: ``arrays``, one entry each (:func:`save_npz`). ``.json``: ``response``, the
    object ``--json`` prints, written as ``--json`` writes it (one line of strict JSON);
    it may be given as a function that makes it, so that other formats never build it.
    ``.npy``: the one array of ``arrays``; more than one is an :class:`InputError` that
    names them. Every format replaces ``path`` atomically (:class:`ReplacedFile`).
    """
    ext = check_save_path(path)
    if ext == ".npz":
        save_npz(path, dict(arrays))
    elif ext == ".json":
        doc = response() if callable(response) else response
        data = (dumps(doc) + "\n").encode("utf-8")
        _write_replaced(path, lambda f: f.write(data))
    else:
        if len(arrays) != 1:
            raise InputError(
                f"--save {_short(path, 200)}: a .npy file holds one array, and this result "
                f"has {len(arrays)} ({_keys_text(arrays)}); save to .npz to keep them all"
            )
        (arr,) = arrays.values()
        _write_replaced(
            path,
            lambda f: np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False),
        )


def _write_replaced(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    """``write(f)`` into a :class:`ReplacedFile` of ``path``; a failure to write is an
    :class:`InputError` that names the file."""
    try:
        with ReplacedFile(path) as f:
            write(f)
    except OSError as e:
        raise InputError(f"cannot write {_short(path, 200)}: {_os_cause(e)}") from None


def save_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an ``.npz`` archive, one entry per key.

    Unlike ``np.savez(path, **arrays)`` this writes exactly to ``path`` (no ``.npz`` appended)
    and any key works, even ``"file"`` or ``"allow_pickle"`` that would clash with savez's
    own parameters. Reading back: ``np.load(path)[key]``, or ``x=@path:key``. The file is
    replaced atomically (:class:`ReplacedFile`): a failure or a kill leaves the old file as
    it was.
    """

    def write(f: IO[bytes]) -> None:
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, arr in arrays.items():
                with zf.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)

    _write_replaced(path, write)


class ReplacedFile:
    """``with ReplacedFile(path) as f:`` writes a new ``path`` so that, whatever happens, the
    path holds either its old content or the complete new one, never a torn file.

    The bytes go to a temporary file in the same folder (``.NAME.<random>.tmp``, so that the
    rename stays within one file system), which is flushed and fsynced, then renamed over
    the target with ``os.replace`` (atomic on POSIX and Windows), and the folder is fsynced.
    On any exception in the block (a full disk, ``ulimit -f``, Ctrl-C) the temporary file is
    removed and the exception goes on; ``kill -9`` leaves the old file and the temporary one.
    The new file gets the old file's permission bits (or the umask's, as ``open`` gives); a
    symbolic link is followed (its target is replaced, the link kept); a path that exists
    and is not a regular file (``/dev/null``, a FIFO) is written in place, as ``open`` would.
    Every save format writes through this.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.expanduser(path)
        self.target = self.path
        self.temp: str | None = None
        self.file: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        try:
            old = os.stat(self.path)
        except OSError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            self.file = open(self.path, "wb")  # closed in __exit__
            return _Positionless(self.file)  # type: ignore[return-value]
        self.target = os.path.realpath(self.path)
        folder, name = os.path.split(self.target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        while self.temp is None:
            temp = os.path.join(folder, f".{name[:200]}.{os.urandom(6).hex()}.tmp")
            try:
                fd = os.open(temp, flags, 0o666)
            except FileExistsError:
                continue
            self.temp = temp
        if old is not None:
            # not the old file's owner: the umask's permissions
            _best_effort(os.chmod, self.temp, stat.S_IMODE(old.st_mode))
        self.file = os.fdopen(fd, "wb")
        return self.file

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        assert self.file is not None
        try:
            if exc is None and self.temp is not None:
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
            if exc is None and self.temp is not None:
                os.replace(self.temp, self.target)
                self.temp = None
                _fsync_folder(os.path.dirname(self.target))
        finally:
            if self.temp is not None:
                _best_effort(self.file.close)
                _best_effort(os.unlink, self.temp)


class _Positionless:
    """A device or FIFO opened for writing, offered as a stream without positions: a writer
    that can do without (zipfile) then counts bytes itself, where /dev/null would report
    position 0 forever and a FIFO fails to seek."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        raise OSError(errno.ESPIPE, "a stream has no position")


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (POSIX; best effort: not every system allows it)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    _best_effort(os.fsync, fd)
    os.close(fd)


def _best_effort(call: Any, *args: Any) -> None:
    """``call(*args)``, an OSError ignored: cleanup that must not hide the error being raised."""
    try:
        call(*args)
    except OSError:
        return
