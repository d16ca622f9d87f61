"""NumPy's files: ``.npy`` arrays and ``.npz`` archives, read safely (docs/cli.md, "Files").

Nothing here uses pickle: an ``.npy`` stream's header is read and checked (an object array,
a dtype that is not a real number type, a shape over ``--max-elements``, a truncated file)
before any data is allocated or read, and the array is then read with
``allow_pickle=False`` (:func:`read_npy`). An ``.npz`` archive is read member by member, each
as one ``.npy`` stream: one array of it (``@grads.npz:grad_a``) or all of them
(``--inputs FILE.npz``, :func:`load_npz_inputs`).
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from typing import IO, Any

import numpy as np

from ..errors import InputError, shorten
from ..i18n import msg
from .bounded import _binary_file, _os_cause, unreadable
from .jsonio import _short
from .values import DTypeArg, _as_dtype, _check_limit, _float_dtype


def npy_header(
    f: IO[bytes], *, size: int | None, name: str, shown: str, max_elements: int | None
) -> tuple[tuple[int, ...], bool, np.dtype[Any], int]:
    """``(shape, fortran_order, dtype, data offset)`` of the ``.npy`` stream at ``f``'s
    position, checked as :func:`read_npy` checks it; ``f`` is left past the header."""

    def bad(cause: str) -> InputError:
        return InputError(
            msg("{name}: cannot read {shown} as .npy: {cause}", name=name, shown=shown, cause=cause)
        )

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
    shape, fortran, file_dtype = header
    if file_dtype.hasobject:
        raise bad("it holds Python objects; only numeric arrays are read")
    if file_dtype.kind not in "iuf":
        raise bad(f"dtype {file_dtype} is not a real number type")
    _check_limit(name, shape, max_elements)
    offset = f.tell() - start
    need = offset + math.prod(shape) * file_dtype.itemsize
    if size is not None and size < need:
        raise bad(f"the file is truncated ({size} bytes, the header says {need})")
    return tuple(shape), bool(fortran), file_dtype, offset


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
    start = f.tell()
    npy_header(f, size=size, name=name, shown=shown, max_elements=max_elements)
    f.seek(start)
    try:
        arr = np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, SyntaxError, TypeError) as e:
        raise InputError(
            msg("{name}: cannot read {shown} as .npy: {e}", name=name, shown=shown, e=e)
        ) from None
    if not isinstance(arr, np.ndarray):  # pragma: no cover - read_array returns arrays
        raise InputError(
            msg("{name}: cannot read {shown} as .npy: not a single array", name=name, shown=shown)
        )
    _check_limit(name, arr.shape, max_elements)
    return arr


def _load_npy(
    path: str, shown: str, name: str, dt: np.dtype[Any], max_elements: int | None
) -> np.ndarray:
    try:
        f, size = _binary_file(
            path,
            what=msg("file {shown}", shown=shown),
            prefix=f"{name}: ",
            max_elements=max_elements,
        )
        with f:
            arr = read_npy(f, size=size, name=name, shown=shown, max_elements=max_elements)
    except OSError as e:
        raise unreadable(name, shown, e) from None
    return _as_dtype(arr, dt)


# -------------------------------------------------------------- .npz archives


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
        raise InputError(
            msg(
                "{prefix}cannot read {where} as .npz: it is not a zip archive",
                prefix=prefix,
                where=where,
            )
        ) from None
    except (zipfile.LargeZipFile, ValueError, EOFError, NotImplementedError) as e:
        raise InputError(
            msg("{prefix}cannot read {where} as .npz: {e}", prefix=prefix, where=where, e=e)
        ) from None


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
        raise InputError(
            msg("{name}: cannot read {shown}: {e}", name=name, shown=shown, e=e)
        ) from None


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
                raise InputError(msg("{name}: {where} holds no arrays", name=name, where=where))
            if len(members) > 1:
                raise InputError(
                    msg(
                        "{name}: {where} holds {n_members} arrays ({keys_text}); name one as "
                        "{name}={at}:KEY",
                        name=name,
                        where=where,
                        n_members=len(members),
                        keys_text=_keys_text(members),
                        at=shorten(at, 200),
                    )
                )
            key = next(iter(members))
        elif key not in members:
            holds = (
                msg("it holds {keys}", keys=_keys_text(members))
                if members
                else msg("it holds no arrays")
            )
            raise InputError(
                msg(
                    "{name}: {where} has no array {key}; {holds}",
                    name=name,
                    where=where,
                    key=_short(key),
                    holds=holds,
                )
            )
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
    what = msg("--inputs file {path}", path=_short(path, 200))
    try:
        f, _size = _binary_file(
            os.path.expanduser(path), what=what, prefix="", max_elements=max_elements
        )
        with f:
            return read_npz_arrays(f, where=what, dtype=dtype, max_elements=max_elements)
    except OSError as e:
        raise InputError(
            msg("cannot read {what}: {os_cause}", what=what, os_cause=_os_cause(e))
        ) from None
