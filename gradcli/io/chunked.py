"""Arrays read and written a chunk at a time, for the Dask backend (docs/dask.md, "Files").

``x=@big.npy`` is read part by part, never whole (:func:`lazy_npy`); ``x=@data.zarr`` or
``x=@data.zarr:name`` is a Zarr array or a member of a Zarr group (:func:`lazy_zarr`);
``--save out.zarr`` writes every array chunk by chunk into a new Zarr group that replaces
``out.zarr`` only once it is complete (:class:`ZarrWriter`). Needs the ``gradcli[dask]``
extra: nothing imports this module without it.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import math
import mmap
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from ..errors import InputError
from ..i18n import msg
from .bounded import _os_cause, unreadable
from .files import split_zarr
from .jsonio import _short
from .npfiles import _keys_text, npy_header
from .values import DTypeArg, _check_limit, _float_dtype


class NpyParts:
    """An ``.npy`` file as an array that Dask reads a part at a time: a part that is one
    run of the file's bytes is read straight into its array, any other is copied out of a
    memory map of the file. It pickles as its path and layout, so the workers
    of a cluster read the file themselves and the task graph never carries the data (a
    memory map given to ``dask.array.from_array`` is hashed whole, and pickled whole)."""

    def __init__(
        self, path: str, shape: tuple[int, ...], dtype: Any, fortran: bool, offset: int
    ) -> None:
        self.path = path
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.fortran = fortran
        self.offset = offset

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        if 0 in self.shape:  # a file of no elements cannot be mapped
            return np.empty(self.shape, self.dtype)[key]
        run = self._run(key)
        if run is not None:
            return self._read(*run)
        return np.array(self._mapped()[key])

    def _mapped(self) -> Any:
        try:
            return np.memmap(
                self.path,
                dtype=self.dtype,
                mode="r",
                offset=self.offset,
                shape=self.shape,
                order="F" if self.fortran else "C",
            )
        except ValueError:  # shorter than the header says
            raise _changed(self.path) from None

    def _run(self, key: Any) -> tuple[int, tuple[int, ...]] | None:
        """``(first element, shape)`` when ``key`` (Dask's slices) selects one run of the
        file's elements: rows ``a:b`` of a C-ordered array, whole in its other axes."""
        if not isinstance(key, tuple) or len(key) != self.ndim or not self.ndim:
            return None
        if self.fortran and self.ndim > 1:
            return None
        first = rows = 0
        for axis, part in enumerate(key):
            if type(part) is not slice or part.step not in (None, 1):
                return None
            start, stop, _ = part.indices(self.shape[axis])
            if axis == 0:
                first, rows = start, max(0, stop - start)
            elif (start, stop) != (0, self.shape[axis]):
                return None
        return first * math.prod(self.shape[1:]), (rows, *self.shape[1:])

    def _read(self, first: int, shape: tuple[int, ...]) -> np.ndarray:
        """The elements from the ``first`` on, as an array of ``shape``, read from the file
        straight into it: for a file in the page cache, into memory the command's heap
        had already given (docs/dask.md, "Chunks"), 0.07 s against 0.12 s for a copy out
        of a memory map, a chunk of 32 MiB at a time from 800 MB (on fresh memory the
        two take the same time). A file that ends before the data its header gives has
        changed since it was opened: an input error."""
        out = np.empty(shape, self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8).data)
        with open(self.path, "rb", buffering=0) as f:
            f.seek(self.offset + first * self.dtype.itemsize)
            done = 0
            while done < len(view):
                n = f.readinto(view[done:])
                if not n:
                    raise _changed(self.path)
                done += n
        return out


def _changed(path: str) -> InputError:
    return InputError(
        msg(
            "cannot read {shown}: the file ends before the data its header gives (it "
            "changed after it was opened)",
            shown=_short(path, 200),
        )
    )


def lazy_npy(
    path: str, *, name: str, dtype: DTypeArg, max_elements: int | None, chunks_for: Any
) -> Any:
    """The array of an ``.npy`` file, lazily: its header read and checked now (as
    ``read_npy`` checks it), its data chunk by chunk when computed."""
    dt = _float_dtype(dtype)
    shown = _short(path, 200)
    full = os.path.expanduser(path)
    try:
        with open(full, "rb") as f:
            st = os.fstat(f.fileno())
            shape, fortran, file_dtype, offset = npy_header(
                f,
                size=st.st_size,
                name=name,
                shown=msg("file {shown}", shown=shown),
                max_elements=max_elements,
            )
    except OSError as e:
        raise unreadable(name, shown, e) from None
    parts = NpyParts(os.path.abspath(full), shape, file_dtype, fortran, offset)
    token = f"npy-{uuid.uuid5(uuid.NAMESPACE_URL, f'{parts.path}:{st.st_mtime_ns}:{st.st_size}')}"
    arr = da.from_array(
        parts, chunks=chunks_for(shape, file_dtype), name=token, asarray=True, fancy=False
    )
    return arr if arr.dtype == dt else arr.astype(dt)


def lazy_zarr(
    path: str, *, name: str, dtype: DTypeArg, max_elements: int | None, chunks_for: Any
) -> Any:
    """A Zarr array, or the member ``NAME`` of a Zarr group (``@data.zarr:NAME``; a group
    of one array needs no name), lazily, in chunks that are whole multiples of the
    store's own."""
    import zarr

    dt = _float_dtype(dtype)
    store, key = split_zarr(path)
    shown = _short(store, 200)
    full = os.path.expanduser(store)
    if not os.path.exists(full):
        raise InputError(
            msg("{name}: cannot read {shown}: no such Zarr store", name=name, shown=shown)
        )
    try:
        node = zarr.open(full, mode="r")
        if isinstance(node, zarr.Group):
            members = {k: v for k, v in node.members() if isinstance(v, zarr.Array)}
            if key is None:
                if len(members) != 1:
                    raise InputError(
                        msg(
                            "{name}: {shown} is a Zarr group of {n_members} arrays ({keys_text}): "
                            "name one, @{store}:NAME",
                            name=name,
                            shown=shown,
                            n_members=len(members),
                            keys_text=_keys_text(members),
                            store=store,
                        )
                    )
                (node,) = members.values()
            elif key not in members:
                raise InputError(
                    msg(
                        "{name}: {shown} has no array {key} (it has: {keys_text})",
                        name=name,
                        shown=shown,
                        key=_short(key),
                        keys_text=_keys_text(members),
                    )
                )
            else:
                node = members[key]
        elif key is not None:
            raise InputError(
                msg(
                    "{name}: {shown} is one array, not a group: write @{store}",
                    name=name,
                    shown=shown,
                    store=store,
                )
            )
    except InputError:
        raise
    except Exception as e:  # zarr's errors for a store that is not one
        raise InputError(
            msg("{name}: cannot read {shown} as Zarr: {e}", name=name, shown=shown, e=e)
        ) from None
    if node.dtype.kind not in "iuf":
        raise InputError(
            msg(
                "bad value for {name}: a Zarr array of dtype {dtype} is not numeric",
                name=name,
                dtype=node.dtype,
            )
        )
    _check_limit(name, node.shape, max_elements)
    chunks = da.core.normalize_chunks(
        "auto",
        node.shape,
        limit=max(_bytes_of(chunks_for, node.shape, node.dtype), node.dtype.itemsize),
        dtype=node.dtype,
        previous_chunks=node.chunks,
    )
    arr = da.from_zarr(node, chunks=chunks)
    return arr if arr.dtype == dt else arr.astype(dt)


def _bytes_of(chunks_for: Any, shape: tuple[int, ...], dtype: Any) -> int:
    """The bytes of the largest chunk ``chunks_for`` gives an array of ``shape``."""
    chunks = chunks_for(shape, dtype)
    n = 1
    for c in chunks:
        n *= max(c) if c else 1
    return n * np.dtype(dtype).itemsize


class ZarrWriter:
    """``--save out.zarr``: a new Zarr group beside the path, filled by :meth:`store`,
    put in the path's place by :meth:`commit` (a rename; an old ``out.zarr`` is moved
    aside first and deleted after), removed by :meth:`abort` if the work fails. Readers
    see the old group or the whole new one, never a part. As a context manager it commits
    when its block ends and aborts when the block raises. Chunk files are written past
    the page cache where the system allows it (:func:`_write_file`)."""

    def __init__(self, path: str) -> None:
        import zarr

        self.path = os.path.abspath(os.path.expanduser(path))
        folder = os.path.dirname(self.path)
        self.tmp = os.path.join(folder, f".{os.path.basename(self.path)}.{uuid.uuid4().hex}.tmp")
        try:
            self.group = zarr.open_group(_chunk_store()(self.tmp), mode="w")
        except OSError as e:
            raise InputError(
                msg(
                    "cannot write {path}: {os_cause}", path=_short(path, 200), os_cause=_os_cause(e)
                )
            ) from None

    def __enter__(self) -> ZarrWriter:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.commit()
        else:
            self.abort()

    def store(
        self,
        arrays: Mapping[str, Any],
        compute: Callable[..., tuple[Any, ...]],
        measures: Sequence[Callable[[Any], Any]] = (),
    ) -> dict[str, tuple[Any, ...]]:
        """Write ``arrays`` (Dask or NumPy) into the group, chunk by chunk, in one pass of
        ``compute``. Returns, by name, whether the array's values are all finite, its
        2-norm (both from one pass over each chunk as it is written: :func:`_chunk_sums`),
        then what each of ``measures`` gives of it (a lazy value of a lazy array, or None:
        a norm, a part of it), learnt in the same pass. An array of that name already in
        the group is overwritten: ``store({"g": 2 * read()["g"]})`` rewrites a chunk
        where it read it."""
        sources: list[Any] = []
        targets: list[Any] = []
        learnt: list[Any] = []
        for name, a in arrays.items():
            if not isinstance(a, da.Array):
                a = da.from_array(np.asarray(a), chunks=np.shape(a) or ())
            if a.ndim:
                a = a.rechunk(a.chunksize)  # Zarr's chunks are regular
            # uncompressed: gradients are dense floats, which compress little, and
            # compressing them took longer than writing (docs/dask.md, "Files"); every
            # chunk written, even one all zeros: Zarr's test for such a chunk, a pass that
            # compares bytes, took 7% of W10's time, and a gradient is seldom all zeros
            if name in self.group:
                target = self.group[name]
            else:
                target = self.group.create_array(
                    name,
                    shape=a.shape,
                    dtype=a.dtype,
                    chunks=a.chunksize if a.ndim else (),
                    compressors=None,
                    config={"write_empty_chunks": True},
                )
            sources.append(a)
            targets.append(target)
            # the same chunks as the store's (an unoptimised graph keeps their keys), so
            # each is computed once for both
            sums = [_chunk_sums(block) for block in a.to_delayed(optimize_graph=False).ravel()]
            learnt.append(_finite_and_norm(sums))
            learnt.extend(measure(a) for measure in measures)
        stored = da.store(sources, targets, lock=False, compute=False)
        lazy = [i for i, v in enumerate(learnt) if v is not None]
        stats: list[Any] = [None] * len(learnt)
        for i, v in zip(lazy, compute(stored, *(learnt[i] for i in lazy))[1:], strict=True):
            stats[i] = v
        k = 1 + len(measures)
        return {
            name: (*stats[k * i], *stats[k * i + 1 : k * (i + 1)]) for i, name in enumerate(arrays)
        }

    def read(self) -> dict[str, Any]:
        """The arrays written so far, lazily, in the chunks they were written in."""
        return _arrays_of(self.group)

    def commit(self) -> None:
        old = None
        if os.path.lexists(self.path):
            old = f"{self.tmp}.old"
            os.rename(self.path, old)
        os.rename(self.tmp, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if os.path.isdir(old) else os.remove(old)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


@dask.delayed(pure=True)
def _chunk_sums(x: np.ndarray) -> tuple[bool, float]:
    """Whether a chunk is all finite, and the sum of its squares, in one pass (a dot
    product; it is inf or nan where a value is), and a second only where the sum is not
    finite: it may have overflowed from finite values. The dot product is einsum's, not
    BLAS's: BLAS's threads, spinning while they wait for more, took a core from Dask's."""
    flat = np.ravel(x)
    if flat.dtype != np.float64:
        flat = flat.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = float(np.einsum("i,i->", flat, flat))
    return (True, s) if math.isfinite(s) else (bool(np.isfinite(flat).all()), s)


@dask.delayed(pure=True)
def _finite_and_norm(sums: list[tuple[bool, float]]) -> tuple[bool, float]:
    """An array's finiteness and 2-norm from its chunks' :func:`_chunk_sums`."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum([s for _, s in sums]))
    return all(f for f, _ in sums), math.sqrt(total)


# --- chunk files past the page cache ------------------------------------------------------

#: a chunk file is written in pieces of this many bytes from a page-aligned buffer of each
#: writing thread: whole multiples of any disk's block size, as direct I/O needs
_PIECE = 1 << 20
_ALIGN = 4096
_buffers = threading.local()


@functools.cache
def _chunk_store() -> Any:
    """Zarr's store of a folder, writing its chunk files with :func:`_write_file` (its
    metadata as Zarr writes it). Made on first use: Zarr is imported only where used."""
    from zarr.storage import LocalStore

    class ChunkStore(LocalStore):
        async def set(self, key: str, value: Any) -> None:
            if key.rpartition("/")[2] == "zarr.json":
                return await super().set(key, value)
            data = memoryview(value.as_buffer_like()).cast("B")
            await asyncio.to_thread(_write_file, os.path.join(self.root, key), data)

    return ChunkStore


def _write_file(path: str, data: memoryview) -> None:
    """Write ``data`` as the file ``path``, its whole pieces with direct I/O (``O_DIRECT``)
    where the system has it, the rest through the page cache. A gradient written is not
    read again soon, and putting it in the cache cost more than computing it: on the
    machine of the benchmarks, 3.3 s of the kernel's time for W10's 1.6 GB, against
    0.2 s (docs/dask.md, "Files"). A file system that refuses direct I/O (tmpfs) is
    written through the cache."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    done = 0
    direct = getattr(os, "O_DIRECT", 0)
    if direct and len(data) >= _ALIGN:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | direct, 0o666)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                done = _write_direct(fd, data)
            finally:
                os.close(fd)
    if done < len(data) or not data:
        with open(path, "r+b" if done else "wb") as f:
            f.seek(done)
            f.write(data[done:])


def _write_direct(fd: int, data: memoryview) -> int:
    """Write the whole pieces of ``data`` to ``fd`` (opened ``O_DIRECT``) through this
    thread's aligned buffer; returns how many bytes were written (fewer where the file
    system refused, for the rest to be written through the cache)."""
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None:
        buffer = _buffers.buffer = mmap.mmap(-1, _PIECE)  # page-aligned
    whole = len(data) - len(data) % _ALIGN
    done = 0
    try:
        while done < whole:
            n = min(_PIECE, whole - done)
            buffer[:n] = data[done : done + n]
            written = os.write(fd, memoryview(buffer)[:n])
            if not written:  # (a file system that takes nothing: the cache takes the rest)
                break
            done += written
    except OSError as e:
        if e.errno != errno.EINVAL:  # not a refusal of direct I/O: a real failure
            raise
    return done - done % _ALIGN


class Stored(da.Array):
    """An array of a group read back (lazily), with ``shown``: the part of it a table
    shows, learnt in the pass that wrote it (``layout.viewable`` takes it instead of
    reading the store again; an operation on the array gives a plain Dask array)."""

    shown: Any = None

    @classmethod
    def of(cls, a: Any, shown: Any) -> Any:
        if shown is None:
            return a
        stored = cls(a.dask, a.name, a.chunks, dtype=a.dtype)
        stored.shown = shown
        return stored


def read_zarr_group(path: str) -> dict[str, Any]:
    """The arrays of a Zarr group, lazily (what ``--save out.zarr`` wrote)."""
    import zarr

    return _arrays_of(zarr.open_group(os.path.expanduser(path), mode="r"))


def _arrays_of(group: Any) -> dict[str, Any]:
    """The arrays of a Zarr group (not its subgroups), lazily, in their stored chunks."""
    import zarr

    return {k: da.from_zarr(v) for k, v in group.members() if isinstance(v, zarr.Array)}
