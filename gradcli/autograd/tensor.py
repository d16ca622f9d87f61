"""The tensor: an array with ``grad``, ``requires_grad`` and ``grad_fn``, as PyTorch's.

Operators and methods (``x + y``, ``x.sum()``) are installed by the registry from each
primitive's registration; this module holds what every tensor is, how leaves are made, and
how one primitive call is recorded (:func:`record`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .backend import NUMPY, as_data
from .node import SEQ, AccumulateGrad, Node
from .state import GRAD, NO_GRAD, OFF_DEFAULT, RECORD, STATE, mode

_ndarray = np.ndarray
_array = np.array
#: makes a Tensor without running its __init__ (see Tensor): every operation makes one
_new = object.__new__


class Size(tuple[int, ...]):
    """A shape, as ``x.size()`` gives it: a tuple of ints, shown as torch shows ``torch.Size``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"gradcli.Size({list(self)})"

    __str__ = __repr__

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        n = 1
        for d in self:
            n *= d
        return n


def _dim(dim: Any, ndim: int) -> int:
    """Axis ``dim`` of a tensor of ``ndim`` axes as a non-negative int; torch's errors for
    another type and for an axis out of range."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"size(): argument 'dim' must be int, not {type(dim).__name__}")
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
            f"but got {dim})"
        )
    return int(dim) % ndim


class Tensor:
    """An n-dimensional array that records the operations made on it, for backpropagation.

    Made by :func:`tensor`, :func:`from_numpy`, the constructors and the operations, or as
    torch's legacy constructor makes one: ``Tensor(data, requires_grad=False)``. The engine
    makes the object every operation makes with ``_new(Tensor)`` (``object.__new__``: no
    ``__init__`` runs) and sets every field itself."""

    __slots__ = ("__weakref__", "_acc", "_label", "data", "grad", "grad_fn", "requires_grad")
    __array_ufunc__ = None  # make ndarray (op) Tensor defer to Tensor's reflected operators

    data: Any
    grad: Tensor | None
    requires_grad: bool
    grad_fn: Node | None
    #: a leaf's accumulator, weakly (see :func:`accumulator`)
    _acc: weakref.ref[AccumulateGrad] | None

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None) -> None:
        arr = np.asarray(data.data if type(data) is Tensor else data, dtype=dtype)
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float64)
        self.data = arr
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.grad_fn = None
        self._acc = None

    # --- basic properties ---------------------------------------------------------
    @property
    def label(self) -> str | None:
        """The name shown by ``gradcli graph`` and ``explain`` (an input's or a binding's),
        None for any other tensor. Set only where a name is given: the operations, which
        make every tensor, leave it unset (one store less each)."""
        return getattr(self, "_label", None)

    @label.setter
    def label(self, name: str | None) -> None:
        self._label = name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    def size(self, dim: int | None = None) -> Any:
        """The shape as a :class:`Size` (a tuple), or the length of axis ``dim``, as torch's
        ``x.size()`` and ``x.size(0)``; ``numel()`` is the number of elements."""
        shape = self.data.shape
        if dim is None:
            return Size(shape)
        return shape[_dim(dim, len(shape))]

    def numel(self) -> int:
        """The number of elements."""
        return int(self.data.size)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def retains_grad(self) -> bool:
        fn = self.grad_fn
        return fn is not None and fn.retained is not None and fn.retained() is self

    def numpy(self) -> Any:
        """The array itself (no copy), refused while it requires grad, as in torch."""
        if self.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. "
                "Use tensor.detach().numpy() instead."
            )
        return self.data

    def item(self) -> float:
        data = self.data
        try:
            return float(data.item())  # the size is asked only when NumPy refuses
        except ValueError:
            if data.size != 1:
                raise RuntimeError(
                    f"a Tensor with {data.size} elements cannot be converted to Scalar"
                ) from None
            raise

    def __float__(self) -> float:
        return self.item()

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.data.size} values is ambiguous")
        return bool(self.data.item())

    def __len__(self) -> int:
        return len(self.data)

    def tolist(self) -> Any:
        return self.data.tolist()

    def zero_(self) -> Tensor:
        """Set every element to zero in place (``x.grad.zero_()``)."""
        self.data[...] = 0
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make this leaf collect ``.grad`` (or stop it), in place."""
        if self.grad_fn is not None:
            if requires_grad:  # a non-leaf already requires grad: nothing to change
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        return const(self.data)

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf in ``.grad`` after backward (leaves do)."""
        fn = self.grad_fn
        if fn is not None:
            fn.retained = weakref.ref(self)

    def __repr__(self) -> str:
        """PyTorch's look: ``tensor([5., 6.])``, ``tensor(10.0995, grad_fn=<SumBackward0>)``."""
        a = self.data
        finite = a[np.isfinite(a)]
        whole = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        body = np.array2string(
            a,
            separator=", ",
            prefix="tensor(",
            precision=4,
            floatmode="maxprec" if whole else "fixed",
        )
        extra = ""
        if a.dtype != np.float64:
            extra += f", dtype={a.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn={self.grad_fn!r}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __str__ = __repr__
    __hash__ = object.__hash__

    if TYPE_CHECKING:
        # Installed by the registry from each registration (docs/engine.md): operators,
        # and a method for every function torch has as one (x.sum(), x.tanh(), x.T).
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __getitem__(self, key: Any) -> Tensor: ...
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __eq__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __getattr__(self, name: str) -> Any: ...

    # In-place arithmetic: on data when no graph is recorded (an optimiser's step under
    # no_grad), refused on a leaf that requires grad (as torch), out of place otherwise.
    def _inplace(self, other: Any, op: str) -> Tensor:
        from . import registry

        if mode() != NO_GRAD and (self.requires_grad or getattr(other, "requires_grad", False)):
            if self.requires_grad and self.grad_fn is None:
                raise RuntimeError(
                    "a leaf Variable that requires grad is being used in an in-place operation."
                )
            return registry.FUNCTIONS[op].call(self, other)
        NUMPY.update(op, self.data, other.data if isinstance(other, Tensor) else other)
        return self

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(other, "add")

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(other, "subtract")

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(other, "multiply")

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(other, "divide")

    def __pos__(self) -> Tensor:
        return self

    if TYPE_CHECKING:
        # backward.backward itself (installed at the end of this module: a method that
        # only called it cost a call of every backward pass)
        def backward(
            self,
            gradient: Any = None,
            retain_graph: bool | None = None,
            create_graph: bool = False,
        ) -> None: ...


def const(data: Any, requires_grad: bool = False) -> Tensor:
    """Wrap an array as a leaf tensor (no copy), one that requires no grad by default."""
    t = _new(Tensor)
    # NumPy returns scalars, not 0-d arrays, from ufuncs on 0-d input: keep arrays only.
    t.data = data if type(data) is _ndarray else as_data(data)
    t.grad = None
    t.requires_grad = bool(requires_grad)
    t.grad_fn = None
    t._acc = None
    return t


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (float64 unless ``dtype`` is given)."""
    if type(data) is Tensor:
        data = data.data
    # const() written out, and np.array without a dtype argument when there is none: this
    # is how every leaf of the tensor API is made (W1 makes two a call)
    arr = _array(data) if dtype is None else _array(data, dtype=dtype)
    dt = arr.dtype
    if dt is not _FLOAT64 and dt.kind != "f":
        arr = arr.astype(_FLOAT64)
    t = _new(Tensor)
    t.data = arr
    t.grad = None
    t.requires_grad = requires_grad is True or bool(requires_grad)
    t.grad_fn = None
    t._acc = None
    return t


def from_numpy(arr: Any, requires_grad: bool = False) -> Tensor:
    """A leaf tensor sharing memory with ``arr`` (no copy), as ``torch.from_numpy``."""
    return const(np.asarray(arr), requires_grad)


#: constants of Python numbers, by dtype and value (read-only, shared)
_FLOAT64 = np.dtype(np.float64)
_SCALARS: dict[Any, dict[float, Tensor]] = {}
#: the constants of float64, the common case, which binary operators look up directly
FLOAT64_SCALARS: dict[float, Tensor] = _SCALARS.setdefault(_FLOAT64, {})


def lift(x: Any, like: Any = None) -> Tensor:
    """Turn a Python number or array into a constant tensor of ``like``'s dtype.

    Python numbers reuse one read-only constant per value and dtype: ``x * 1.01`` in a loop
    makes no new array, and NumPy combines a 0-d array with another faster than a float.
    """
    if type(x) is Tensor:
        return x
    dtype = like.data.dtype if type(like) is Tensor else _FLOAT64
    tx = type(x)
    if tx is float or tx is int:
        by_value = _SCALARS.get(dtype)
        if by_value is not None:
            t = by_value.get(x)
            if t is not None:
                return t
        return _scalar(x, dtype)
    return const(np.asarray(x, dtype=dtype))


def _scalar(x: float, dtype: Any) -> Tensor:
    t = const(NUMPY.constant(x, dtype))
    if x == x and x != 0:  # nan is never found again; -0.0 would be found as 0.0
        by_value = _SCALARS.setdefault(dtype, {})
        if len(by_value) > 4096:
            by_value.clear()
        by_value[x] = t
    return t


def accumulator(x: Tensor) -> AccumulateGrad:
    """The node of leaf ``x``. The leaf refers to it weakly (it refers to the leaf), so a
    leaf outliving its graphs holds no node and no cycle is made."""
    ref = x._acc
    acc = ref() if ref is not None else None
    if acc is None:  # W1 makes two a call
        acc = AccumulateGrad()
        acc.variable = x
        acc.seq = next(SEQ)
        acc.uses = 0
        x._acc = _weakref(acc)
    return acc


_weakref = weakref.ref


def edge(x: Any) -> Node | AccumulateGrad | None:
    """Where the gradient of an input goes: its node, its leaf's accumulator, or nowhere."""
    if type(x) is not Tensor:
        return None
    fn = x.grad_fn
    if fn is not None:
        return fn
    return accumulator(x) if x.requires_grad else None


def link(x: Any) -> Node | AccumulateGrad | None:
    """:func:`edge`, counted as one more use of its target (see ``Node.uses``)."""
    to = edge(x)
    if to is not None:
        to.uses += 1
    return to


def tensor_on_edge(value: Any, to: Node | AccumulateGrad | None) -> Tensor:
    """A tensor of ``value`` whose gradient flows to ``to``: a saved value in the graph again."""
    t = const(value)
    if to is None:
        return t
    t.requires_grad = True
    if type(to) is Node:
        t.grad_fn = to
    else:
        t._acc = weakref.ref(to)  # type: ignore[arg-type]
    return t


def record(
    out: Any,
    prim: Any,
    inputs: tuple[Any, ...],
    saved: tuple[Any, ...] = (),
    ctx: Any = None,
    redo: Any = None,
) -> Tensor:
    """The tensor of one primitive call, and its node when grad mode is on and an input
    requires grad. ``saved``: the input values the rule reads (the caller keeps only
    those, see ``Primitive.saved``); the output is kept when the primitive reads it.
    ``redo(*arrays of inputs)``: computes ``out`` again, for a plan (replay.py); without
    it, an evaluation making this op from a value of the inputs is not replayed."""
    if type(out) is not _ndarray:
        out = as_data(out)
    t = _new(Tensor)
    t.data = out
    t.grad = None
    # As the elementwise families' apply: the thread's mode is read only when OFF_DEFAULT
    # says some thread is off the default (docs/engine.md, "State").
    for x in inputs:
        if type(x) is Tensor and x.requires_grad:
            if OFF_DEFAULT and not STATE.mode:
                break  # no_grad
            node = Node()
            node.prim = prim
            if len(inputs) == 1:  # x requires grad: its node, or its leaf's accumulator
                to: Node | AccumulateGrad | None = x.grad_fn
                if to is None:
                    to = accumulator(x)
                to.uses += 1
                node.next = (to,)
            else:
                node.next = tuple([link(i) for i in inputs])
            node.saved = saved
            node.ans = out if prim.save_ans else None
            node.ctx = ctx
            node.seq = next(SEQ)
            node.uses = 0
            node.retained = None
            t.requires_grad = True
            t.grad_fn = node
            if OFF_DEFAULT and STATE.mode > GRAD:  # graph's trace, or a plan's recording
                note(t, prim.name, inputs, redo, STATE.mode)
            return t
    t.requires_grad = False
    t.grad_fn = None
    t._acc = None
    if OFF_DEFAULT and STATE.mode > GRAD:
        note(t, prim.name, inputs, redo, STATE.mode)
    return t


def note(t: Tensor, name: str, inputs: tuple[Any, ...], redo: Any, mode: int) -> None:
    """An op seen in grad mode TRACE (``gradcli graph``: the ops that made a node) or
    RECORD (a compiled program's plan, replay.py: every op, with its ``redo``)."""
    if mode == RECORD:
        recorder = STATE.recorder
        if recorder is not None:
            recorder.op(t, inputs, redo)
    elif t.grad_fn is not None:
        trace(t, name, inputs)


def trace(t: Tensor, name: str, inputs: tuple[Any, ...]) -> None:
    """Note one op for ``gradcli graph``, its constant inputs as tensors too."""
    trace_list = STATE.trace
    if trace_list is not None:
        like = next(i for i in inputs if type(i) is Tensor)
        trace_list.append((t, name, tuple(lift(i, like) for i in inputs)))


# Last: backward.py needs this module's names, and Tensor.backward is its function.
from .backward import backward as _backward  # noqa: E402

setattr(Tensor, "backward", _backward)  # noqa: B010
