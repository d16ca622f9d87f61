"""``--save PATH``: a command's result written to a file, atomically (docs/cli.md, "Files").

The format is chosen by PATH's extension (:data:`SAVE_EXTENSIONS`, :func:`check_save_path`):
``.npz`` every array (:func:`save_npz`), ``.json`` the ``--json`` response, ``.npy`` the one
array, ``.zarr`` every array in a Zarr group (:func:`save_zarr`). Every format replaces the
path whole (:class:`ReplacedFile`; a Zarr group, a folder, by rename), so that it holds
either its old content or the complete new one, never a torn file; arrays are written with
``allow_pickle=False``.
"""

from __future__ import annotations

import errno
import os
import stat
import zipfile
from collections.abc import Callable, Mapping
from typing import IO, Any

import numpy as np

from ..errors import InputError
from ..i18n import msg
from .bounded import _os_cause
from .jsonio import _short, write_json
from .npfiles import _keys_text

#: The formats ``--save`` writes, chosen by the file's extension (docs/cli.md, "Files").
SAVE_EXTENSIONS = (".npz", ".json", ".npy", ".zarr")


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
    ext = os.path.splitext(path.rstrip("/\\"))[1].lower()
    if ext in SAVE_EXTENSIONS:
        return ext
    kind = (
        msg("unknown file type {ext}", ext=_short(ext))
        if ext
        else msg("the file name has no extension")
    )
    raise InputError(
        msg(
            "--save {path}: {kind}; the extension chooses the format: .npz (every "
            "array), .json (the --json response), .npy (one array) or .zarr (every "
            "array, a chunk at a time)",
            path=_short(path, 200),
            kind=kind,
        )
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
    elif ext == ".zarr":
        save_zarr(path, arrays)
    elif ext == ".json":
        doc = response() if callable(response) else response

        def write(f: IO[bytes]) -> None:  # its arrays a piece at a time (write_json)
            write_json(doc, lambda text: f.write(text.encode("utf-8")))
            f.write(b"\n")

        _write_replaced(path, write)
    else:
        if len(arrays) != 1:
            raise InputError(
                msg(
                    "--save {path}: a .npy file holds one array, and this result has "
                    "{n_arrays} ({keys_text}); save to .npz to keep them all",
                    path=_short(path, 200),
                    n_arrays=len(arrays),
                    keys_text=_keys_text(arrays),
                )
            )
        (arr,) = arrays.values()
        _write_replaced(
            path,
            lambda f: np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False),
        )


def save_zarr(path: str, arrays: Mapping[str, Any]) -> None:
    """``--save out.zarr`` of arrays in memory: a Zarr group, one array each, replacing
    ``path`` whole (:class:`gradcli.io.chunked.ZarrWriter`; needs ``gradcli[dask]``). An
    evaluation on the Dask backend writes its own, a chunk at a time (gradcli.lazy)."""
    try:
        import dask

        from .chunked import ZarrWriter
    except ImportError:
        raise InputError(
            msg(
                "--save {path}: Zarr needs dask and zarr, which are not installed: pip "
                "install 'gradcli[dask]'",
                path=_short(path, 200),
            )
        ) from None
    with ZarrWriter(path) as writer:
        writer.store(arrays, lambda *todo: dask.compute(*todo, scheduler="threads"))


def _write_replaced(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    """``write(f)`` into a :class:`ReplacedFile` of ``path``; a failure to write is an
    :class:`InputError` that names the file."""
    try:
        with ReplacedFile(path) as f:
            write(f)
    except OSError as e:
        raise InputError(
            msg("cannot write {path}: {os_cause}", path=_short(path, 200), os_cause=_os_cause(e))
        ) from None


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
