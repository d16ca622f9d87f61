"""The VALUE of ``NAME=VALUE``: JSON text, or a file ``@path`` or ``@-`` (docs/cli.md, "Files").

:func:`parse_cli_value` reads the VALUE of the command line: ``@path`` is a file, JSON text
a value, anything else is left to the caller (a constant expression of the language).
:func:`load_file_value` reads an ``.npy``, ``.npz``, ``.json`` or ``.csv``/``.tsv``/``.txt``
file, told by its extension (:data:`SUPPORTED_EXTENSIONS`); :func:`value_from_bytes` reads
bytes that have no name (``x=@-``), told by their content. The formats themselves are
:mod:`gradcli.io.npfiles`, :mod:`gradcli.io.csvtext` and :mod:`gradcli.io.values`.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import Any

import numpy as np

from ..errors import InputError, shorten
from ..i18n import msg
from .bounded import _binary_file, read_file_text, unreadable
from .csvtext import _csv_value
from .jsonio import _DuplicateKeyError, _loads, _short, parse_json_text
from .npfiles import _load_npy, _npz_value, read_npy
from .values import DTypeArg, _as_dtype, _float_dtype, value_from_json

#: File extensions ``@path`` understands (compared case-insensitively); an ``.npz`` path may
#: name one of its arrays: ``@grads.npz:grad_a`` (docs/cli.md, "Files").
SUPPORTED_EXTENSIONS = (".npy", ".npz", ".json", ".csv", ".tsv", ".txt")


#: ``PATH.npz:KEY`` names one array of an archive (``@grads.npz:grad_a``): the first
#: ``.npz:`` splits, so a key may hold ``:`` and a Windows drive letter is no key.
_NPZ_KEY = re.compile(r"(.*?\.npz):(.*)", re.IGNORECASE | re.DOTALL)

#: The first bytes of a .npy file and of a zip archive (an .npz): how ``@-`` tells them.
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK"


def split_zarr(path: str) -> tuple[str, str | None]:
    """``PATH.zarr:NAME`` (an array of a Zarr group) as ``(PATH.zarr, NAME)``; a path
    naming no array as ``(path, None)``: the first ``.zarr:`` splits, as ``.npz:`` does."""
    at = path.lower().find(".zarr:")
    if at < 0:
        return path, None
    return path[: at + 5], path[at + 6 :]


def is_zarr(path: str) -> bool:
    """Whether ``@path`` names a Zarr store (a folder ``*.zarr``), read by the Dask backend."""
    return split_zarr(path)[0].lower().rstrip("/\\").endswith(".zarr")


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
        raise InputError(msg("no value given for {name} (write {name}=VALUE)", name=name))
    if stripped.startswith("@"):
        return load_file_value(stripped[1:], name=name, dtype=dtype, max_elements=max_elements)
    try:
        obj = _loads(stripped)
    except json.JSONDecodeError:
        return None  # not JSON: maybe an expression
    except RecursionError:
        raise InputError(msg("value of {name}: JSON is nested too deeply", name=name)) from None
    except _DuplicateKeyError:
        # Valid JSON syntax, and an object is never a value anyway.
        raise InputError(
            msg("bad value for {name}: the value is an object, not a number", name=name)
        ) from None
    return value_from_json(obj, name=name, dtype=dtype, max_elements=max_elements)


def _read_text(path: str, shown: str, name: str, max_elements: int | None) -> str:
    return read_file_text(
        path, what=msg("file {shown}", shown=shown), prefix=f"{name}: ", max_elements=max_elements
    )


def _load_csv(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    text = _read_text(path, shown, name, max_elements)
    return _csv_value(
        text, name=name, where=msg("file {shown}", shown=shown), dt=dt, max_elements=max_elements
    )


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
        raise InputError(msg("{name}: no file name after '@'", name=name))
    key = None
    m = _NPZ_KEY.fullmatch(path)
    if m is not None:
        path, key = m.group(1), m.group(2)
        if not key:
            raise InputError(
                msg("{name}: no array name after {path}", name=name, path=_short(path + ":", 200))
            )
    shown = _short(path, 200)
    full = os.path.expanduser(path)
    ext = os.path.splitext(full)[1].lower()
    if ext not in SUPPORTED_EXTENSIONS:
        kind = (
            msg("unknown file type {ext}", ext=_short(ext))
            if ext
            else msg("the file name has no extension")
        )
        raise InputError(
            msg(
                "{name}: cannot read {shown}: {kind}; supported: {join}",
                name=name,
                shown=shown,
                kind=kind,
                join=", ".join(SUPPORTED_EXTENSIONS),
            )
        )
    if ext == ".npy":
        return _load_npy(full, shown, name, dt, max_elements)
    if ext == ".npz":
        where = msg("file {shown}", shown=shown)
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
            raise unreadable(name, shown, e) from None
    if ext == ".json":
        text = _read_text(full, shown, name, max_elements)
        return _json_file_value(
            text,
            where=msg("file {shown}", shown=shown),
            name=name,
            dt=dt,
            max_elements=max_elements,
        )
    return _load_csv(full, shown, name, dt, max_elements)


def _json_file_value(
    text: str, *, where: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    obj = parse_json_text(text, what=f"{name}: {where}")
    try:
        return value_from_json(obj, name=name, dtype=dt, max_elements=max_elements)
    except InputError as e:
        raise InputError(msg("{message} (in {where})", message=e.message, where=where)) from None


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
            msg(
                "{name}: {at}:{key} names an array of an .npz archive, but {where} is not one",
                name=name,
                at=at,
                key=shorten(key),
                where=where,
            )
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
            msg(
                "{name}: {where} is not UTF-8 text (byte {start}: {reason})",
                name=name,
                where=where,
                start=e.start,
                reason=e.reason,
            )
        ) from None
    if "\0" in text:
        raise InputError(msg("{name}: {where} is not text (a NUL byte)", name=name, where=where))
    if not text.strip():
        raise InputError(msg("{name}: {where} is empty: no value to read", name=name, where=where))
    if text.lstrip()[:1] in ("[", "{"):
        return _json_file_value(text, where=where, name=name, dt=dt, max_elements=max_elements)
    return _csv_value(text, name=name, where=where, dt=dt, max_elements=max_elements)
