"""Values from JSON documents: numbers, nested lists of numbers, non-finite strings.

:func:`value_from_json` turns a parsed JSON value (or a tuple or NumPy array from the Python
API) into a C-contiguous float array, and :func:`read_inputs_object` a JSON object of them
(the ``--inputs`` document, a request's ``"inputs"``; docs/cli.md, docs/json.md). Every bad
value becomes an :class:`~gradcli.errors.InputError` whose message names the input and says
where in it the fault is; a value over ``max_elements`` is a
:class:`~gradcli.errors.LimitError`. The private helpers here (the dtype check, the element
limit, the cast to the dtype) serve the file readers of this package too.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InputError, LimitError
from ..i18n import msg
from .jsonio import _short

#: NumPy's own limit on the number of dimensions; deeper JSON nesting is refused.
MAX_DIMS = 64


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


_FLOAT64 = np.dtype(np.float64)


def _float_dtype(dtype: DTypeArg) -> np.dtype[Any]:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InputError(
            msg("unknown dtype {dtype!r}; use float64 or float32", dtype=dtype)
        ) from None
    if dt.kind != "f":
        raise InputError(msg("unsupported dtype {name}; use float64 or float32", name=dt.name))
    return dt


def _masked_module() -> Any:
    """``numpy.ma`` when something has imported it, else None: no masked value can exist
    before it is, and importing it (5 ms) would slow every command's start."""
    return sys.modules.get("numpy.ma")


def _describe(x: Any) -> str:
    """What a bad JSON item is, in JSON's words (never repr: it may be nested very deeply)."""
    if x is None:
        return "null"
    if _masked_module() is not None and x is np.ma.masked:
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
    return InputError(
        msg(
            "bad value for {name}: {where} is {x}, not a number{hint}",
            name=name,
            where=where,
            x=_describe(x),
            hint=hint,
        )
    )


def _check_limit(name: str, shape: Sequence[int], max_elements: int | None) -> None:
    if max_elements is not None:
        size = math.prod(shape)
        if size > max_elements:
            raise LimitError(
                msg(
                    "{name} has {size} elements (shape {shape}), more than the limit of "
                    "{max_elements}",
                    name=name,
                    size=size,
                    shape=tuple(shape),
                    max_elements=max_elements,
                )
            )


def _from_ndarray(
    arr: np.ndarray, name: str, dt: np.dtype[Any], max_elements: int | None, copy: bool = True
) -> np.ndarray:
    ma = _masked_module()
    if ma is not None and isinstance(arr, ma.MaskedArray):
        # NumPy's asarray() drops a mask without a word, and there is no one right value
        # for a masked element (filled() puts 1e+20 in a float array): the caller chooses.
        if ma.is_masked(arr):
            count = int(ma.count_masked(arr))
            raise InputError(
                msg(
                    "bad value for {name}: a masked array with {count} masked "
                    "element; gradcli has no masks: pass m.filled(value) to choose "
                    "the masked elements' value, or m.data to ignore the mask",
                    name=name,
                    count=count,
                )
                if count == 1
                else msg(
                    "bad value for {name}: a masked array with {count} masked "
                    "elements; gradcli has no masks: pass m.filled(value) to choose "
                    "the masked elements' value, or m.data to ignore the mask",
                    name=name,
                    count=count,
                )
            )
        arr = ma.getdata(arr)  # nothing is masked: the data is the whole value
    if arr.dtype.kind not in "iuf":
        raise InputError(
            msg(
                "bad value for {name}: an array of dtype {dtype} is not numeric",
                name=name,
                dtype=arr.dtype,
            )
        )
    _check_limit(name, arr.shape, max_elements)
    if not copy and type(arr) is np.ndarray and arr.dtype == dt and arr.flags.c_contiguous:
        # Borrowed (copy=False): the caller's memory, through a view gradcli cannot write.
        view = arr.view()
        view.flags.writeable = False
        return view
    with np.errstate(over="ignore"):
        # A copy: the caller's array must not change when gradcli's does (and vice versa).
        return np.array(arr, dtype=dt, order="C", copy=True)


def value_from_json(
    obj: Any,
    *,
    name: str,
    dtype: DTypeArg = "float64",
    max_elements: int | None = None,
    copy: bool = True,
) -> np.ndarray:
    """A value from a JSON document: a number, nested lists of numbers, or a non-finite string.

    Walks the nesting level by level (no recursion, at most :data:`MAX_DIMS` levels), so any
    depth gives a clean :class:`InputError`. Rejects booleans, ``null``, objects, other strings
    and ragged lists, saying where. ``[]`` is a shape-``(0,)`` array. Tuples and NumPy arrays
    (from the Python API) are taken like lists. Returns a C-contiguous array of ``dtype``;
    numbers beyond the dtype's range become ``inf`` as in NumPy (the caller warns about
    non-finite values). ``max_elements`` raises :class:`LimitError` above it. An array is
    copied, unless ``copy`` is false and it is a C-contiguous array of ``dtype`` already:
    then a read-only view of it is returned.
    """
    dt = _float_dtype(dtype)
    if isinstance(obj, np.ndarray):
        return _from_ndarray(obj, name, dt, max_elements, copy)
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
                        msg(
                            "bad value for {name}: ragged nested list: {where} is {item} but "
                            "{where2} is {head}",
                            name=name,
                            where=_where(k, shape),
                            item=_describe(item),
                            where2=_where(0, shape),
                            head=_describe(head),
                        )
                    )
            break
        if len(shape) >= MAX_DIMS:
            raise InputError(
                msg(
                    "bad value for {name}: lists nested more than {MAX_DIMS} levels deep",
                    name=name,
                    MAX_DIMS=MAX_DIMS,
                )
            )
        n = len(head)
        nxt: list[Any] = []
        for k, item in enumerate(level):
            if not _is_seq(item) or len(item) != n:
                raise InputError(
                    msg(
                        "bad value for {name}: ragged nested list: {where} is {item} but "
                        "{where2} is a list of {n}",
                        name=name,
                        where=_where(k, shape),
                        item=_describe(item),
                        where2=_where(0, shape),
                        n=n,
                    )
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


def lazy_value(
    arr: Any, *, name: str, dtype: DTypeArg = "float64", max_elements: int | None = None
) -> Any:
    """A lazy array (another backend's, such as a Dask array) as an input: checked as an
    array is, converted to ``dtype`` lazily, never computed here."""
    dt = _float_dtype(dtype)
    if arr.dtype.kind not in "iuf":
        raise InputError(
            msg(
                "bad value for {name}: an array of dtype {dtype} is not numeric",
                name=name,
                dtype=arr.dtype,
            )
        )
    _check_limit(name, arr.shape, max_elements)
    return arr if arr.dtype == dt else arr.astype(dt)


def read_inputs_object(
    obj: Any, *, dtype: DTypeArg = "float64", max_elements: int | None = None
) -> dict[str, np.ndarray]:
    """The ``--inputs`` document or a request's ``"inputs"``: a JSON object name → value.

    Values are JSON values only; a string such as ``"@x.npy"`` is not read as a file.
    """
    if not isinstance(obj, dict):
        raise InputError(
            msg(
                "inputs must be a JSON object mapping names to values, not {obj}",
                obj=_describe(obj),
            )
        )
    out: dict[str, np.ndarray] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise InputError(msg("input names must be strings, not {key}", key=_describe(key)))
        out[key] = value_from_json(value, name=key, dtype=dtype, max_elements=max_elements)
    return out


def _as_dtype(arr: np.ndarray, dt: np.dtype[Any]) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=dt, order="C")
