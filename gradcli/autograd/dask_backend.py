"""The array namespace on Dask (docs/engine.md, "Backends"): the names of
:class:`~gradcli.autograd.backend.NumpyBackend`, each building a lazy Dask graph.

Importing this module needs ``dask[array]`` (the ``gradcli[dask]`` extra) and registers
Dask arrays with the engine: a tensor whose data is a Dask array stays lazy through every
op, forward and backward, until the caller computes. What Dask cannot do lazily is refused
with an ``InputError`` naming the function (:func:`refuse`), never computed in memory
behind the caller's back.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np

from ..errors import InputError
from ..i18n import msg
from . import backend
from .backend import _FUNCTIONS, NUMPY, NumpyBackend, _count

#: NumPy names that Dask spells otherwise
_SPELLED = {"abs": da.absolute}
#: functions the rules call only on small index arrays, never on a tensor's data
_NUMPY_ONLY = ("argsort",)
#: linear algebra on chunked matrices: refused (docs/dask.md, "What is refused")
_LINALG = ("det", "inv", "solve", "svd", "slogdet", "cholesky")

#: the default chunk size, in bytes: with Dask's own default (128 MiB) W10 held 1.6 GB at
#: a time (a few intermediates of a chunk per thread), with a quarter of it 0.55 GB, and
#: was no slower (docs/dask.md, "Chunks")
DEFAULT_CHUNK_BYTES = 32 * 2**20


def refuse(function: str, why: str = "") -> InputError:
    """The error for a function Dask cannot compute lazily here."""
    return InputError(
        msg(
            "`{function}` is not available with the Dask backend{why}: use --backend "
            "numpy (the arrays must then fit in memory)",
            function=function,
            why=why,
        )
    )


def _refused(name: str) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise refuse(name)

    fail.__name__ = name
    return fail


#: the chunk size of the arrays an evaluation makes, in bytes (per thread and task:
#: ``chunk_size``)
_CHUNK_BYTES: contextvars.ContextVar[int] = contextvars.ContextVar(
    "gradcli_chunk_bytes", default=DEFAULT_CHUNK_BYTES
)


@contextlib.contextmanager
def chunk_size(nbytes: int | None) -> Iterator[None]:
    """New arrays (inputs, broadcast gradients, scatters) in chunks of ``nbytes``."""
    token = _CHUNK_BYTES.set(DEFAULT_CHUNK_BYTES if nbytes is None else int(nbytes))
    try:
        yield
    finally:
        _CHUNK_BYTES.reset(token)


class DaskBackend:
    """Dask as an array namespace (one, registered for ``dask.array.Array``). The chunks
    of the arrays it makes are :func:`chunk_size`'s."""

    name = "dask"
    ndarray = da.Array
    LinAlgError = np.linalg.LinAlgError
    float32 = np.float32
    float64 = np.float64

    def __init__(self) -> None:
        for fn in _FUNCTIONS:
            if fn not in DaskBackend.__dict__:  # a method below gives NumPy's meaning
                setattr(self, fn, _SPELLED.get(fn) or getattr(da, fn, None) or getattr(np, fn))
        for fn in _NUMPY_ONLY:
            setattr(self, fn, getattr(np, fn))
        for fn in _LINALG:
            setattr(self, fn, _refused(fn))

    if TYPE_CHECKING:  # the functions set in __init__

        def __getattr__(self, name: str) -> Any: ...

    # --- chunking ---------------------------------------------------------------------
    def chunks_for(self, shape: tuple[int, ...], dtype: Any) -> tuple[tuple[int, ...], ...]:
        """How an array of ``shape`` is split: chunks of at most :func:`chunk_size` (at least
        one element), each axis split as evenly as Dask's ``"auto"`` splits it. The same
        for every array of one shape and dtype, so inputs, seeds and broadcast gradients
        line up chunk for chunk."""
        dtype = np.dtype(dtype)
        limit = max(_CHUNK_BYTES.get(), dtype.itemsize)
        return da.core.normalize_chunks("auto", shape, limit=limit, dtype=dtype)

    def from_array(self, x: Any) -> Any:
        """An array (NumPy's, or a memory map, read chunk by chunk when computed) as a Dask
        array in this backend's chunks."""
        if isinstance(x, da.Array):
            return x
        # name=False: a name of its own, not a hash of the data (a pass over all of it)
        return da.from_array(x, chunks=self.chunks_for(x.shape, x.dtype), asarray=True, name=False)

    # --- reductions with NumPy's keyword spelling --------------------------------------
    @staticmethod
    def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return da.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return da.prod(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def max(x: Any, axis: Any = None, keepdims: bool = False, initial: Any = None) -> Any:
        if initial is None:
            return da.max(x, axis=axis, keepdims=keepdims)
        if x.size == 0:
            shape = _reduced_shape(x.shape, axis, keepdims)
            return da.full(shape, initial, dtype=x.dtype)
        return da.maximum(da.max(x, axis=axis, keepdims=keepdims), initial)

    @staticmethod
    def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return da.min(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """The sum over the count, as the NumPy backend computes a mean."""
        n = _count(x.shape, axis)
        return da.sum(x, axis=axis, keepdims=keepdims) / x.dtype.type(n)

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        """``x`` broadcast to ``shape``, in chunks of the backend's size: a single value
        (the gradient of a full sum) broadcast to 10⁸ elements is not one chunk of 10⁸."""
        shape = tuple(shape)
        if not isinstance(x, da.Array):
            x = np.asarray(x)
        target = self.chunks_for(shape, x.dtype)
        if isinstance(x, da.Array) and x.ndim:
            # an axis x already has at full length keeps x's chunks
            lead = len(shape) - x.ndim
            target = tuple(
                x.chunks[i - lead] if i >= lead and x.shape[i - lead] == shape[i] else c
                for i, c in enumerate(target)
            )
        elif not isinstance(x, da.Array):
            x = da.from_array(x, chunks=x.shape or ())
        return da.broadcast_to(x, shape, chunks=target)

    @staticmethod
    def constant(value: float, dtype: Any) -> Any:
        return NUMPY.constant(value, dtype)

    # --- shapes: NumPy's meaning where Dask's differs ------------------------------------
    @staticmethod
    def reshape(x: Any, shape: Any) -> Any:
        """NumPy's reshape. Dask reshapes only by merging or splitting whole chunks: when
        it cannot, the trailing axes are first made whole (chunks along the first only)."""
        if not isinstance(x, da.Array):
            return np.reshape(x, shape)
        try:
            return da.reshape(x, shape)
        except NotImplementedError:
            pass
        # through one axis: merged (the trailing axes made whole first), then split, its
        # chunks made whole multiples of the new trailing axes
        shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if -1 in shape:
            rest = math.prod(n for n in shape if n != -1)
            shape = tuple(x.size // max(rest, 1) if n == -1 else n for n in shape)
        flat = x.rechunk({i: -1 for i in range(1, x.ndim)}).reshape(-1) if x.ndim > 1 else x
        inner = max(math.prod(shape[1:]), 1)
        per_chunk = max(_CHUNK_BYTES.get() // max(x.dtype.itemsize, 1), 1)
        return flat.rechunk(max(inner, per_chunk // inner * inner)).reshape(shape)

    @staticmethod
    def transpose(x: Any, axes: Any = None) -> Any:
        return da.transpose(x, None if axes is None else tuple(int(a) for a in axes))

    # --- what only a backend may know ---------------------------------------------------
    @staticmethod
    def getitem(x: Any, key: Any) -> Any:
        """NumPy indexing. Integer arrays on several axes (a diagonal) are taken element
        by element (Dask's ``vindex``), their axis placed where NumPy places it."""
        try:
            return x[key]
        except NotImplementedError:
            parts = key if isinstance(key, tuple) else (key,)
            advanced = [
                i for i, p in enumerate(parts) if not isinstance(p, slice)
            ]  # ints and integer arrays (a None, an ellipsis or a mask is refused below)
            if any(p is None or p is Ellipsis or _is_mask(p) for p in parts):
                raise refuse("this indexing") from None
            out = x.vindex[
                tuple(np.asarray(p) if i in advanced else p for i, p in enumerate(parts))
            ]
            if advanced and advanced == list(range(advanced[0], advanced[-1] + 1)):
                # adjacent advanced indices: NumPy puts their axes where they stand
                nb = np.broadcast_shapes(*(np.shape(parts[i]) for i in advanced))
                out = da.moveaxis(
                    out, tuple(range(len(nb))), tuple(range(advanced[0], advanced[0] + len(nb)))
                )
            return out

    @staticmethod
    def index_array(values: Any) -> Any:
        return NUMPY.index_array(values)

    @staticmethod
    def as_float(mask: Any, like: Any) -> Any:
        return mask.astype(like.dtype)

    @staticmethod
    def astype(x: Any, dtype: Any) -> Any:
        return x if x.dtype == dtype else x.astype(dtype)

    # Summing a broadcast gradient back down: NumPy's method calls work on Dask arrays.
    sum_to = staticmethod(NumpyBackend.sum_to)

    def scatter(self, g: Any, key: tuple[Any, ...], shape: tuple[int, ...]) -> Any:
        """Zeros of ``shape`` with ``g`` at ``key``. Integer indices naming one element
        twice would have to add up there (``np.add.at``), which Dask cannot do lazily:
        refused."""
        if _repeats(key, shape):
            raise refuse(
                "indexing with repeated integers", " (their gradients would add up in place)"
            )
        out = da.zeros(shape, dtype=g.dtype, chunks=self.chunks_for(shape, g.dtype))
        arrays = [p for p in key if isinstance(p, np.ndarray) and p.dtype.kind in "iu"]
        if len(arrays) > 1:
            # Dask assigns along one integer array at most: integer arrays on every axis
            # (a diagonal) become one, into the elements in a row
            if len(arrays) != len(key) or len(key) != len(shape):
                raise refuse("this indexing")
            flat = np.ravel_multi_index(
                tuple(
                    np.broadcast_arrays(
                        *(a % max(n, 1) for a, n in zip(arrays, shape, strict=True))
                    )
                ),
                shape,
            )
            line = out.reshape(-1)
            line[flat.ravel()] = da.broadcast_to(g, flat.shape).reshape(-1)
            return line.reshape(shape)
        out[key] = g
        return out

    @staticmethod
    def update(op: str, target: Any, value: Any) -> None:
        raise refuse(f"in-place {op}")

    @staticmethod
    def multiply_into(g: Any, factor: Any) -> Any:
        return g * factor

    @staticmethod
    def divide_into(g: Any, divisor: Any) -> Any:
        return g / divisor

    refuse = staticmethod(refuse)
    quiet = staticmethod(NUMPY.quiet)
    count_errors = staticmethod(NUMPY.count_errors)

    @staticmethod
    def all_finite(x: Any) -> bool:
        # Asked by rules that branch on the data (a singular matrix); those functions
        # are refused on Dask, so this is never a whole computation in disguise.
        raise refuse("a check of the values")

    @staticmethod
    def default_rng(seed: int) -> Any:
        return np.random.default_rng(seed)


def _is_mask(part: Any) -> bool:
    return isinstance(part, np.ndarray) and part.dtype.kind == "b"


def _repeats(key: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
    """Whether the integer index arrays of ``key`` (broadcast together, as NumPy pairs
    them) name one element twice, negative indices counted as NumPy counts them."""
    from .ops.indexing import _axes_taken

    widths = [_axes_taken(p) for p in key]
    rest = len(shape) - sum(w for w in widths if w is not None)
    arrays = []
    axis = 0
    for part, width in zip(key, widths, strict=True):
        width = max(rest, 0) if width is None else width
        if isinstance(part, np.ndarray) and part.dtype.kind in "iu" and axis < len(shape):
            arrays.append(part % max(shape[axis], 1))
        axis += width
    if not arrays:
        return False
    rows = np.stack([a.ravel() for a in np.broadcast_arrays(*arrays)], axis=1)
    return bool(np.unique(rows, axis=0).shape[0] != rows.shape[0])


def _reduced_shape(shape: tuple[int, ...], axis: Any, keepdims: bool) -> tuple[int, ...]:
    axes = range(len(shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = {a % len(shape) for a in axes}
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


DASK = DaskBackend()
backend.register(da.Array, DASK)
