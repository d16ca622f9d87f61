"""The array namespace: everything forward functions and rules may call, on NumPy.

Forward functions and derivative rules never import NumPy; they call the namespace they are
given (``xp``). What is NumPy-specific lives here and only here: which functions exist and
under which names, whether a buffer may be added to in place, the error state, scatter-add
for indexing, summing a broadcast gradient back down (``sum_to``). Another array library
is one more module that offers the same names: ``dask_backend.py`` is Dask's
(docs/engine.md, "Backends"); :func:`backend_of` says which namespace an array belongs to.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

#: NumPy functions offered under their own names (the array-API subset the rules use)
_FUNCTIONS = (
    "negative", "abs", "sign", "floor", "ceil", "round", "sqrt", "square", "exp", "expm1",
    "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "add", "subtract", "multiply",
    "divide", "power", "maximum", "minimum", "arctan2", "where", "matmul", "reshape",
    "transpose", "swapaxes", "flip", "expand_dims", "concatenate", "stack",
    "cumprod", "zeros", "ones", "zeros_like", "ones_like", "full", "eye", "arange",
    "linspace", "isfinite", "clip", "less", "less_equal", "greater", "greater_equal", "equal",
    "not_equal", "argsort", "delete", "asarray", "empty", "einsum",
)  # fmt: skip
_LINALG = ("det", "inv", "solve", "svd", "slogdet", "cholesky")
#: read-only 0-d constants, by dtype and value (see NumpyBackend.constant)
_CONSTANTS: dict[Any, dict[float, Any]] = {}
_isfinite = math.isfinite


def _quiet_state() -> tuple[Any, Any] | None:
    """NumPy's floating-point error state (a context variable, NumPy 2) and its "ignore
    everything" value, made once: ``np.errstate`` builds that value on every entry, a
    microsecond, a sixteenth of the tutorial's whole backward pass. None on a NumPy that
    keeps its state otherwise (``quiet`` then uses ``np.errstate``)."""
    try:
        from numpy._core.umath import _extobj_contextvar, _make_extobj

        return _extobj_contextvar, _make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError):
        return None


_QUIET = _quiet_state()


class _ErrorState:
    """``np.errstate`` with a state made once: set through NumPy's context variable."""

    __slots__ = ("_state", "_token")

    def __init__(self, state: Any) -> None:
        self._state = state

    def __enter__(self) -> None:
        self._token = _QUIET[0].set(self._state)  # type: ignore[index]

    def __exit__(self, *exc: object) -> None:
        _QUIET[0].reset(self._token)  # type: ignore[index]


class _Quiet(_ErrorState):
    """``np.errstate(all="ignore")`` with the state made once (see :func:`_quiet_state`)."""

    __slots__ = ()

    def __init__(self) -> None:
        self._state = _QUIET[1]  # type: ignore[index]


def _make_state(**kwargs: Any) -> Any:
    from numpy._core.umath import _make_extobj

    return _make_extobj(**kwargs)


#: error states that call a counting callback, made once per callback
_COUNTING: dict[Any, Any] = {}


_ADD_REDUCE: Any = np.add.reduce
_new_array = np.ndarray
#: backward's seed from a float64 scalar: one read-only 1.0 (backward.py), and the views
#: of it broadcast to a shape (a full sum's gradient, where most backward passes start)
ONE64 = np.ones((), np.float64)
ONE64.flags.writeable = False
_ONE64_VIEWS: dict[tuple[int, ...], Any] = {}
_MULTIPLY_REDUCE: Any = np.multiply.reduce
_MAXIMUM_REDUCE: Any = np.maximum.reduce
_MINIMUM_REDUCE: Any = np.minimum.reduce


def _takes_out_ellipsis() -> bool:
    """Whether this NumPy's ufuncs take ``out=...`` (NumPy 2.3 on): the result is then an
    array even when it is 0-d, where it would otherwise be a NumPy scalar."""
    try:
        return type(_ADD_REDUCE(np.zeros(2), out=...)) is np.ndarray
    except (TypeError, ValueError):
        return False


_OUT_ARRAY = _takes_out_ellipsis()


class NumpyBackend:
    """NumPy as an array namespace. Attributes are plain functions (no method lookup
    through a class on the hot path)."""

    name = "numpy"
    ndarray = np.ndarray
    LinAlgError = np.linalg.LinAlgError
    float32 = np.float32
    float64 = np.float64

    if TYPE_CHECKING:  # the functions set in __init__

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self) -> None:
        for fn in _FUNCTIONS:
            setattr(self, fn, getattr(np, fn))
        for fn in _LINALG:
            setattr(self, fn, getattr(np.linalg, fn))
        # The same ufuncs through ndarray's operators, which skip the ufunc's argument
        # parsing: a third faster on small arrays.
        self.add, self.subtract = operator.add, operator.sub
        self.multiply, self.divide = operator.mul, operator.truediv
        self.negative = operator.neg

    # --- reductions with NumPy's keyword spelling ------------------------------------
    # np.sum(x) is _ADD_REDUCE(x) behind three Python-level calls (2.5 µs of a small
    # backward pass): the ufuncs' reduce directly, the same bits.
    @staticmethod
    def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _ADD_REDUCE(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def sum_array(x: Any, axis: Any, keepdims: bool) -> Any:
        """:meth:`sum` as an array when it is 0-d too (a full sum), never a NumPy scalar:
        through ``out=...`` where NumPy takes it, else the scalar converted (the same
        value); ``np.asarray`` on the scalar costs a quarter of a small sum."""
        if _OUT_ARRAY:
            return _ADD_REDUCE(x, axis=axis, keepdims=keepdims, out=...)
        return np.asarray(_ADD_REDUCE(x, axis=axis, keepdims=keepdims))

    @staticmethod
    def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _MULTIPLY_REDUCE(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def max(x: Any, axis: Any = None, keepdims: bool = False, initial: Any = None) -> Any:
        if initial is None:
            return _MAXIMUM_REDUCE(x, axis=axis, keepdims=keepdims)
        return _MAXIMUM_REDUCE(x, axis=axis, keepdims=keepdims, initial=initial)

    @staticmethod
    def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _MINIMUM_REDUCE(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """The sum over the count, as np.mean computes it; a mean of nothing is 0 / 0, nan
        with a counted "invalid value" error, never np.mean's Python warning."""
        n = _count(x.shape, axis)
        total = _ADD_REDUCE(x, axis=axis, keepdims=keepdims)
        return np.divide(total, n, dtype=x.dtype)

    @staticmethod
    def broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
        """A read-only view of ``x`` broadcast to ``shape``. A single value (the gradient
        of a full sum) is viewed with zero strides directly: np.broadcast_to costs 2.5 µs
        a call, a third of a small backward pass."""
        if x is ONE64 and type(shape) is tuple:
            # backward's seed (a float64 scalar's): its views are made once per shape,
            # being read-only views of a read-only value
            view = _ONE64_VIEWS.get(shape)
            if view is None:
                view = _new_array(shape, ONE64.dtype, ONE64, 0, (0,) * len(shape))
                if len(_ONE64_VIEWS) < 256:
                    _ONE64_VIEWS[shape] = view
            return view
        if type(x) is not np.ndarray:
            x = np.asarray(x)  # a NumPy scalar
        if x.ndim == 0:  # (positional arguments: NumPy parses keywords at length)
            return _new_array(shape, x.dtype, x, 0, (0,) * len(shape))
        return np.broadcast_to(x, shape)

    @staticmethod
    def constant(value: float, dtype: Any) -> Any:
        """A read-only 0-d array of ``value`` in ``dtype``, made once: NumPy combines one
        with a small array in two thirds of the time it takes with a Python float."""
        by_value = _CONSTANTS.get(dtype)
        if by_value is None:
            by_value = _CONSTANTS[dtype] = {}
        c = by_value.get(value)
        if c is None:
            c = np.asarray(value, dtype=dtype)
            c.flags.writeable = False
            if value == value and value != 0 and len(by_value) < 4096:
                # (nan is never found again; -0.0 would be found as 0.0)
                by_value[value] = c
        return c

    # --- what only this module may know ------------------------------------------------
    @staticmethod
    def getitem(x: Any, key: Any) -> Any:
        return x[key]

    @staticmethod
    def index_array(values: Any) -> Any:
        """An index list or array as integers (booleans as they are), or None when a value
        is not a whole number. A whole number beyond int64 (``1e20``, a Python int of 70
        bits, a uint64 over 2**63 - 1) becomes the nearest end of int64, out of bounds for
        any axis, where a cast would wrap it round to another number (1e20 to -2**63); the
        caller reports the value as it was given."""
        lo, hi = -(2**63), 2**63 - 1
        arr = np.asarray(values)
        kind = arr.dtype.kind
        if kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                return None
            beyond = np.abs(arr) >= 2.0**63  # the whole floats of int64 are the smaller ones
            if not beyond.any():
                return arr.astype(np.int64)
            out = np.where(beyond, 0.0, arr).astype(np.int64)
            out[beyond & (arr > 0)] = hi
            out[beyond & (arr < 0)] = lo
            return out
        if kind == "u" and arr.dtype.itemsize == 8:
            return np.minimum(arr, np.uint64(hi)).astype(np.int64)
        if kind == "O":  # Python ints too large for any NumPy integer type
            flat: list[int] = []
            for v in arr.ravel().tolist():
                if isinstance(v, float):
                    if not (np.isfinite(v) and v.is_integer()):
                        return None
                    v = int(v)
                if not isinstance(v, int):
                    return None
                flat.append(min(max(v, lo), hi))
            return np.array(flat, dtype=np.int64).reshape(arr.shape)
        return arr if kind in "biu" else None

    @staticmethod
    def as_float(mask: Any, like: Any) -> Any:
        """A boolean mask as 1.0/0.0 in ``like``'s dtype (bool * 1.0 would be float64)."""
        return mask.astype(like.dtype)

    @staticmethod
    def astype(x: Any, dtype: Any) -> Any:
        return x.astype(dtype, copy=False)

    @staticmethod
    def sum_to(x: Any, shape: tuple[int, ...]) -> Any:
        """Sum ``x`` down to ``shape``: the adjoint of broadcasting ``shape`` up to x.shape."""
        if x.shape == shape:
            return x
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1
        )
        return x.sum(axis=axes, keepdims=True).reshape(shape)

    @staticmethod
    def scatter(g: Any, key: tuple[Any, ...], shape: tuple[int, ...]) -> Any:
        """Zeros of ``shape`` with ``g`` added at ``key``; repeated indices accumulate."""
        out = np.zeros(shape, dtype=g.dtype)
        if any(isinstance(k, (np.ndarray, list)) for k in key):
            np.add.at(out, key, g)
        else:
            out[key] = g
        return out

    @staticmethod
    def update(op: str, target: Any, value: Any) -> None:
        """``target op= value`` in place (``op``: add, subtract, multiply, divide)."""
        getattr(np, op)(target, value, out=target)

    @staticmethod
    def multiply_into(g: Any, factor: Any) -> Any:
        """``g * factor`` written into ``g`` (a buffer the caller owns)."""
        return np.multiply(g, factor, out=g)

    @staticmethod
    def divide_into(g: Any, divisor: Any) -> Any:
        """``g / divisor`` written into ``g`` (a buffer the caller owns)."""
        return np.divide(g, divisor, out=g)

    @staticmethod
    def quiet() -> Any:
        """No floating-point reports (the backward pass: 0 * inf in a mask is expected)."""
        return _Quiet() if _QUIET is not None else np.errstate(all="ignore")

    @staticmethod
    def quietly(fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` under :meth:`quiet`, the state set and reset directly: a
        ``with NUMPY.quiet()`` block makes an object and calls three methods, 2.5% of the
        tutorial's whole call (W1)."""
        if _QUIET is None:
            with np.errstate(all="ignore"):
                return fn(*args)
        var = _QUIET[0]
        token = var.set(_QUIET[1])
        try:
            return fn(*args)
        finally:
            var.reset(token)

    @staticmethod
    def count_errors(callback: Callable[[str, int], None]) -> Any:
        """Call ``callback(kind, flag)`` on each floating-point error, in this thread.
        Give one long-lived callback: its error state is made once (see :func:`quiet`)."""
        state = _COUNTING.get(callback)
        if state is None and _QUIET is not None:
            try:
                state = _make_state(
                    over="call", divide="call", invalid="call", under="ignore", call=callback
                )
            except TypeError:
                state = None
            if state is not None and len(_COUNTING) < 64:
                _COUNTING[callback] = state
        if state is None:
            return np.errstate(
                over="call", divide="call", invalid="call", under="ignore", call=callback
            )
        return _ErrorState(state)

    @staticmethod
    def all_finite(x: Any) -> bool:
        if type(x) is np.ndarray and x.dtype.kind == "f":
            if x.ndim <= 1 and x.size <= 32:
                # a small vector: its floats checked in Python, a fifth of two NumPy calls
                return all(map(_isfinite, x.tolist())) if x.ndim else _isfinite(float(x))
            if x.size >= 1 << 12:
                # A sum is finite only if every term is (a nan or an inf stays one, or
                # makes nan): one pass and no array made, against isfinite's mask and its
                # second pass. A sum that overflows from finite terms is checked element
                # by element; the overflow is not the caller's to count.
                with _Quiet() if _QUIET is not None else np.errstate(all="ignore"):
                    if _isfinite(float(_ADD_REDUCE(x, axis=None))):
                        return True
        return bool(np.isfinite(x).all())

    @staticmethod
    def default_rng(seed: int) -> Any:
        return np.random.default_rng(seed)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        n = 1
        for s in shape:
            n *= s
        return n
    axes = (axis,) if isinstance(axis, int) else axis
    n = 1
    for a in axes:
        n *= shape[a]
    return n


NUMPY = NumpyBackend()

#: array types of other backends, registered by their modules when first imported: a
#: tensor's data may be one of them, kept as it is (:func:`as_data`)
OTHER_ARRAYS: tuple[type, ...] = ()
_OTHER_BACKENDS: dict[type, Any] = {}


def register(array_type: type, backend: Any) -> None:
    """Make ``backend`` the namespace of arrays of ``array_type`` (another library's)."""
    global OTHER_ARRAYS
    _OTHER_BACKENDS[array_type] = backend
    OTHER_ARRAYS = (*OTHER_ARRAYS, array_type)


def backend_of(x: Any) -> Any:
    """The namespace of array ``x``: NumPy's for NumPy arrays, scalars and anything else
    NumPy takes, another backend's for its arrays."""
    if type(x) is np.ndarray or not OTHER_ARRAYS:
        return NUMPY
    for kind in type(x).__mro__:
        found = _OTHER_BACKENDS.get(kind)
        if found is not None:
            return found
    return NUMPY


def backend_of_any(*xs: Any) -> Any:
    """The namespace of the first of ``xs`` that is another backend's array, else NumPy's:
    an op on a lazy array and a NumPy one is lazy."""
    if OTHER_ARRAYS:
        for x in xs:
            if isinstance(x, OTHER_ARRAYS):
                return backend_of(x)
    return NUMPY


class on_data:
    """``fn(xp, *arrays, **kwargs)`` with ``xp`` the namespace of the arrays: a
    primitive's forward function as an op's ``redo``, for arrays of any backend."""

    __slots__ = ("fn", "kwargs")

    def __init__(self, fn: Callable[..., Any], **kwargs: Any) -> None:
        self.fn = fn
        self.kwargs = kwargs

    def __call__(self, *arrays: Any) -> Any:
        return self.fn(backend_of_any(*arrays), *arrays, **self.kwargs)


def backend_call(name: str, **kwargs: Any) -> on_data:
    """The namespace's function ``name`` (``xp.broadcast_to``) as an op's ``redo``."""
    return on_data(_by_name, name=name, **kwargs)


def _by_name(xp: Any, *arrays: Any, name: str, **kwargs: Any) -> Any:
    return getattr(xp, name)(*arrays, **kwargs)


def eager_only(function: str, *arrays: Any) -> None:
    """Refuse ``function`` on arrays of a backend that cannot compute it lazily (a
    determinant of a chunked matrix): the backend's ``refuse`` names it."""
    if OTHER_ARRAYS:
        for a in arrays:
            xp = backend_of(a)
            if xp is not NUMPY:
                raise xp.refuse(function)


def as_data(x: Any) -> Any:
    """An op's result as a tensor's data: another backend's array as it is, anything else
    as a NumPy array (NumPy gives a scalar, not a 0-d array, from a ufunc on 0-d input)."""
    if OTHER_ARRAYS and isinstance(x, OTHER_ARRAYS):
        return x
    return np.asarray(x)
