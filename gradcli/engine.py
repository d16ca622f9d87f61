"""The autograd engine: a Tensor over NumPy arrays and the primitive operations with their
derivative rules.

How it fits together
--------------------
* Every primitive is an :class:`Op`: a forward function on arrays and, for each argument,
  a vector–Jacobian product (VJP) ``vjp(m, g, ans, ctx, *args)``. "No gradient" for an
  argument is simply ``None`` in the rule table (at the bottom of the primitives section).
* A rule is written once and runs on two kinds of values: plain ``ndarray``s, with ``m`` the
  array namespace :data:`A` (the fast first-order path), or :class:`Tensor`s, with ``m`` the
  tensor namespace :data:`T` — then the backward pass is itself recorded, so it can be
  differentiated again (``backward(create_graph=True)``, Hessians).
* Broadcasting is undone in one place, :func:`_backprop`, never inside a rule.
* ``backward`` walks the graph in an iterative topological order (no recursion: a chain of
  100,000 operations is fine) and keeps the running gradients of intermediates in a dict
  local to the call, so a second ``backward`` starts clean.

All array math of gradcli goes through this module; nothing else imports numpy for math.
"""

from __future__ import annotations

import builtins
import contextlib
import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .errors import DomainError, InvalidValueError, LimitError, ShapeError

Array = np.ndarray
DEFAULT_MAX_ELEMENTS = 10**8

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


class _State:
    """Process-wide switches: gradient recording and the element limit."""

    __slots__ = ("grad_enabled", "max_elements")

    def __init__(self) -> None:
        self.grad_enabled = True
        self.max_elements = DEFAULT_MAX_ELEMENTS


STATE = _State()


class no_grad:
    """Context manager (and decorator) that records no graph, as ``torch.no_grad``."""

    def __enter__(self) -> None:
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc: object) -> None:
        STATE.grad_enabled = self._prev

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with no_grad():
                return fn(*args, **kwargs)

        return wrapper


class no_cycle_collection:
    """Pause Python's cyclic garbage collector while a large graph is built and walked.

    Graphs hold no reference cycles (tensors point to their inputs only), so reference
    counting frees them; the collector would only rescan the growing graph again and
    again, which doubles the time of a 100,000-node program.
    """

    def __enter__(self) -> None:
        import gc

        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        import gc

        if self._was_enabled:
            gc.enable()


@contextlib.contextmanager
def computation(max_elements: int) -> Iterator[floating_errors]:
    """What every evaluation runs under: the element limit, counted floating-point errors
    (yielded, for the warnings) and no cyclic garbage collection."""
    with element_limit(max_elements), floating_errors() as errors, no_cycle_collection():
        yield errors


class element_limit:
    """Context manager that sets the largest number of elements one tensor may have."""

    def __init__(self, max_elements: int) -> None:
        self.max_elements = max_elements

    def __enter__(self) -> None:
        self._prev = STATE.max_elements
        STATE.max_elements = self.max_elements

    def __exit__(self, *exc: object) -> None:
        STATE.max_elements = self._prev


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting of shapes (np.broadcast_shapes stops at 32 dimensions; arrays
    may have 64). Raises ValueError when the shapes do not broadcast."""
    nd = builtins.max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(f"shapes {shapes} cannot be broadcast together")
                out[i] = d
    return tuple(out)


def check_size(shape: Sequence[int], what: str) -> None:
    """Refuse, before allocating, a tensor of more elements than the limit allows."""
    n = math.prod(shape)
    if n > STATE.max_elements:
        raise LimitError(
            f"{what}: a tensor of shape {tuple(shape)} would have {n:,} elements, over the "
            f"limit of {STATE.max_elements:,} (raise it with --max-elements)"
        )


# --------------------------------------------------------------------------------------
# Tensor
# --------------------------------------------------------------------------------------


class Op:
    """A primitive operation: its name, its forward array function and one VJP per argument.

    A VJP is called as ``vjp(m, g, ans, ctx, *args)``; the VJPs of an op of n arguments
    (concatenate, stack, a long sum) need none of the arguments and are called without them
    (``takes_args`` False): passing n arguments to each of n VJPs would cost n².
    """

    __slots__ = ("doc", "fwd", "name", "takes_args", "vjps")

    def __init__(
        self,
        name: str,
        fwd: Callable[..., Array],
        vjps: Sequence[Callable[..., Any] | None],
        doc: str,
        takes_args: bool = True,
    ) -> None:
        self.name = name
        self.fwd = fwd
        self.vjps = tuple(vjps)
        self.doc = doc
        self.takes_args = takes_args


OPS: dict[str, Op] = {}


class Tensor:
    """An n-dimensional array that records the operations made on it, for backpropagation."""

    __slots__ = (
        "_ctx",
        "_op",
        "_parents",
        "_retains_grad",
        "_seq",
        "data",
        "grad",
        "label",
        "requires_grad",
    )
    __array_ufunc__ = None  # make ndarray (op) Tensor defer to Tensor's reflected operators

    data: Array
    grad: Tensor | None
    requires_grad: bool
    label: str | None

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None) -> None:
        arr = np.asarray(data.data if isinstance(data, Tensor) else data, dtype=dtype)
        if arr.dtype.kind not in "f":
            arr = arr.astype(np.float64)
        self.data = arr
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._op: Op | None = None
        self._parents: tuple[Tensor, ...] = ()
        self._ctx: Any = None
        self._retains_grad = False
        self._seq = _next_seq()
        self.label = None

    # --- basic properties ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def is_leaf(self) -> bool:
        return self._op is None

    @property
    def op_name(self) -> str | None:
        """The name of the primitive that made this tensor (None for a leaf)."""
        return None if self._op is None else self._op.name

    @property
    def parents(self) -> tuple[Tensor, ...]:
        return self._parents

    @property
    def T(self) -> Tensor:
        return transpose(self)

    def numpy(self) -> Array:
        """The array itself (no copy), refused while it requires grad, as in torch."""
        if self.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. "
                "Use tensor.detach().numpy() instead."
            )
        return self.data

    def item(self) -> float:
        if self.data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar"
            )
        return float(self.data.item())

    def __float__(self) -> float:
        return self.item()

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.data.size} values is ambiguous")
        return bool(self.data.item())

    def zero_(self) -> Tensor:
        """Set every element to zero in place (``x.grad.zero_()``)."""
        self.data[...] = 0
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make this leaf collect ``.grad`` (or stop it), in place."""
        if self._op is not None:
            if requires_grad:  # a non-leaf already requires grad: nothing to change
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def grad_fn(self) -> GradFn | None:
        """The operation that made this tensor (None for a leaf), as torch's ``grad_fn``."""
        return None if self._op is None else GradFn(self._op)

    def tolist(self) -> Any:
        return self.data.tolist()

    def detach(self) -> Tensor:
        return _const(self.data)

    def retain_grad(self) -> None:
        self._retains_grad = True

    def __len__(self) -> int:
        return len(self.data)

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
        if self._op is not None:
            extra += f", grad_fn={GradFn(self._op)!r}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __str__ = __repr__

    # In-place arithmetic: on data when no graph is recorded (an optimiser's step under
    # no_grad), refused on a leaf that requires grad (as torch), out of place otherwise.
    def _inplace(self, other: Any, fn: Callable[[Any, Any], Tensor], ufunc: Any) -> Tensor:
        if STATE.grad_enabled and (self.requires_grad or getattr(other, "requires_grad", False)):
            if self.requires_grad and self._op is None:
                raise RuntimeError(
                    "a leaf Variable that requires grad is being used in an in-place operation."
                )
            return fn(self, other)
        ufunc(self.data, other.data if isinstance(other, Tensor) else other, out=self.data)
        return self

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(other, add, np.add)

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(other, subtract, np.subtract)

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(other, multiply, np.multiply)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(other, divide, np.divide)

    # --- backpropagation ------------------------------------------------------------
    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate d self / d leaf into every leaf's ``.grad`` (PyTorch's semantics).

        The graph is kept after backward (``retain_graph`` is accepted for compatibility
        and always effectively true), so calling it twice adds the gradients twice.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn"
            )
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g: Any = np.ones_like(self.data)
        else:
            g = gradient.data if isinstance(gradient, Tensor) else np.asarray(gradient)
            if g.shape != self.data.shape:
                raise ShapeError(
                    f"backward: gradient of shape {g.shape} does not match the output "
                    f"shape {self.data.shape}"
                )
            g = g.astype(self.data.dtype, copy=False)
        if create_graph:
            g = gradient if isinstance(gradient, Tensor) else _const(g)
        _backprop(self, g, create_graph)

    # --- operators --------------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        return add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return subtract(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return subtract(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return multiply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return multiply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return divide(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return divide(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return power(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return power(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return matmul(other, self)

    def __neg__(self) -> Tensor:
        return negative(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return absolute(self)

    def __getitem__(self, key: Any) -> Tensor:
        return getitem(self, key)

    # Comparisons give 1.0 / 0.0 and pass no gradient.
    def __lt__(self, other: Any) -> Tensor:
        return _compare(np.less, self, other)

    def __le__(self, other: Any) -> Tensor:
        return _compare(np.less_equal, self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _compare(np.greater, self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _compare(np.greater_equal, self, other)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _compare(np.equal, self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _compare(np.not_equal, self, other)

    __hash__ = object.__hash__


# Every tensor gets the next number when it is made, so a tensor's inputs always have
# smaller numbers than the tensor: backward visits nodes by decreasing number.
_next_seq = itertools.count().__next__


class GradFn:
    """What ``Tensor.grad_fn`` returns: names the operation as torch does (``MulBackward0``)."""

    __slots__ = ("op",)

    def __init__(self, op: Op) -> None:
        self.op = op

    def name(self) -> str:
        return "".join(part.capitalize() for part in self.op.name.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"


def _const(data: Array) -> Tensor:
    """Wrap an array as a tensor that requires no grad (no copy)."""
    t = Tensor.__new__(Tensor)
    # NumPy returns scalars, not 0-d arrays, from ufuncs on 0-d input: keep arrays only.
    t.data = data if type(data) is np.ndarray else np.asarray(data)
    t.grad = None
    t.requires_grad = False
    t._op = None
    t._parents = ()
    t._ctx = None
    t._retains_grad = False
    t._seq = _next_seq()
    t.label = None
    return t


def _record(data: Array, op: Op, parents: tuple[Tensor, ...], ctx: Any = None) -> Tensor:
    """The result of a primitive: a node of the graph when any parent requires grad.

    The hot path of every operation, so ``_const`` is written out here.
    """
    t = Tensor.__new__(Tensor)
    t.data = data if type(data) is np.ndarray else np.asarray(data)
    t.grad = None
    t._retains_grad = False
    t._seq = _next_seq()
    t.label = None
    if STATE.grad_enabled:
        for p in parents:
            if p.requires_grad:
                t.requires_grad = True
                t._op = op
                t._parents = parents
                t._ctx = ctx
                return t
    t.requires_grad = False
    t._op = None
    t._parents = ()
    t._ctx = None
    return t


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (float64 unless ``dtype`` is given)."""
    if isinstance(data, Tensor):
        data = data.data
    arr = np.array(data, dtype=dtype)
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    return Tensor(arr, requires_grad=requires_grad)


def from_numpy(arr: Array, requires_grad: bool = False) -> Tensor:
    """A leaf tensor sharing memory with ``arr`` (no copy), as ``torch.from_numpy``."""
    t = _const(np.asarray(arr))
    t.requires_grad = requires_grad
    return t


_SCALARS: dict[tuple[float, str], Tensor] = {}  # constants of Python numbers, by dtype


def _lift(x: Any, like: Tensor | None = None) -> Tensor:
    """Turn a Python number or array into a constant tensor of ``like``'s dtype.

    Python numbers (``x * 1.01`` in a loop) reuse one read-only constant per value.
    """
    if isinstance(x, Tensor):
        return x
    dtype = like.data.dtype if like is not None else np.dtype(np.float64)
    if (type(x) is float or type(x) is int) and x == x and x != 0:  # not nan, not +-0
        key = (x, dtype.char)
        t = _SCALARS.get(key)
        if t is None:
            if len(_SCALARS) > 4096:
                _SCALARS.clear()
            data = np.asarray(x, dtype=dtype)
            data.flags.writeable = False
            t = _SCALARS[key] = _const(data)
        return t
    return _const(np.asarray(x, dtype=dtype))


# --------------------------------------------------------------------------------------
# Backpropagation
# --------------------------------------------------------------------------------------


def graph_nodes(root: Tensor) -> list[Tensor]:
    """Every tensor ``root`` was made from (constants too), inputs before their results."""
    order: list[Tensor] = []
    visited: set[Tensor] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            stack.extend((p, False) for p in reversed(node._parents) if p not in visited)
    return order


def _backprop(
    root: Tensor,
    g: Any,
    create_graph: bool,
    inputs: Sequence[Tensor] | None = None,
) -> list[Any] | None:
    """Propagate ``g`` = d(loss)/d(root) through the graph.

    With ``inputs`` None, gradients are accumulated into the ``.grad`` of leaves (and of
    non-leaves that ``retain_grad``). Otherwise the gradients of ``inputs`` are returned
    and nothing is written (``autograd.grad``).
    """
    m: Any = T if create_graph else A
    wanted = None if inputs is None else {t: i for i, t in enumerate(inputs)}
    found: list[Any] = [None] * (len(inputs) if inputs is not None else 0)
    grads: dict[Tensor, Any] = {root: g}
    owned: set[Tensor] = set()  # nodes whose gradient buffer is ours to add into in place
    # Nodes in decreasing creation number: every consumer of a node was made after it,
    # so all of them have added their part before the node is visited. No recursion and no
    # separate topological sort; a node is queued when its first gradient arrives.
    queue = [(-root._seq, root)]
    push, popq = heapq.heappush, heapq.heappop
    pop, get = grads.pop, grads.get
    ndarray = np.ndarray
    prev_grad_mode = STATE.grad_enabled
    STATE.grad_enabled = create_graph
    try:
        with np.errstate(all="ignore"):
            while queue:
                node = popq(queue)[1]
                gnode = pop(node)
                op = node._op
                if wanted is not None:
                    if node in wanted:
                        found[wanted[node]] = gnode
                elif op is None or node._retains_grad:
                    _accumulate_grad(node, gnode, node in owned, create_graph)
                if op is None:
                    continue
                parents = node._parents
                ans: Any = node if create_graph else node.data
                if not op.takes_args:
                    args: tuple[Any, ...] = ()
                elif create_graph:
                    args = parents
                elif len(parents) == 1:
                    args = (parents[0].data,)
                else:
                    args = tuple([p.data for p in parents])
                ctx = node._ctx
                for p, rule in zip(parents, op.vjps, strict=False):
                    if rule is None or not p.requires_grad:
                        continue
                    pg = rule(m, gnode, ans, ctx, *args)
                    if pg is None:
                        continue
                    shape = p.data.shape
                    if pg.shape != shape:
                        pg = m.sum_to(pg, shape)
                    # a fresh array from a rule (not g itself, not a view, not a NumPy
                    # scalar, which += would only rebind) can take later terms in place
                    fresh = type(pg) is ndarray and pg.base is None and pg is not gnode
                    prev = get(p)
                    if prev is None:
                        grads[p] = pg
                        push(queue, (-p._seq, p))
                        if fresh:
                            owned.add(p)
                    elif p in owned:
                        prev += pg
                    elif fresh:
                        pg += prev
                        grads[p] = pg
                        owned.add(p)
                    else:
                        total = grads[p] = prev + pg
                        if type(total) is ndarray:
                            owned.add(p)
    finally:
        STATE.grad_enabled = prev_grad_mode
    return found if inputs is not None else None


def _accumulate_grad(node: Tensor, g: Any, owned: bool, create_graph: bool) -> None:
    if create_graph:
        if node.grad is not None:
            node.grad = node.grad + g
        elif isinstance(g, Tensor) and g.requires_grad:
            # a tensor of its own, still in the graph: the same g may reach other leaves
            # (x + y), and .grad is the user's to change in place (zero_), as in torch
            node.grad = multiply(g, 1.0)
        else:
            node.grad = _const(np.array(g.data if isinstance(g, Tensor) else g, copy=True))
        return
    if node.grad is None:
        if not owned:
            g = np.array(g, dtype=node.data.dtype, copy=True)
        node.grad = _const(g)
    else:
        node.grad.data += g


def grad(
    outputs: Tensor,
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    create_graph: bool = False,
    allow_unused: bool = True,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``."""
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        if outputs.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        g: Any = np.ones_like(outputs.data)
    else:
        g = grad_outputs.data if isinstance(grad_outputs, Tensor) else np.asarray(grad_outputs)
        if g.shape != outputs.data.shape:
            raise ShapeError(
                f"grad: grad_outputs of shape {g.shape} does not match the output shape "
                f"{outputs.data.shape}"
            )
    if create_graph:
        g = grad_outputs if isinstance(grad_outputs, Tensor) else _const(np.asarray(g))
    if not outputs.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    found = _backprop(outputs, g, create_graph, ins) or []
    result: list[Tensor | None] = []
    for t, gi in zip(ins, found, strict=True):
        if gi is None:
            result.append(None)
        elif create_graph:
            result.append(gi)
        else:
            result.append(_const(np.array(gi, dtype=t.data.dtype, copy=True)))
    return tuple(result)


# --------------------------------------------------------------------------------------
# Helpers used by forward functions and rules
# --------------------------------------------------------------------------------------


def normalize_axis(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(f"{what}: axis {a} is out of bounds for a {ndim}-D tensor")
        out.append(int(a) % builtins.max(ndim, 1))
    if ndim == 0:
        return ()
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _sum_to_array(x: Array, shape: tuple[int, ...]) -> Array:
    """Sum ``x`` down to ``shape``: the adjoint of broadcasting ``shape`` up to x.shape."""
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1
    )
    return x.sum(axis=axes, keepdims=True).reshape(shape)


def _swap(x: Any) -> Any:
    """Swap the last two axes (the batched matrix transpose)."""
    return x.swapaxes(-1, -2) if isinstance(x, np.ndarray) else swapaxes(x, -1, -2)


def _unreduce(m: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    """Bring the gradient of a reduction back to the shape of its input."""
    if not keepdims:
        g = m.reshape(g, _kept_shape(shape, axes))
    return g


def _is_advanced(key: tuple[Any, ...]) -> bool:
    return any(isinstance(k, (np.ndarray, list)) for k in key)


def _scatter_array(g: Array, key: Any, shape: tuple[int, ...]) -> Array:
    out = np.zeros(shape, dtype=g.dtype)
    k = key if isinstance(key, tuple) else (key,)
    if _is_advanced(k):
        np.add.at(out, k, g)
    else:
        out[k] = g
    return out


def _exclusive_prod(x: Array, axes: tuple[int, ...]) -> Array:
    """For every element, the product of the other elements of its reduced group.

    Exact with zeros (no division): the product of a prefix and a suffix, as torch does.
    """
    if x.size == 0:
        return np.zeros_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = x.transpose(perm)
    lead = xt.shape[: len(keep)]
    flat = xt.reshape((*lead, -1))
    ones = np.ones((*lead, 1), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return (left * right).reshape(xt.shape).transpose(np.argsort(perm))


def _adjugate_t(x: Array) -> Array:
    """Transpose of the adjugate (the gradient of det), valid for singular matrices too."""
    u, s, vt = np.linalg.svd(x)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    adj = (vt.swapaxes(-1, -2) * others[..., None, :]) @ u.swapaxes(-1, -2)
    return (adj * sign[..., None, None]).swapaxes(-1, -2)


# --------------------------------------------------------------------------------------
# Primitives: forward functions and the rule table
# --------------------------------------------------------------------------------------


def _defop(name: str, fwd: Callable[..., Any], *vjps: Callable[..., Any] | None, doc: str) -> Op:
    op = Op(name, fwd, vjps, doc)
    OPS[name] = op
    return op


def _unary(op: Op) -> Callable[[Any], Tensor]:
    fwd = op.fwd

    def apply(x: Any) -> Tensor:
        if type(x) is not Tensor:
            x = _lift(x)
        return _record(fwd(x.data), op, (x,))

    apply.__name__ = op.name
    apply.__doc__ = f"Elementwise {op.name}; d/dx: {op.doc}"
    return apply


def _binary(op: Op) -> Callable[[Any, Any], Tensor]:
    fwd = op.fwd

    def apply(x: Any, y: Any) -> Tensor:
        if type(x) is not Tensor:
            x = _lift(x, y if isinstance(y, Tensor) else None)
        if type(y) is not Tensor:
            y = _lift(y, x)
        xd, yd = x.data, y.data
        # A one-element operand never grows the result: only then is a check needed.
        if xd.shape != yd.shape and xd.size != 1 and yd.size != 1:
            try:
                shape = broadcast_shape(xd.shape, yd.shape)
            except ValueError:
                raise ShapeError(
                    f"{op.name}: shapes {xd.shape} and {yd.shape} cannot be broadcast together"
                ) from None
            check_size(shape, op.name)
        return _record(fwd(xd, yd), op, (x, y))

    apply.__name__ = op.name
    apply.__doc__ = f"Elementwise {op.name} with broadcasting; {op.doc}"
    return apply


def _sigmoid_fwd(x: Array) -> Array:
    # exp of a non-positive number never overflows: stable at |x| = 1000.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _softplus_fwd(x: Array) -> Array:
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _zero(m: Any, g: Any, ans: Any, ctx: Any, *args: Any) -> Any:
    return m.zeros_like(g)


# fmt: off
# ---- elementwise, one argument: d/dx as a VJP of the upstream gradient g -------------
NEG = _defop("neg", np.negative, lambda m, g, a, c, x: -g, doc="-g")
ABS = _defop("abs", np.abs, lambda m, g, a, c, x: g * m.sign(x), doc="g * sign(x)  (0 at x = 0)")
SIGN = _defop("sign", np.sign, _zero, doc="0")
FLOOR = _defop("floor", np.floor, _zero, doc="0")
CEIL = _defop("ceil", np.ceil, _zero, doc="0")
ROUND = _defop("round", np.round, _zero, doc="0")
SQRT = _defop("sqrt", np.sqrt, lambda m, g, a, c, x: g / (a * 2.0),
              doc="g / (2 sqrt(x))  (inf at 0)")
SQUARE = _defop("square", np.square, lambda m, g, a, c, x: g * (x * 2.0), doc="2 x g")
EXP = _defop("exp", np.exp, lambda m, g, a, c, x: g * a, doc="g * exp(x)")
EXPM1 = _defop("expm1", np.expm1, lambda m, g, a, c, x: g * (a + 1.0), doc="g * exp(x)")
LOG = _defop("log", np.log, lambda m, g, a, c, x: g / x, doc="g / x")
LOG2 = _defop("log2", np.log2, lambda m, g, a, c, x: g / (x * _LN2), doc="g / (x ln 2)")
LOG10 = _defop("log10", np.log10, lambda m, g, a, c, x: g / (x * _LN10), doc="g / (x ln 10)")
LOG1P = _defop("log1p", np.log1p, lambda m, g, a, c, x: g / (x + 1.0), doc="g / (1 + x)")
SIN = _defop("sin", np.sin, lambda m, g, a, c, x: g * m.cos(x), doc="g cos(x)")
COS = _defop("cos", np.cos, lambda m, g, a, c, x: -(g * m.sin(x)), doc="-g sin(x)")
TAN = _defop("tan", np.tan, lambda m, g, a, c, x: g * (a * a + 1.0), doc="g (1 + tan(x)^2)")
ARCSIN = _defop("arcsin", np.arcsin, lambda m, g, a, c, x: g / m.sqrt(1.0 - x * x),
                doc="g / sqrt(1 - x^2)")
ARCCOS = _defop("arccos", np.arccos, lambda m, g, a, c, x: -(g / m.sqrt(1.0 - x * x)),
                doc="-g / sqrt(1 - x^2)")
ARCTAN = _defop("arctan", np.arctan, lambda m, g, a, c, x: g / (x * x + 1.0), doc="g / (1 + x^2)")
SINH = _defop("sinh", np.sinh, lambda m, g, a, c, x: g * m.cosh(x), doc="g cosh(x)")
COSH = _defop("cosh", np.cosh, lambda m, g, a, c, x: g * m.sinh(x), doc="g sinh(x)")
TANH = _defop("tanh", np.tanh, lambda m, g, a, c, x: g * (1.0 - a * a), doc="g (1 - tanh(x)^2)")
ARCSINH = _defop("arcsinh", np.arcsinh, lambda m, g, a, c, x: g / m.sqrt(x * x + 1.0),
                 doc="g / sqrt(x^2 + 1)")
ARCCOSH = _defop("arccosh", np.arccosh, lambda m, g, a, c, x: g / m.sqrt(x * x - 1.0),
                 doc="g / sqrt(x^2 - 1)")
ARCTANH = _defop("arctanh", np.arctanh, lambda m, g, a, c, x: g / (1.0 - x * x),
                 doc="g / (1 - x^2)")
SIGMOID = _defop("sigmoid", _sigmoid_fwd, lambda m, g, a, c, x: g * (a * (1.0 - a)),
                 doc="g s (1 - s), s = sigmoid(x)")
RELU = _defop("relu", lambda x: np.maximum(x, 0), lambda m, g, a, c, x: g * (x > 0),
              doc="g where x > 0, else 0  (0 at x = 0)")
SOFTPLUS = _defop("softplus", _softplus_fwd, lambda m, g, a, c, x: g * m.sigmoid(x),
                  doc="g sigmoid(x)")

# ---- elementwise, two arguments (broadcasting undone by the engine, not here) --------
ADD = _defop("add", np.add, lambda m, g, a, c, x, y: g, lambda m, g, a, c, x, y: g,
             doc="dx = g, dy = g")
SUB = _defop("sub", np.subtract, lambda m, g, a, c, x, y: g, lambda m, g, a, c, x, y: -g,
             doc="dx = g, dy = -g")
MUL = _defop("mul", np.multiply, lambda m, g, a, c, x, y: g * y, lambda m, g, a, c, x, y: g * x,
             doc="dx = g y, dy = g x")
DIV = _defop("div", np.divide, lambda m, g, a, c, x, y: g / y,
             lambda m, g, a, c, x, y: -(g * a / y), doc="dx = g / y, dy = -g x / y^2")
POW = _defop(
    "pow", np.power,
    # torch.pow: no gradient to x where y == 0; none to y where x == 0 and y >= 0.
    lambda m, g, a, c, x, y: m.where(y == 0, 0.0, g * (y * x ** (y - 1.0))),
    lambda m, g, a, c, x, y: m.where((x == 0) * (y >= 0), 0.0, g * (a * m.log(x))),
    doc="dx = g y x^(y-1) (0 where y = 0), dy = g x^y ln x (0 where x = 0, y >= 0)")
MAXIMUM = _defop(
    "maximum", np.maximum,
    lambda m, g, a, c, x, y: g * (x > y) + (g * 0.5) * (x == y),
    lambda m, g, a, c, x, y: g * (y > x) + (g * 0.5) * (x == y),
    doc="g to the larger argument; split evenly on ties")
MINIMUM = _defop(
    "minimum", np.minimum,
    lambda m, g, a, c, x, y: g * (x < y) + (g * 0.5) * (x == y),
    lambda m, g, a, c, x, y: g * (y < x) + (g * 0.5) * (x == y),
    doc="g to the smaller argument; split evenly on ties")
ARCTAN2 = _defop(
    "arctan2", np.arctan2,
    lambda m, g, a, c, y, x: g * x / (x * x + y * y),
    lambda m, g, a, c, y, x: -(g * y / (x * x + y * y)),
    doc="dy = g x / (x^2 + y^2), dx = -g y / (x^2 + y^2)")
CLIP = _defop(
    "clip", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    lambda m, g, a, c, x, lo, hi: g * ((x >= lo) * (x <= hi)),
    lambda m, g, a, c, x, lo, hi: g * ((x < lo) * (lo <= hi)),
    lambda m, g, a, c, x, lo, hi: g * m.maximum(x > hi, lo > hi),
    doc="g to x where lo <= x <= hi (inclusive); to lo below it, to hi above it")
WHERE = _defop(
    "where", lambda c, x, y: np.where(c != 0, x, y),
    None,
    lambda m, g, a, c, cond, x, y: m.where(cond, g, 0.0),
    lambda m, g, a, c, cond, x, y: m.where(cond, 0.0, g),
    doc="g to a where cond is nonzero, else to b; none to cond")
# fmt: on


# ---- reductions: ctx = (axes, keepdims) ----------------------------------------------
def _reduction(name: str, fwd: Callable[..., Any], vjp: Callable[..., Any], doc: str) -> Op:
    return _defop(name, fwd, vjp, doc=doc)


def _sum_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep = c
    return m.broadcast_to(_unreduce(m, g, x.shape, axes, keep), x.shape)


def _mean_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep = c
    n = math.prod(x.shape[i] for i in axes)
    return m.broadcast_to(_unreduce(m, g, x.shape, axes, keep) / float(builtins.max(n, 1)), x.shape)


def _prod_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep = c
    ge = _unreduce(m, g, x.shape, axes, keep)
    if m is A:
        return ge * _exclusive_prod(x, axes)
    # Differentiable form: the product of the others as a product over a masked copy.
    return ge * _others_prod_tensor(x, axes)


def _extreme_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep = c
    ae = _unreduce(m, a, x.shape, axes, keep)
    mask = m.as_float(x == ae, x)
    count = m.sum(mask, axis=axes, keepdims=True)
    return _unreduce(m, g, x.shape, axes, keep) * (mask / count)


def _logsumexp_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep = c
    return _unreduce(m, g, x.shape, axes, keep) * m.exp(x - _unreduce(m, a, x.shape, axes, keep))


def _logsumexp_fwd(x: Array, axis: tuple[int, ...], keepdims: bool) -> Array:
    mx = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros(_kept_shape(x.shape, axis))
    mx = np.where(np.isfinite(mx), mx, 0.0).astype(x.dtype, copy=False)
    out = np.log(np.sum(np.exp(x - mx), axis=axis, keepdims=True)) + mx
    return out if keepdims else out.reshape([s for i, s in enumerate(x.shape) if i not in axis])


SUM = _reduction(
    "sum",
    lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    _sum_vjp,
    "g broadcast back over the reduced axes",
)
MEAN = _reduction(
    "mean",
    lambda x, axis, keepdims: np.mean(x, axis=axis, keepdims=keepdims),
    _mean_vjp,
    "g / n broadcast back over the reduced axes",
)
PROD = _reduction(
    "prod",
    lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    _prod_vjp,
    "g times the product of the other elements (exact with zeros)",
)
MAX = _reduction(
    "max",
    lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
    _extreme_vjp,
    "g split evenly among the elements equal to the maximum",
)
MIN = _reduction(
    "min",
    lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
    _extreme_vjp,
    "g split evenly among the elements equal to the minimum",
)
LOGSUMEXP = _reduction("logsumexp", _logsumexp_fwd, _logsumexp_vjp, "g softmax(x)")


def _norm_fwd(x: Array, axis: tuple[int, ...], keepdims: bool, ord: float) -> Array:
    ax = np.abs(x)
    if ord == math.inf:
        return np.max(ax, axis=axis, keepdims=keepdims, initial=0.0)
    if ord == 2:
        return np.sqrt(np.sum(ax * ax, axis=axis, keepdims=keepdims))
    if ord == 1:
        return np.sum(ax, axis=axis, keepdims=keepdims)
    return np.sum(ax**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _norm_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep, p = c
    ge = _unreduce(m, g, x.shape, axes, keep)
    ae = _unreduce(m, a, x.shape, axes, keep)
    if p == math.inf:
        mask = m.as_float(m.abs(x) == ae, x)
        return ge * m.sign(x) * mask / m.sum(mask, axis=axes, keepdims=True)
    if p == 1:
        return ge * m.sign(x)
    if p == 2:
        return ge * m.where(ae == 0, 0.0, x / ae)
    # sign(x)|x|^(p-1) / ||x||^(p-1), with torch's zero at x = 0 and at an all-zero group
    scaled = m.where(x == 0, 0.0, m.sign(x) * m.abs(x) ** (p - 1.0))
    return ge * scaled * m.where(ae == 0, 0.0, ae ** (1.0 - p))


def _std_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    axes, keep, ddof = c
    n = math.prod(x.shape[i] for i in axes)
    ae = _unreduce(m, a, x.shape, axes, keep)
    d = x - m.mean(x, axis=axes, keepdims=True)
    return _unreduce(m, g, x.shape, axes, keep) * m.where(ae == 0, 0.0, d / (ae * (n - ddof)))


STD = _defop(
    "std",
    lambda x, axis, keepdims, ddof: np.std(x, axis=axis, keepdims=keepdims, ddof=ddof),
    _std_vjp,
    doc="g (x - mean) / ((n - ddof) std); 0 where std = 0",
)
NORM = _defop(
    "norm",
    _norm_fwd,
    _norm_vjp,
    doc="g x/||x|| for ord 2; g sign(x)|x|^(p-1)/||x||^(p-1) in general; 0 at 0",
)


def _softmax_fwd(x: Array, axis: int) -> Array:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_fwd(x: Array, axis: int) -> Array:
    return x - _logsumexp_fwd(x, (axis,), True)


SOFTMAX = _defop(
    "softmax",
    _softmax_fwd,
    lambda m, g, a, c, x: a * (g - m.sum(g * a, axis=c, keepdims=True)),
    doc="s (g - sum(g s)), s = softmax(x)",
)
LOG_SOFTMAX = _defop(
    "log_softmax",
    _log_softmax_fwd,
    lambda m, g, a, c, x: g - m.exp(a) * m.sum(g, axis=c, keepdims=True),
    doc="g - softmax(x) sum(g)",
)

# ---- shape and indexing: ctx holds the static argument --------------------------------
RESHAPE = _defop(
    "reshape",
    lambda x, shape: x.reshape(shape),
    lambda m, g, a, c, x: m.reshape(g, x.shape),
    doc="g reshaped back",
)
TRANSPOSE = _defop(
    "transpose",
    lambda x, axes: x.transpose(axes),
    lambda m, g, a, c, x: m.transpose(g, tuple(np.argsort(c))),
    doc="g transposed back",
)
BROADCAST_TO = _defop(
    "broadcast_to",
    lambda x, shape: np.broadcast_to(x, shape),
    lambda m, g, a, c, x: m.sum_to(g, x.shape),
    doc="g summed over the broadcast axes",
)
SUM_TO = _defop(
    "sum_to",
    _sum_to_array,
    lambda m, g, a, c, x: m.broadcast_to(g, x.shape),
    doc="g broadcast back",
)
FLIP = _defop(
    "flip",
    lambda x, axis: np.flip(x, axis),
    lambda m, g, a, c, x: m.flip(g, c),
    doc="g flipped back",
)
GETITEM = _defop(
    "getitem",
    lambda x, key: x[key],
    lambda m, g, a, c, x: m.scatter(g, c, x.shape),
    doc="g added into zeros at the indexed places (repeats accumulate)",
)
SCATTER = _defop(
    "scatter",
    lambda g, key, shape: _scatter_array(g, key, shape),
    lambda m, g, a, c, x: m.getitem(g, c[0]),
    doc="g indexed",
)


def _concat_vjp(i: int) -> Callable[..., Any]:
    def vjp(m: Any, g: Any, a: Any, c: Any) -> Any:
        axis, offsets = c
        key = (slice(None),) * axis + (slice(offsets[i], offsets[i + 1]),)
        return m.getitem(g, key)

    return vjp


def _stack_vjp(i: int) -> Callable[..., Any]:
    def vjp(m: Any, g: Any, a: Any, c: Any) -> Any:
        key = (slice(None),) * c + (i,)
        return m.getitem(g, key)

    return vjp


# ---- linear algebra -------------------------------------------------------------------
MATMUL = _defop(
    "matmul",
    np.matmul,
    lambda m, g, a, c, x, y: m.matmul(g, _swap(y)),
    lambda m, g, a, c, x, y: m.matmul(_swap(x), g),
    doc="dA = g B^T, dB = A^T g (batch axes summed back)",
)


def _det_vjp(m: Any, g: Any, a: Any, c: Any, x: Any) -> Any:
    ge = m.expand_dims(m.expand_dims(g, -1), -1)
    if m is A:
        try:
            return ge * (a[..., None, None] * np.linalg.inv(x).swapaxes(-1, -2))
        except np.linalg.LinAlgError:
            return ge * _adjugate_t(x)
    ae = m.expand_dims(m.expand_dims(a, -1), -1)
    return ge * ae * _swap(m.inv(x))


DET = _defop("det", np.linalg.det, _det_vjp, doc="g det(A) A^-T (the adjugate for singular A)")
INV = _defop(
    "inv",
    np.linalg.inv,
    lambda m, g, a, c, x: -m.matmul(m.matmul(_swap(a), g), _swap(a)),
    doc="-A^-T g A^-T",
)


def _solve_fwd(a: Array, b: Array) -> Array:
    return np.linalg.solve(a, b)


def _solve_vjp_b(m: Any, g: Any, ans: Any, c: Any, a: Any, b: Any) -> Any:
    if b.ndim == 1:
        return m.solve(_swap(a), m.expand_dims(g, -1))[..., 0]
    return m.solve(_swap(a), g)


def _solve_vjp_a(m: Any, g: Any, ans: Any, c: Any, a: Any, b: Any) -> Any:
    gb = _solve_vjp_b(m, g, ans, c, a, b)
    if b.ndim == 1:
        return -(m.expand_dims(gb, -1) * m.expand_dims(ans, -2))
    return -m.matmul(gb, _swap(ans))


SOLVE = _defop("solve", _solve_fwd, _solve_vjp_a, _solve_vjp_b, doc="db = A^-T g, dA = -db x^T")


# --------------------------------------------------------------------------------------
# Public functions (the language's functions and the tensor API)
# --------------------------------------------------------------------------------------

negative = _unary(NEG)
absolute = _unary(ABS)
abs = absolute
sign = _unary(SIGN)
floor = _unary(FLOOR)
ceil = _unary(CEIL)
round = _unary(ROUND)
sqrt = _unary(SQRT)
square = _unary(SQUARE)
exp = _unary(EXP)
expm1 = _unary(EXPM1)
log = _unary(LOG)
log2 = _unary(LOG2)
log10 = _unary(LOG10)
log1p = _unary(LOG1P)
sin = _unary(SIN)
cos = _unary(COS)
tan = _unary(TAN)
arcsin = _unary(ARCSIN)
arccos = _unary(ARCCOS)
arctan = _unary(ARCTAN)
sinh = _unary(SINH)
cosh = _unary(COSH)
tanh = _unary(TANH)
arcsinh = _unary(ARCSINH)
arccosh = _unary(ARCCOSH)
arctanh = _unary(ARCTANH)
sigmoid = _unary(SIGMOID)
relu = _unary(RELU)
softplus = _unary(SOFTPLUS)

add = _binary(ADD)
subtract = _binary(SUB)


def _pass_g(m: Any, g: Any, a: Any, c: Any) -> Any:
    return g


def _term_vjp(i: int) -> Callable[..., Any]:
    return _pass_g


def add_n(terms: Sequence[Any], negated: Sequence[bool] | None = None) -> Tensor:
    """``t0 ± t1 ± ... ± tn`` as one node of n inputs (a negated term is ``negative(t)``).

    The terms are added left to right, as the chain of binary adds and subtracts would be,
    so the value is the same to the last bit (``a - b`` is ``a + (-b)`` exactly); the chain
    would make one node per term, which costs a 100,000-term sum half a second.
    """
    ts = [_lift(t) for t in terms]
    signs = list(negated) if negated is not None else [False] * len(ts)
    if not ts or signs[0] or len(signs) != len(ts):
        raise ValueError("add_n: the first term is added, and every term has a sign")
    ts = [negative(t) if neg else t for t, neg in zip(ts, signs, strict=True)]
    acc = ts[0].data
    for t, neg in zip(ts[1:], signs[1:], strict=True):
        d = t.data
        # A one-element operand never grows the result: only then is a check needed.
        if acc.shape != d.shape and acc.size != 1 and d.size != 1:
            name = "sub" if neg else "add"
            try:
                shape = broadcast_shape(acc.shape, d.shape)
            except ValueError:
                raise ShapeError(
                    f"{name}: shapes {acc.shape} and {d.shape} cannot be broadcast together"
                ) from None
            check_size(shape, name)
        acc = acc + d
    return _record(acc, _seq_op("add", len(ts), _term_vjp), tuple(ts))


multiply = _binary(MUL)
divide = _binary(DIV)
_power = _binary(POW)


def _pow_const_vjp(m: Any, g: Any, a: Any, c: float, x: Any) -> Any:
    if c == 0:
        return m.zeros_like(g)
    if c == 2:
        return g * (x * 2.0)
    return g * (c * x ** (c - 1.0))


# x ** c for a constant number c (x**2, x**0.5): one rule, no gradient for the exponent,
# and none of the general rule's masks. Same numbers as "pow" (torch.pow's convention).
_POW_CONST = Op("pow", np.power, [_pow_const_vjp], POW.doc)


def power(x: Any, y: Any) -> Tensor:
    """``x ** y`` with broadcasting; the gradient follows ``torch.pow`` at ``x = 0``."""
    if type(x) is Tensor:
        c: Any = None
        if type(y) is float or type(y) is int:
            c = float(y)
        elif type(y) is Tensor and not y.requires_grad and y.data.ndim == 0:
            c = float(y.data)
        if c is not None and c == c:  # a constant exponent (not nan)
            return _record(np.power(x.data, c), _POW_CONST, (x,), c)
    return _power(x, y)


pow = power
maximum = _binary(MAXIMUM)
minimum = _binary(MINIMUM)
arctan2 = _binary(ARCTAN2)


def _broadcast_all(name: str, *ts: Tensor) -> None:
    shapes = [t.data.shape for t in ts]
    try:
        shape = broadcast_shape(*shapes)
    except ValueError:
        raise ShapeError(
            f"{name}: shapes {', '.join(map(str, shapes))} cannot be broadcast together"
        ) from None
    check_size(shape, name)


def clip(x: Any, lo: Any, hi: Any) -> Tensor:
    """Clamp ``x`` into ``[lo, hi]``; the gradient passes where ``lo <= x <= hi`` inclusive."""
    x = _lift(x)
    lo, hi = _lift(lo, x), _lift(hi, x)
    _broadcast_all("clip", x, lo, hi)
    return _record(CLIP.fwd(x.data, lo.data, hi.data), CLIP, (x, lo, hi))


def where(cond: Any, x: Any, y: Any) -> Tensor:
    """``x`` where ``cond`` is nonzero, else ``y``; no gradient flows to ``cond``."""
    like = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
    x, y = _lift(x, like), _lift(y, like)
    c = _lift(cond, x) if not isinstance(cond, np.ndarray) else _const(cond)
    _broadcast_all("where", c, x, y)
    return _record(WHERE.fwd(c.data, x.data, y.data), WHERE, (c, x, y))


def _compare(ufunc: Any, x: Any, y: Any) -> Tensor:
    x = _lift(x, y if isinstance(y, Tensor) else None)
    y = _lift(y, x)
    if x.data.shape != y.data.shape:
        _broadcast_all(ufunc.__name__, x, y)
    return _const(ufunc(x.data, y.data).astype(x.data.dtype))


def less(x: Any, y: Any) -> Tensor:
    return _compare(np.less, x, y)


def less_equal(x: Any, y: Any) -> Tensor:
    return _compare(np.less_equal, x, y)


def greater(x: Any, y: Any) -> Tensor:
    return _compare(np.greater, x, y)


def greater_equal(x: Any, y: Any) -> Tensor:
    return _compare(np.greater_equal, x, y)


def equal(x: Any, y: Any) -> Tensor:
    return _compare(np.equal, x, y)


def not_equal(x: Any, y: Any) -> Tensor:
    return _compare(np.not_equal, x, y)


def _reduce(op: Op, x: Any, axis: Any, keepdims: bool, *extra: Any) -> Tensor:
    x = _lift(x)
    axes = normalize_axis(axis, x.data.ndim, op.name)
    if op in (MAX, MIN) and x.data.size == 0 and 0 in [x.data.shape[a] for a in axes]:
        raise ShapeError(f"{op.name}: cannot reduce an empty tensor (it has no {op.name}imum)")
    data = op.fwd(x.data, axes, bool(keepdims), *extra)
    return _record(np.asarray(data, dtype=x.data.dtype), op, (x,), (axes, bool(keepdims), *extra))


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (None: all axes)."""
    return _reduce(SUM, x, axis, keepdims)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``."""
    return _reduce(MEAN, x, axis, keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``; its gradient is exact when elements are zero."""
    return _reduce(PROD, x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Largest element over ``axis``; ties share the gradient evenly."""
    return _reduce(MAX, x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Smallest element over ``axis``; ties share the gradient evenly."""
    return _reduce(MIN, x, axis, keepdims)


amax = max
amin = min


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` computed without overflow."""
    return _reduce(LOGSUMEXP, x, axis, keepdims)


def norm(x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Vector p-norm of the reduced elements (``ord`` > 0 or inf)."""
    p = float(ord) if ord is not None else 2.0
    if not p > 0:
        raise InvalidValueError(f"norm: ord must be a positive number or inf, not {ord}")
    return _reduce(NORM, x, axis, keepdims, p)


def var(x: Any, axis: Any = None, ddof: float = 0, keepdims: bool = False) -> Tensor:
    """Variance with ``ddof`` delta degrees of freedom (NumPy's default 0)."""
    x = _lift(x)
    axes = normalize_axis(axis, x.data.ndim, "var")
    n = math.prod(x.data.shape[i] for i in axes)
    d = x - mean(x, axes, keepdims=True)
    # NumPy's divisor: max(n - ddof, 0), so too few elements give nan or inf, not -0
    return sum(d * d, axes, keepdims) / float(builtins.max(n - ddof, 0))


def std(x: Any, axis: Any = None, ddof: float = 0, keepdims: bool = False) -> Tensor:
    """Standard deviation ``sqrt(var(x))``; its gradient is 0 where it is 0, as torch's."""
    return _reduce(STD, x, axis, keepdims, float(ddof))


def _one_axis(axis: Any, ndim: int, what: str) -> int:
    if ndim == 0:
        raise ShapeError(f"{what}: needs at least one dimension")
    (a,) = normalize_axis(int(axis), ndim, what)
    return a


def softmax(x: Any, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, stable for large arguments."""
    x = _lift(x)
    a = _one_axis(axis, x.data.ndim, "softmax")
    return _record(SOFTMAX.fwd(x.data, a), SOFTMAX, (x,), a)


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``."""
    x = _lift(x)
    a = _one_axis(axis, x.data.ndim, "log_softmax")
    return _record(LOG_SOFTMAX.fwd(x.data, a), LOG_SOFTMAX, (x,), a)


def reshape(x: Any, shape: Any) -> Tensor:
    """The same elements in a new shape (one dimension may be -1)."""
    x = _lift(x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    try:
        data = x.data.reshape(shape)
    except ValueError:
        raise ShapeError(
            f"reshape: cannot reshape a tensor of shape {x.data.shape} "
            f"({x.data.size} elements) into shape {shape}"
        ) from None
    # a new node even when nothing changes: a binding `h = reshape(x, ...)` is not `x`
    return _record(data, RESHAPE, (x,))


def transpose(x: Any, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None)."""
    x = _lift(x)
    nd = x.data.ndim
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        perm = tuple(int(a) % nd if nd else int(a) for a in axes)
        if sorted(perm) != list(range(nd)):
            raise ShapeError(f"transpose: axes {tuple(axes)} are not a permutation of {nd} axes")
    return _record(x.data.transpose(perm), TRANSPOSE, (x,), perm)


def swapaxes(x: Any, a: int, b: int) -> Tensor:
    x = _lift(x)
    perm = list(range(x.data.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def broadcast_to(x: Any, shape: Any) -> Tensor:
    x = _lift(x)
    shape = tuple(shape)
    if x.data.shape == shape:
        return x
    check_size(shape, "broadcast_to")
    return _record(np.broadcast_to(x.data, shape), BROADCAST_TO, (x,))


def sum_to(x: Any, shape: Any) -> Tensor:
    x = _lift(x)
    shape = tuple(shape)
    if x.data.shape == shape:
        return x
    return _record(_sum_to_array(x.data, shape), SUM_TO, (x,))


def flatten(x: Any) -> Tensor:
    """A 1-D copy of the elements (row-major)."""
    return reshape(x, (-1,))


def squeeze(x: Any, axis: Any = None) -> Tensor:
    """Remove axes of length one (all of them, or those in ``axis``)."""
    x = _lift(x)
    shape = x.data.shape
    if axis is None:
        new = tuple(s for s in shape if s != 1)
    else:
        axes = normalize_axis(axis, x.data.ndim, "squeeze")
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(f"squeeze: axis {a} has length {shape[a]}, not 1")
        new = tuple(s for i, s in enumerate(shape) if i not in axes)
    return reshape(x, new)


def expand_dims(x: Any, axis: Any) -> Tensor:
    """Insert axes of length one at ``axis`` (an int or a tuple, NumPy's rules)."""
    x = _lift(x)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = x.data.ndim + len(axes)
    pos = normalize_axis(axes, nd, "expand_dims")
    it = iter(x.data.shape)
    new = tuple(1 if i in pos else next(it) for i in range(nd))
    return reshape(x, new)


def flip(x: Any, axis: Any = None) -> Tensor:
    """Reverse the order of elements along ``axis`` (all axes when None)."""
    x = _lift(x)
    axes = normalize_axis(axis, x.data.ndim, "flip")
    return _record(np.flip(x.data, axes), FLIP, (x,), axes)


def _as_sequence(seq: Any) -> list[Tensor]:
    if isinstance(seq, Tensor):
        if seq.data.ndim == 0:
            raise ShapeError("expected a sequence of tensors, got a scalar")
        return [seq[i] for i in range(seq.data.shape[0])]
    return [_lift(t) for t in seq]


def concatenate(seq: Any, axis: int = 0) -> Tensor:
    """Join tensors along an existing axis (their lengths along it may differ)."""
    ts = _as_sequence(seq)
    if not ts:
        raise ShapeError("concatenate: needs at least one tensor")
    ts = [_lift(t, ts[0]) for t in ts]
    nd = ts[0].data.ndim
    if nd == 0:
        raise ShapeError("concatenate: zero-dimensional tensors cannot be concatenated")
    a = normalize_axis(int(axis), nd, "concatenate")[0]
    for t in ts:
        s, s0 = t.data.shape, ts[0].data.shape
        if len(s) != nd or s[:a] + s[a + 1 :] != s0[:a] + s0[a + 1 :]:
            raise ShapeError(f"concatenate: shapes {s0} and {s} do not match except along axis {a}")
    offsets = [0]
    for t in ts:
        offsets.append(offsets[-1] + t.data.shape[a])
    shape = list(ts[0].data.shape)
    shape[a] = offsets[-1]
    check_size(shape, "concatenate")
    op = _seq_op("concatenate", len(ts), _concat_vjp)
    data = np.concatenate([t.data for t in ts], axis=a)
    return _record(data, op, tuple(ts), (a, offsets))


def stack(seq: Any, axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis."""
    ts = _as_sequence(seq)
    if not ts:
        raise ShapeError("stack: needs at least one tensor")
    ts = [_lift(t, ts[0]) for t in ts]
    s0 = ts[0].data.shape
    for t in ts:
        if t.data.shape != s0:
            raise ShapeError(f"stack: all tensors need one shape, got {s0} and {t.data.shape}")
    a = normalize_axis(int(axis), len(s0) + 1, "stack")[0]
    check_size((len(ts), *s0), "stack")
    op = _seq_op("stack", len(ts), _stack_vjp)
    return _record(np.stack([t.data for t in ts], axis=a), op, tuple(ts), a)


_SEQ_OPS: dict[tuple[str, int], Op] = {}


def _seq_op(name: str, n: int, make_vjp: Callable[[int], Callable[..., Any]]) -> Op:
    """Ops of n arguments (concatenate, stack, add_n) share one Op per arity, for the
    arities up to 64 (a longer one costs as much to make as its forward pass does)."""
    op = _SEQ_OPS.get((name, n))
    if op is None:
        base = OPS.get(name)
        doc = base.doc if base else "g split back into the pieces"
        vjps = [make_vjp(i) for i in range(n)]
        op = Op(name, lambda *xs: np.empty(0), vjps, doc, takes_args=False)
        if n <= 64:
            OPS.setdefault(name, op)
            _SEQ_OPS[(name, n)] = op
    return op


def _normalize_key(key: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A NumPy index key with integer arrays as int64 arrays; checks bounds early."""
    k = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for part in k:
        if isinstance(part, Tensor):
            part = part.data
        if isinstance(part, (list, np.ndarray)):
            arr = np.asarray(part)
            if arr.dtype.kind == "f":
                if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                    raise InvalidValueError("index: indices must be whole numbers")
                arr = arr.astype(np.int64)
            elif arr.dtype.kind == "b":
                pass
            elif arr.dtype.kind not in "iu":
                raise InvalidValueError("index: indices must be whole numbers")
            out.append(arr)
        elif isinstance(part, float):
            if not part.is_integer():
                raise InvalidValueError(f"index: {part} is not a whole number")
            out.append(int(part))
        else:
            out.append(part)
    return tuple(out)


def getitem(x: Any, key: Any) -> Tensor:
    """NumPy indexing (basic, integer lists, ``None``, ``...``); repeated indices accumulate."""
    x = _lift(x)
    k = _normalize_key(key, x.data.shape)
    try:
        data = x.data[k]
    except IndexError as e:
        raise ShapeError(f"index: {e}") from None
    return _record(np.asarray(data), GETITEM, (x,), k)


def scatter(g: Any, key: Any, shape: Any) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``key`` (the adjoint of indexing)."""
    g = _lift(g)
    return _record(_scatter_array(g.data, key, tuple(shape)), SCATTER, (g,), (key, tuple(shape)))


def _matmul2(x: Tensor, y: Tensor) -> Tensor:
    xs, ys = x.data.shape, y.data.shape
    if xs[-1] != ys[-2]:
        raise ShapeError(
            f"matmul: shapes {xs} and {ys} do not fit (inner dimensions {xs[-1]} and {ys[-2]})"
        )
    try:
        batch = broadcast_shape(xs[:-2], ys[:-2])
    except ValueError:
        raise ShapeError(f"matmul: batch shapes of {xs} and {ys} cannot be broadcast") from None
    check_size((*batch, xs[-2], ys[-1]), "matmul")
    return _record(np.matmul(x.data, y.data), MATMUL, (x, y))


def matmul(x: Any, y: Any) -> Tensor:
    """Matrix product with NumPy's rules (1-D operands are promoted, then squeezed)."""
    x = _lift(x, y if isinstance(y, Tensor) else None)
    y = _lift(y, x)
    if x.data.ndim == 0 or y.data.ndim == 0:
        raise ShapeError(
            f"matmul: needs tensors of at least one dimension, got shapes {x.data.shape} and "
            f"{y.data.shape} (use * for scalars)"
        )
    xv, yv = x.data.ndim == 1, y.data.ndim == 1
    if xv and yv:
        if x.data.shape != y.data.shape:
            raise ShapeError(f"matmul: shapes {x.data.shape} and {y.data.shape} do not fit")
        return sum(x * y)
    xm = reshape(x, (1, x.data.shape[0])) if xv else x
    ym = reshape(y, (y.data.shape[0], 1)) if yv else y
    try:
        out = _matmul2(xm, ym)
    except ShapeError:
        raise ShapeError(f"matmul: shapes {x.data.shape} and {y.data.shape} do not fit") from None
    if xv:
        out = reshape(out, out.data.shape[:-2] + out.data.shape[-1:])
    elif yv:
        out = reshape(out, out.data.shape[:-1])
    return out


def dot(x: Any, y: Any) -> Tensor:
    """Dot product of 1-D or 2-D tensors (a scalar operand multiplies)."""
    x = _lift(x, y if isinstance(y, Tensor) else None)
    y = _lift(y, x)
    if x.data.ndim == 0 or y.data.ndim == 0:
        return x * y
    if x.data.ndim > 2 or y.data.ndim > 2:
        raise ShapeError(
            f"dot: supports 1-D and 2-D tensors, got shapes {x.data.shape} and {y.data.shape}"
            " (use matmul for batches)"
        )
    return matmul(x, y)


def outer(x: Any, y: Any) -> Tensor:
    """Outer product of the flattened inputs."""
    x, y = flatten(_lift(x)), flatten(_lift(y))
    check_size((x.data.size, y.data.size), "outer")
    return reshape(x, (-1, 1)) * reshape(y, (1, -1))


def _diag_indices(n_rows: int, n_cols: int, k: int) -> tuple[Array, Array]:
    i = np.arange(
        builtins.max(
            0, builtins.min(n_rows, n_cols - k) if k >= 0 else builtins.min(n_rows + k, n_cols)
        )
    )
    return (i, i + k) if k >= 0 else (i - k, i)


def diag(x: Any, k: int = 0) -> Tensor:
    """NumPy's ``diag``: a 1-D tensor becomes a diagonal matrix; a 2-D one gives its diagonal."""
    x = _lift(x)
    k = int(k)
    if x.data.ndim == 1:
        n = x.data.shape[0] + builtins.abs(k)
        check_size((n, n), "diag")
        rows, cols = _diag_indices(n, n, k)
        return scatter(x, (rows, cols), (n, n))
    if x.data.ndim == 2:
        rows, cols = _diag_indices(x.data.shape[0], x.data.shape[1], k)
        return getitem(x, (rows, cols))
    raise ShapeError(f"diag: needs a 1-D or 2-D tensor, got shape {x.data.shape}")


def trace(x: Any) -> Tensor:
    """Sum of the main diagonal (over the first two axes, as NumPy)."""
    x = _lift(x)
    if x.data.ndim < 2:
        raise ShapeError(f"trace: needs at least 2 dimensions, got shape {x.data.shape}")
    rows, cols = _diag_indices(x.data.shape[0], x.data.shape[1], 0)
    return sum(getitem(x, (rows, cols)), axis=0)


def _square_matrix(x: Tensor, what: str) -> None:
    s = x.data.shape
    if x.data.ndim < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{what}: needs a square matrix (or a batch of them), got shape {s}")


def det(x: Any) -> Tensor:
    """Determinant of a square matrix (batched over leading axes)."""
    x = _lift(x)
    _square_matrix(x, "det")
    return _record(np.asarray(np.linalg.det(x.data), dtype=x.data.dtype), DET, (x,))


def inv(x: Any) -> Tensor:
    """Inverse of a square matrix; a singular matrix is a domain error."""
    x = _lift(x)
    _square_matrix(x, "inv")
    try:
        data = np.linalg.inv(x.data)
    except np.linalg.LinAlgError:
        raise DomainError("inv: the matrix is singular (it has no inverse)") from None
    return _record(data, INV, (x,))


def solve(a: Any, b: Any) -> Tensor:
    """``x`` with ``a @ x == b`` (NumPy 2 rules: a 1-D ``b`` is a vector)."""
    a = _lift(a, b if isinstance(b, Tensor) else None)
    b = _lift(b, a)
    _square_matrix(a, "solve")
    n = a.data.shape[-1]
    if b.data.ndim == 0 or (b.data.shape[-1] if b.data.ndim == 1 else b.data.shape[-2]) != n:
        raise ShapeError(f"solve: shapes {a.data.shape} and {b.data.shape} do not fit")
    try:
        data = np.linalg.solve(a.data, b.data)
    except np.linalg.LinAlgError:
        raise DomainError("solve: the matrix is singular") from None
    except ValueError:
        raise ShapeError(f"solve: shapes {a.data.shape} and {b.data.shape} do not fit") from None
    return _record(data, SOLVE, (a, b))


def zeros_like(x: Any) -> Any:
    if isinstance(x, Tensor):
        return _const(np.zeros_like(x.data))
    return np.zeros_like(x)


def _others_prod_tensor(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """For tensors: the product of the other elements of each element's group, built from
    differentiable primitives (quadratic in the group size; used only for higher order)."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = transpose(x, perm)
    lead = xt.shape[: len(keep)]
    flat = reshape(xt, (*lead, -1))
    n = flat.shape[-1]
    eye_ = _const(np.eye(n, dtype=x.dtype))
    rows = where(eye_, 1.0, expand_dims(flat, -2))
    others = prod(rows, axis=-1)
    return transpose(reshape(others, xt.shape), tuple(np.argsort(perm)))


# --------------------------------------------------------------------------------------
# Constructors (constants: they never require grad)
# --------------------------------------------------------------------------------------


def _shape_arg(shape: Any, what: str) -> tuple[int, ...]:
    """Dimensions as ints or as one tuple of ints (``zeros(2, 3)``, ``zeros((2, 3))``)."""
    if isinstance(shape, tuple) and len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    dims = (shape,) if isinstance(shape, (int, float, np.integer, np.floating)) else tuple(shape)
    out = []
    for d in dims:
        if isinstance(d, Tensor):
            d = d.item()
        fd = float(d)
        if not math.isfinite(fd) or not fd.is_integer() or fd < 0:
            raise InvalidValueError(f"{what}: a dimension must be a whole number >= 0, not {d}")
        out.append(int(fd))
    check_size(out, what)
    return tuple(out)


def _new(data: Array, requires_grad: bool) -> Tensor:
    t = _const(data)
    t.requires_grad = bool(requires_grad)
    return t


def zeros(*shape: Any, dtype: Any = np.float64, requires_grad: bool = False) -> Tensor:
    """Zeros of a shape (ints or one tuple)."""
    return _new(np.zeros(_shape_arg(shape, "zeros"), dtype=dtype), requires_grad)


def ones(*shape: Any, dtype: Any = np.float64, requires_grad: bool = False) -> Tensor:
    """Ones of a shape (ints or one tuple)."""
    return _new(np.ones(_shape_arg(shape, "ones"), dtype=dtype), requires_grad)


def full(shape: Any, value: Any, dtype: Any = np.float64, requires_grad: bool = False) -> Tensor:
    """A shape filled with ``value``."""
    v = value.data if isinstance(value, Tensor) else value
    return _new(np.full(_shape_arg(shape, "full"), v, dtype=dtype), requires_grad)


def eye(n: Any, m: Any = None, k: int = 0, dtype: Any = np.float64) -> Tensor:
    """The identity matrix (``m`` columns, ones on diagonal ``k``)."""
    rows, cols = _shape_arg((n, n if m is None else m), "eye")
    return _const(np.eye(rows, cols, int(k), dtype=dtype))


def arange(
    start: float, stop: float | None = None, step: float = 1.0, dtype: Any = np.float64
) -> Tensor:
    """Evenly spaced values in ``[start, stop)``."""
    if stop is None:
        start, stop = 0.0, start
    if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
        raise InvalidValueError("arange: start, stop and step must be finite and step nonzero")
    n = builtins.max(0, math.ceil((stop - start) / step))
    check_size((n,), "arange")
    return _const(np.arange(start, stop, step, dtype=dtype))


def linspace(start: float, stop: float, num: Any = 50, dtype: Any = np.float64) -> Tensor:
    """``num`` evenly spaced values in ``[start, stop]``."""
    (n,) = _shape_arg((num,), "linspace")
    return _const(np.linspace(start, stop, n, dtype=dtype))


# made on first use: importing numpy.random costs ~20 ms of start-up
_DEFAULT_RNG: list[np.random.Generator] = []


def manual_seed(seed: int) -> None:
    """Reseed the generator ``rand``/``randn`` use when called without ``rng``."""
    _DEFAULT_RNG[:] = [np.random.default_rng(seed)]


def _default_rng() -> np.random.Generator:
    if not _DEFAULT_RNG:
        manual_seed(0)
    return _DEFAULT_RNG[0]


def rand(*shape: Any, rng: np.random.Generator | None = None, dtype: Any = np.float64) -> Tensor:
    """Uniform random numbers in [0, 1)."""
    gen = rng if rng is not None else _default_rng()
    return _const(gen.random(_shape_arg(shape, "rand")).astype(dtype, copy=False))


def randn(*shape: Any, rng: np.random.Generator | None = None, dtype: Any = np.float64) -> Tensor:
    """Standard normal random numbers."""
    gen = rng if rng is not None else _default_rng()
    return _const(gen.standard_normal(_shape_arg(shape, "randn")).astype(dtype, copy=False))


def generator(seed: int) -> np.random.Generator:
    """The random generator of one program (``numpy.random.default_rng``)."""
    return np.random.default_rng(seed)


def constant(value: float, dtype: Any = np.float64) -> Tensor:
    """A 0-d constant tensor (numbers of the language)."""
    return _const(np.asarray(value, dtype=dtype))


# --------------------------------------------------------------------------------------
# The two namespaces the rules run on
# --------------------------------------------------------------------------------------


class _ArrayNamespace:
    """What a rule's ``m`` offers when it runs on plain arrays (first-order backward)."""

    sign = staticmethod(np.sign)
    cos = staticmethod(np.cos)
    sin = staticmethod(np.sin)
    cosh = staticmethod(np.cosh)
    sinh = staticmethod(np.sinh)
    sqrt = staticmethod(np.sqrt)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    abs = staticmethod(np.abs)
    sigmoid = staticmethod(_sigmoid_fwd)
    maximum = staticmethod(np.maximum)
    matmul = staticmethod(np.matmul)
    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)
    flip = staticmethod(np.flip)
    expand_dims = staticmethod(np.expand_dims)
    zeros_like = staticmethod(np.zeros_like)
    broadcast_to = staticmethod(np.broadcast_to)
    sum_to = staticmethod(_sum_to_array)
    scatter = staticmethod(_scatter_array)
    solve = staticmethod(np.linalg.solve)
    inv = staticmethod(np.linalg.inv)

    @staticmethod
    def where(c: Any, x: Any, y: Any) -> Array:
        return np.where(c, x, y)

    @staticmethod
    def sum(x: Array, axis: Any = None, keepdims: bool = False) -> Array:
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def getitem(x: Array, key: Any) -> Array:
        return x[key]

    @staticmethod
    def mean(x: Array, axis: Any = None, keepdims: bool = False) -> Array:
        return np.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def as_float(mask: Array, like: Array) -> Array:
        """A boolean mask as 1.0/0.0 in ``like``'s dtype (bool * 1.0 would be float64)."""
        return mask.astype(like.dtype)


class _TensorNamespace:
    """What a rule's ``m`` offers on tensors: the same names, recorded in the graph."""

    sign = staticmethod(sign)
    cos = staticmethod(cos)
    sin = staticmethod(sin)
    cosh = staticmethod(cosh)
    sinh = staticmethod(sinh)
    sqrt = staticmethod(sqrt)
    exp = staticmethod(exp)
    log = staticmethod(log)
    abs = staticmethod(absolute)
    sigmoid = staticmethod(sigmoid)
    maximum = staticmethod(maximum)
    matmul = staticmethod(matmul)
    reshape = staticmethod(reshape)
    transpose = staticmethod(transpose)
    flip = staticmethod(flip)
    expand_dims = staticmethod(expand_dims)
    zeros_like = staticmethod(zeros_like)
    broadcast_to = staticmethod(broadcast_to)
    sum_to = staticmethod(sum_to)
    scatter = staticmethod(scatter)
    solve = staticmethod(solve)
    inv = staticmethod(inv)
    where = staticmethod(where)
    sum = staticmethod(sum)
    getitem = staticmethod(getitem)
    mean = staticmethod(mean)

    @staticmethod
    def as_float(mask: Tensor, like: Tensor) -> Tensor:
        return mask  # comparisons of tensors are already 1.0/0.0 in their dtype


A = _ArrayNamespace
T = _TensorNamespace


# --------------------------------------------------------------------------------------
# Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_) and float errors
# --------------------------------------------------------------------------------------


def norm_type_of(norm_type: Any) -> float:
    """A norm order: a positive number, ``inf``, ``"inf"`` or ``"Infinity"``."""
    p: Any = norm_type
    if isinstance(p, str):
        spelled = p.strip().lower()
        p = math.inf if spelled in ("inf", "infinity", "+inf", "+infinity") else spelled
        try:
            p = float(p)
        except ValueError:
            p = None
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not float(p) > 0:
        raise InvalidValueError(f"norm_type must be a positive number or inf, not {norm_type!r}")
    return float(p)


def total_norm(arrays: Sequence[Array], norm_type: float) -> float:
    """The norm of the per-array norms (``inf``: the largest absolute value), as torch.

    Overflow gives inf, without NumPy's warning: the caller reports non-finite values."""
    if not arrays:
        return 0.0
    with np.errstate(all="ignore"):
        return _total_norm(arrays, norm_type)


def _total_norm(arrays: Sequence[Array], norm_type: float) -> float:
    if norm_type == math.inf:
        return float(builtins.max(float(np.max(np.abs(a), initial=0.0)) for a in arrays))
    norms = [_norm_fwd(a.ravel(), (0,), False, norm_type) for a in arrays]
    return float(_norm_fwd(np.array(norms, dtype=np.float64), (0,), False, norm_type))


def clip_by_norm(
    arrays: Sequence[Array], max_norm: float, norm_type: float = 2.0, total: float | None = None
) -> tuple[float, float]:
    """Scale ``arrays`` in place so their total norm is at most ``max_norm``.

    Returns ``(total_norm, scale)`` with ``scale = min(1, max_norm / (total + 1e-6))``,
    exactly torch's coefficient (so a total below ``max_norm`` still gives a scale of 1).
    """
    if total is None:
        total = total_norm(arrays, norm_type)
    coef = max_norm / (total + 1e-6)
    scale = coef if math.isnan(coef) else builtins.min(1.0, coef)  # torch: nan stays nan
    with np.errstate(invalid="ignore"):  # inf * 0 when the total is inf: nan, as torch
        for a in arrays:
            a *= scale
    return total, scale


def clip_by_value(arrays: Sequence[Array], clip_value: float) -> None:
    """Clamp every element of ``arrays`` into ``[-clip_value, clip_value]``, in place.

    The bound is first made a number of the array's dtype, as torch's clamp does: 1e300 is
    inf in float32 (NumPy would warn about the cast on every call instead)."""
    for a in arrays:
        with np.errstate(over="ignore"):
            bound = a.dtype.type(clip_value)
        np.clip(a, -bound, bound, out=a)


class floating_errors:
    """Count NumPy's floating-point errors (overflow, invalid value, division by zero) and
    its RuntimeWarnings (``Mean of empty slice``) instead of printing one per operation;
    report each kind once afterwards."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def _record(self, kind: str, flag: int) -> None:
        kind = f"{kind} encountered"
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def __enter__(self) -> floating_errors:
        import warnings

        self._errstate = np.errstate(over="call", divide="call", invalid="call", under="ignore",
                                     call=self._record)  # fmt: skip
        self._errstate.__enter__()
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always", RuntimeWarning)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._warnings.__exit__(*exc)
        self._errstate.__exit__(*exc)
        for w in self._caught:
            kind = str(w.message)
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def messages(self) -> list[str]:
        return [
            f"{kind} in {n} operation{'s' if n != 1 else ''}"
            for kind, n in sorted(self.counts.items())
        ]


def all_finite(a: Array) -> bool:
    return bool(np.isfinite(a).all())


# --------------------------------------------------------------------------------------
# Every function of the language as a Tensor method (``x.sum()``, ``x.tanh()``), with
# torch's keyword spellings accepted (``dim`` for ``axis``, ``keepdim`` for ``keepdims``).
# --------------------------------------------------------------------------------------


def torch_keywords(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` also accepting torch's spellings: ``dim`` for ``axis``, ``keepdim`` for
    ``keepdims`` (``gradcli.sum(x, dim=0, keepdim=True)``, ``x.sum(dim=0)``)."""

    def call(*args: Any, **kwargs: Any) -> Tensor:
        if "dim" in kwargs:
            kwargs["axis"] = kwargs.pop("dim")
        if "keepdim" in kwargs:
            kwargs["keepdims"] = kwargs.pop("keepdim")
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call


def _reshape_method(self: Tensor, *shape: Any) -> Tensor:
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
    return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)


def _transpose_method(self: Tensor, *dims: Any) -> Tensor:
    """torch's ``x.transpose(0, 1)`` swaps two axes; ``x.transpose()`` reverses them all, and a
    full permutation (``x.transpose((2, 0, 1))`` or three or more ints) is NumPy's."""
    if not dims:
        return transpose(self)
    if len(dims) == 2 and all(isinstance(d, (int, np.integer)) for d in dims):
        return swapaxes(self, int(dims[0]), int(dims[1]))
    return transpose(self, dims[0] if len(dims) == 1 else dims)


for _fn in (
    sign, floor, ceil, round, sqrt, square, exp, expm1, log, log2, log10, log1p, sin, cos,
    tan, arcsin, arccos, arctan, sinh, cosh, tanh, arcsinh, arccosh, arctanh, sigmoid, relu,
    softplus, maximum, minimum, arctan2, clip, sum, mean, prod, max, min, logsumexp, norm,
    var, std, softmax, log_softmax, flatten, squeeze, expand_dims, flip, matmul, dot, outer,
    trace, diag, det, inv,
):  # fmt: skip
    setattr(Tensor, _fn.__name__, torch_keywords(_fn))
for _alias, _fn in (
    ("abs", absolute), ("pow", power), ("amax", max), ("amin", min), ("asin", arcsin),
    ("acos", arccos), ("atan", arctan), ("asinh", arcsinh), ("acosh", arccosh),
    ("atanh", arctanh), ("atan2", arctan2),
):  # fmt: skip
    setattr(Tensor, _alias, torch_keywords(_fn))
Tensor.reshape = _reshape_method  # type: ignore[attr-defined]
Tensor.transpose = _transpose_method  # type: ignore[attr-defined]
float32 = np.float32
float64 = np.float64
