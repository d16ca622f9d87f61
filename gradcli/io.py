"""Values in and out: JSON documents, command-line values, files (SPEC §2 "VALUE", "JSON").

Everything a user hands gradcli as a number passes through here, and every bad value becomes
an :class:`~gradcli.errors.InputError` whose message names the input and the cause. Output
goes the other way: arrays become plain Python lists of floats and non-finite numbers become
the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that every response is strict JSON. Where
the text comes from (EXPR, ``-f``, ``--inputs``, stdin) is :mod:`gradcli.inputs`.

Nothing here uses ``eval``, ``exec`` or pickle; ``.npy`` files are read with
``allow_pickle=False`` and their header is checked before any data is read.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import InputError, LimitError

__all__ = [
    "MAX_DIMS",
    "SUPPORTED_EXTENSIONS",
    "DTypeArg",
    "arrays_to_save",
    "dumps",
    "json_array",
    "load_file_value",
    "parse_cli_value",
    "parse_json_text",
    "read_inputs_object",
    "save_npz",
    "value_from_json",
]

#: NumPy's own limit on the number of dimensions; deeper JSON nesting is refused.
MAX_DIMS = 64

#: File extensions ``@path`` understands (compared case-insensitively).
SUPPORTED_EXTENSIONS = (".npy", ".json", ".csv", ".txt")

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
    finite = np.isfinite(arr)
    if finite.all():
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


def dumps(obj: Any) -> str:
    """Compact strict JSON on one line; stray nan/inf floats become ``"nan"``/``"inf"``/``"-inf"``.

    NumPy arrays and scalars are accepted too (through :func:`json_array`).
    """

    def encode(o: Any, ascii_only: bool = False) -> str:
        return json.dumps(
            o,
            allow_nan=False,
            ensure_ascii=ascii_only,
            separators=(",", ":"),
            default=_json_default,
        )

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
        return int(text)
    except ValueError:
        return float(text)


def _loads(text: str) -> Any:
    return json.loads(text, parse_int=_parse_int, object_pairs_hook=_pairs_no_duplicates)


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


def _float_dtype(dtype: DTypeArg) -> np.dtype[Any]:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InputError(f"unknown dtype {dtype!r}; use float64 or float32") from None
    if dt.kind != "f":
        raise InputError(f"unsupported dtype {dt.name}; use float64 or float32")
    return dt


def _short(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut short so a huge bad value cannot flood stderr."""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return json.dumps(text, ensure_ascii=False)


def _describe(x: Any) -> str:
    """What a bad JSON item is, in JSON's words (never repr: it may be nested very deeply)."""
    if x is None:
        return "null"
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


def _read_text(path: str, shown: str, name: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{name}: cannot read file {shown}: {_os_cause(e)}") from None
    except UnicodeDecodeError as e:
        raise InputError(
            f"{name}: file {shown} is not UTF-8 text (byte {e.start}: {e.reason})"
        ) from None


def _load_npy(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    def bad(cause: str) -> InputError:
        return InputError(f"{name}: cannot read {shown} as .npy: {cause}")

    try:
        with open(path, "rb") as f:
            # Read and check the header first: an object array, a wrong dtype, an array over
            # the limit or a truncated file is refused before any data is allocated.
            try:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    header = np.lib.format.read_array_header_2_0(f)
                else:
                    header = None  # newer format: np.load below still checks it
            except (ValueError, EOFError, SyntaxError, TypeError) as e:
                raise bad(f"not a valid .npy file ({e})") from None
            if header is not None:
                shape, _fortran, file_dtype = header
                if file_dtype.hasobject:
                    raise bad("it holds Python objects; only numeric arrays are read")
                if file_dtype.kind not in "iuf":
                    raise bad(f"dtype {file_dtype} is not a real number type")
                _check_limit(name, shape, max_elements)
                st = os.fstat(f.fileno())
                need = f.tell() + math.prod(shape) * file_dtype.itemsize
                if stat.S_ISREG(st.st_mode) and st.st_size < need:
                    raise bad(f"the file is truncated ({st.st_size} bytes, the header says {need})")
            f.seek(0)
            try:
                arr = np.load(f, allow_pickle=False)
            except (ValueError, EOFError, SyntaxError, TypeError) as e:
                raise bad(str(e)) from None
    except OSError as e:
        raise InputError(f"{name}: cannot read file {shown}: {_os_cause(e)}") from None
    if not isinstance(arr, np.ndarray):
        raise bad("not a single array")
    if arr.dtype.hasobject or arr.dtype.kind not in "iuf":
        raise bad(f"dtype {arr.dtype} is not a real number type")
    _check_limit(name, arr.shape, max_elements)
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=dt, order="C")


def _csv_cells(line: str) -> list[str] | None:
    """The cells of one line (commas and/or whitespace separate), or None for an empty cell."""
    if "," not in line:
        return line.split()
    cells: list[str] = []
    for field in line.split(","):
        parts = field.split()
        if not parts:
            return None
        cells.extend(parts)
    return cells


def _load_csv(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    text = _read_text(path, shown, name)
    rows: list[list[float]] = []
    total = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0]  # '#' starts a comment, as in np.loadtxt
        if not line.strip():
            continue
        cells = _csv_cells(line)
        if cells is None:
            raise InputError(f"{name}: file {shown}, line {lineno}: empty cell")
        row: list[float] = []
        for col, cell in enumerate(cells, start=1):
            try:
                x = float(cell)  # also takes nan, inf, -inf, infinity in any case
            except ValueError:
                raise InputError(
                    f"{name}: file {shown}, line {lineno}, cell {col}: "
                    f"{_short(cell)} is not a number"
                ) from None
            row.append(x)
        if rows and len(row) != len(rows[0]):
            raise InputError(
                f"{name}: file {shown}, line {lineno} has {len(row)} numbers "
                f"but the first row has {len(rows[0])}"
            )
        total += len(row)
        if max_elements is not None and total > max_elements:
            raise LimitError(f"{name}: file {shown} has more than {max_elements} numbers")
        rows.append(row)
    if not rows:
        return np.zeros((0,), dtype=dt)
    # Shapes as np.loadtxt gives them: one number -> (), one row or one column -> 1-D.
    arr = np.array(rows, dtype=np.float64)
    if arr.shape[0] == 1 or arr.shape[1] == 1:
        arr = arr.reshape(-1) if arr.size != 1 else arr.reshape(())
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=dt, order="C")


def load_file_value(
    path: str,
    *,
    name: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
) -> np.ndarray:
    """The value in a ``.npy``, ``.json``, or ``.csv``/``.txt`` file (the ``@path`` of VALUE).

    ``~`` is expanded. CSV/text: numbers separated by commas and/or whitespace, one row a
    line, blank lines and ``#`` comments ignored; shapes as ``np.loadtxt`` gives them (one
    number → ``()``, one row or one column → 1-D, otherwise 2-D, no rows → ``(0,)``).
    """
    dt = _float_dtype(dtype)
    if not path:
        raise InputError(f"{name}: no file name after '@'")
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
    if ext == ".json":
        obj = parse_json_text(_read_text(full, shown, name), what=f"{name}: file {shown}")
        try:
            return value_from_json(obj, name=name, dtype=dt, max_elements=max_elements)
        except InputError as e:
            raise InputError(f"{e.message} (in file {shown})") from None
    return _load_csv(full, shown, name, dt, max_elements)


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


def save_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an ``.npz`` archive, one entry per key.

    Unlike ``np.savez(path, **arrays)`` this writes exactly to ``path`` (no ``.npz`` appended)
    and any key works, even ``"file"`` or ``"allow_pickle"`` that would clash with savez's
    own parameters. Reading back: ``np.load(path)[key]``.
    """
    full = os.path.expanduser(path)
    try:
        with (
            open(full, "wb") as f,
            zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf,
        ):
            for key, arr in arrays.items():
                with zf.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
    except OSError as e:
        raise InputError(f"cannot write {_short(path, 200)}: {_os_cause(e)}") from None
