"""JSON out and in: responses as strict JSON, documents parsed with the user in mind.

Output: arrays become plain Python lists of floats (:func:`json_array`) and non-finite
numbers become the strings ``"nan"``, ``"inf"``, ``"-inf"``, so that every response is one
line of strict JSON (:func:`dumps`; docs/json.md). Input: :func:`parse_json_text` is
``json.loads`` whose every failure (syntax, nesting too deep, a duplicate key) is an
:class:`~gradcli.errors.InputError` that names the document. Turning a parsed document into
arrays is :mod:`gradcli.io.values`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, shorten
from ..i18n import msg

# Characters that json.dumps(ensure_ascii=False) leaves raw but that some line readers
# (str.splitlines, JavaScript) treat as line breaks: escaped so one response is one line.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


# --------------------------------------------------------------------- output


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

_float_repr = float.__repr__  # how json writes a finite float


def numbers_text(a: np.ndarray) -> str:
    """The numbers of ``a`` as :func:`dumps` writes them inside a response, for a writer
    that puts a response together from parts (``batch``'s lane): a number or a flat list
    of finite numbers written here as json's encoder writes them, anything else by it."""
    if type(a) is np.ndarray and a.dtype.kind == "f" and a.ndim <= 1 and a.size <= 32:
        out = a.tolist()  # Python floats
        if a.ndim == 0:
            if math.isfinite(out):
                return _float_repr(out)
        elif all(map(math.isfinite, out)):
            return "[" + ",".join(map(_float_repr, out)) + "]"
    return _ENCODERS[False].encode(json_array(a))


#: numbers of an array encoded at a time by :func:`write_json`
JSON_PIECE = 1 << 16


def write_json(obj: Any, write: Callable[[str], Any]) -> None:
    """Write ``obj`` as :func:`dumps` writes it, byte for byte, through ``write``, with the
    arrays in it (NumPy's or lazy ones, in place of their lists) written a piece at a time:
    a response of 10⁸ numbers as one text is gigabytes of Python floats and lists, and its
    text as large again. A lazy array is computed a chunk at a time (docs/json.md)."""
    import uuid

    arrays: list[Any] = []
    mark = f"@@gradcli-array-{uuid.uuid4().hex}-"

    def marked(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: marked(v) for k, v in o.items()}
        if isinstance(o, list):
            return [marked(v) for v in o]
        if hasattr(o, "shape") and hasattr(o, "dtype"):
            arrays.append(o)
            return f"{mark}{len(arrays) - 1}"
        return o

    text = dumps(marked(obj))
    pieces = text.split(f'"{mark}')
    write(pieces[0])
    for piece in pieces[1:]:
        k, rest = piece.split('"', 1)
        _write_array(arrays[int(k)], write)
        write(rest)


def _write_array(a: Any, write: Callable[[str], Any]) -> None:
    """``dumps(json_array(a))``, a piece of :data:`JSON_PIECE` numbers at a time."""
    if not isinstance(a, np.ndarray) and hasattr(a, "blocks") and a.ndim:
        _write_lazy(a, write)
        return
    a = np.asarray(a)
    if a.ndim == 0 or a.size <= JSON_PIECE:
        write(_ENCODERS[False].encode(json_array(a)))
        return
    write("[")
    _write_rows(a, write)
    write("]")


def _write_rows(a: np.ndarray, write: Callable[[str], Any]) -> None:
    """The texts of the rows of ``a`` (its first axis), comma-separated: rows together, a
    piece at a time, or a row too long for a piece written on its own."""
    rows = a.shape[0]
    per_row = a.size // rows
    if per_row > JSON_PIECE:
        for i in range(rows):
            if i:
                write(",")
            _write_array(a[i], write)
        return
    step = max(1, JSON_PIECE // per_row)
    for k in range(0, rows, step):
        inner = _ENCODERS[False].encode(json_array(a[k : k + step]))[1:-1]
        write(f",{inner}" if k else inner)


def _write_lazy(a: Any, write: Callable[[str], Any]) -> None:
    """A lazy (Dask) array's text, each chunk of whole rows computed once."""
    if a.size <= JSON_PIECE:
        write(_ENCODERS[False].encode(json_array(np.asarray(a))))
        return
    rows = a.shape[0]
    write("[")
    if a.size // rows > JSON_PIECE:  # a row at a time, each one's chunks in turn
        for i in range(rows):
            if i:
                write(",")
            _write_array(a[i], write)
    else:
        whole = a.rechunk({axis: -1 for axis in range(1, a.ndim)}) if a.ndim > 1 else a
        first = True
        for j in range(whole.numblocks[0]):
            block = np.asarray(whole.blocks[j])
            if block.shape[0]:
                if not first:
                    write(",")
                _write_rows(block, write)
                first = False
    write("]")


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


# ----------------------------------------------------------------- JSON input


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
    # A document with no whitespace around it (a batch line, a compact request) is read by
    # the decoder's scanner alone: ``decode`` is the same scan with a whitespace match on
    # each side, a third of a small document's time. Anything else, a failure included,
    # is read again by ``decode``, which says what is wrong.
    try:
        value, end = _SCAN(text, 0)
    except Exception:  # ... or RecursionError, refused as decode refuses it
        pass
    else:
        if end == len(text):
            return value
    if text.startswith("\ufeff"):  # json.loads's own error for a byte-order mark
        return json.loads(text, parse_int=_parse_int, object_pairs_hook=_pairs_no_duplicates)
    return _DECODER.decode(text)


#: made once: json.loads and json.dumps with options make a new one on every call
_DECODER = json.JSONDecoder(parse_int=_parse_int, object_pairs_hook=_pairs_no_duplicates)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


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
            msg(
                "{what}: invalid JSON at line {lineno}, column {colno}: {msg}",
                what=what,
                lineno=e.lineno,
                colno=e.colno,
                msg=e.msg,
            ),
            line=e.lineno,
            column=e.colno,
        ) from None
    except RecursionError:
        raise InputError(msg("{what}: JSON is nested too deeply", what=what)) from None
    except _DuplicateKeyError as e:
        raise InputError(
            msg(
                "{what}: duplicate key {args} in a JSON object",
                what=what,
                args=_short(str(e.args[0])),
            )
        ) from None


# ------------------------------------------------------------------- messages


def quote_short(text: str, limit: int = 40) -> str:
    """``text`` shortened (:func:`shorten`) and quoted as a JSON string for a message."""
    return json.dumps(shorten(text, limit), ensure_ascii=False)


_short = quote_short
