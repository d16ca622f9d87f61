"""Forward mode and Hessian-vector products on the reverse-mode engine, and
``torch.autograd.functional``'s ``vjp``, ``jvp``, ``vhp``, ``hvp`` under their names
(docs/api.md, "Forward mode and Hessian-vector products").

Forward mode is the **double-VJP**: for a dummy ``v`` shaped like the output, the backward
pass with ``create_graph=True`` records ``u = Jᵀ v`` as a graph of ``v``. That graph is
linear in ``v``, so *its* backward pass with seed ``t`` gives ``(∂u/∂v)ᵀ t = J t``: the
Jacobian-vector product. Every primitive gets forward mode from the VJP rule it already has,
with the same derivative at a kink as reverse mode (docs/conventions.md), at the price of
one extra backward pass, recorded, over the forward pass.

A Hessian-vector product is one double backward: the gradient recorded
(``create_graph=True``), then the gradient of ``grad · v``; no n × n matrix is formed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .backward import grad
from .registry import FUNCTIONS
from .replay import Rows
from .state import enable_grad
from .tensor import Tensor, const


def _zeros(like: Tensor) -> np.ndarray:
    return np.zeros(like.shape, dtype=like.dtype)


def _one_root(parts: Sequence[Tensor], seeds: Sequence[Any] | None) -> tuple[Tensor, Any]:
    """One tensor to start a backward pass from, and its seed: the one part as it is, or
    several flattened and concatenated (``autograd.grad`` takes one output)."""
    if len(parts) == 1:
        return parts[0], None if seeds is None else seeds[0]
    flatten, concatenate = FUNCTIONS["flatten"].call, FUNCTIONS["concatenate"].call
    root = concatenate([flatten(p) for p in parts])
    if seeds is None:
        return root, None
    return root, np.concatenate([np.asarray(s).ravel() for s in seeds])


def transposed(
    outs: Sequence[Tensor], leaves: Sequence[Tensor]
) -> tuple[list[Tensor], list[Tensor | None]]:
    """The dummies ``v_k`` (zeros shaped like each output, requiring grad) and, per leaf,
    ``u_i = Σ_k J_ki^T v_k`` recorded as a graph of the ``v_k`` (None where the outputs do
    not depend on the leaf). ``u_i`` is linear in the ``v_k``: their values do not matter.
    Outputs that do not require grad are left out (their Jacobian is zero)."""
    live = [o for o in outs if o.requires_grad]
    vs = [const(_zeros(o), requires_grad=True) for o in outs]
    if not live:
        return vs, [None] * len(leaves)
    if len(live) == 1:
        k = next(i for i, o in enumerate(outs) if o.requires_grad)
        us = grad(live[0], leaves, grad_outputs=vs[k], create_graph=True, allow_unused=True)
    else:
        total: Tensor | None = None
        for o, v in zip(outs, vs, strict=True):
            if o.requires_grad:
                term = (o * v).sum()
                total = term if total is None else total + term
        assert total is not None
        us = grad(total, leaves, create_graph=True, allow_unused=True)
    return vs, [u if u is not None and u.requires_grad else None for u in us]


def directional(
    outs: Sequence[Tensor],
    leaves: Sequence[Tensor],
    tangents: Sequence[Any],
    create_graph: bool = False,
) -> list[Any]:
    """``J_k t = Σ_i J_ki t_i`` for every output k (a tensor with ``create_graph``, else an
    array), by the double-VJP: the backward pass of ``u = Jᵀ v`` with the tangents as its
    seed. A leaf whose tangent is None is held fixed."""
    vs, us = transposed(outs, leaves)
    pairs = [(u, t) for u, t in zip(us, tangents, strict=True) if u is not None and t is not None]
    found: Sequence[Tensor | None] = [None] * len(outs)
    if pairs:
        root, seed = _one_root([u for u, _ in pairs], [t for _, t in pairs])
        found = grad(root, vs, grad_outputs=seed, create_graph=create_graph, allow_unused=True)
    result: list[Any] = []
    for o, f in zip(outs, found, strict=True):
        if f is None:
            zero = _zeros(o)
            result.append(const(zero) if create_graph else zero)
        else:
            result.append(f if create_graph else f.data)
    return result


def rows(root: Tensor, leaves: Sequence[Tensor]) -> Iterator[list[Any]]:
    """One backward pass of ``root`` per element (seed e_i, shaped like ``root``): the
    gradients of ``leaves`` as arrays (None where one is not reached), the first pass
    recorded and the others replayed (docs/engine.md, "Replay")."""
    n = root.numel()

    def onehot(i: int) -> np.ndarray:  # one at a time: n seeds of n would be n² numbers
        seed = np.zeros(n, dtype=root.dtype)
        seed[i] = 1.0
        return seed.reshape(root.shape)

    if n == 0:
        return
    replay = Rows(root, leaves, onehot(0))
    yield replay.first
    for i in range(1, n):
        yield replay(onehot(i))


def forward_columns(
    outs: Sequence[Tensor], leaves: Sequence[Tensor]
) -> Iterator[tuple[int, int, list[Any]]]:
    """The Jacobian by forward mode, a column at a time: ``(i, c, columns)`` for element c
    of leaf i, ``columns[k]`` the array ``J_k e_c`` shaped like output k (None: zero). One
    backward pass of ``u = Jᵀ v`` per input element, the first recorded, the others
    replayed; nothing for a leaf the outputs do not depend on (its columns are zero)."""
    vs, us = transposed(outs, leaves)
    live = [i for i, u in enumerate(us) if u is not None]
    if not live:
        return
    root, _ = _one_root([u for u in us if u is not None], None)
    columns = rows(root, vs)
    for i in live:
        for c in range(leaves[i].numel()):
            yield i, c, next(columns)


def hessian_vector(
    out: Tensor, leaves: Sequence[Tensor], vectors: Sequence[Any], create_graph: bool = False
) -> list[Any]:
    """``H v`` of a scalar ``out``, one part per leaf: the gradient of ``grad(out) · v``
    (one backward pass recorded, one backward pass of it), never the matrix. A leaf whose
    vector is None has a zero part of ``v``."""
    found: Sequence[Tensor | None] = [None] * len(leaves)
    if out.requires_grad:
        firsts = grad(out, leaves, create_graph=True, allow_unused=True)
        pairs = [
            (g, v)
            for g, v in zip(firsts, vectors, strict=True)
            if g is not None and g.requires_grad and v is not None
        ]
        if pairs:
            root, seed = _one_root([g for g, _ in pairs], [v for _, v in pairs])
            found = grad(
                root, leaves, grad_outputs=seed, create_graph=create_graph, allow_unused=True
            )
    result: list[Any] = []
    for leaf, f in zip(leaves, found, strict=True):
        if f is None:
            zero = _zeros(leaf)
            result.append(const(zero) if create_graph else zero)
        else:
            result.append(f if create_graph else f.data)
    return result


# --------------------------------------------------------------------------------------
# torch.autograd.functional
# --------------------------------------------------------------------------------------


def _tensors(x: Any, what: str, fn: str) -> tuple[tuple[Tensor, ...], bool]:
    """``x`` as a tuple of tensors, and whether it was a tuple (torch's ``_as_tuple``)."""
    if isinstance(x, Tensor):
        return (x,), False
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), True
    raise TypeError(
        f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but the "
        f"value given has type {type(x).__name__}."
    )


def _inputs(inputs: tuple[Tensor, ...], create_graph: bool) -> tuple[Tensor, ...]:
    """The tensors to differentiate at: the caller's own when ``create_graph`` and they
    require grad (the result's graph then reaches them), else fresh leaves on their data."""
    return tuple(
        t if create_graph and t.requires_grad else const(t.data, requires_grad=True) for t in inputs
    )


def _vectors(v: Any, like: tuple[Tensor, ...], what: str, fn: str) -> tuple[Any, ...]:
    """The arrays of ``v`` (one per tensor of ``like``, of its shape); ``v=None`` only for
    one tensor of one element, as torch allows."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(
                f"The vector v can only be None if the {what} to the user-provided function "
                "is a single Tensor with a single element."
            )
        return (np.ones(like[0].shape, dtype=like[0].dtype),)
    vs, _ = _tensors(v, "v", fn)
    if len(vs) != len(like):
        raise RuntimeError(
            f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}."
        )
    for i, (a, b) in enumerate(zip(vs, like, strict=True)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(
                f"Entry {i} in v has invalid size: should be {list(b.shape)} but got "
                f"{list(a.shape)}."
            )
    return tuple(a.data for a in vs)


def _outputs(out: Any, fn: str) -> tuple[tuple[Tensor, ...], bool]:
    return _tensors(out, "outputs of the user-provided function", fn)


def _shaped(parts: Sequence[Any], as_tuple: bool, create_graph: bool) -> Any:
    ts = tuple(p if isinstance(p, Tensor) else const(p) for p in parts)
    if not create_graph:
        ts = tuple(t.detach() if t.requires_grad else t for t in ts)
    return ts if as_tuple else ts[0]


def _detached(outs: tuple[Tensor, ...], as_tuple: bool, create_graph: bool) -> Any:
    return _shaped([o if create_graph else o.detach() for o in outs], as_tuple, create_graph)


def vjp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), vᵀ J)``, shaped like the outputs and the inputs, as
    ``torch.autograd.functional.vjp``."""
    ins, ins_tuple = _tensors(inputs, "inputs", "vjp")
    with enable_grad():
        leaves = _inputs(ins, create_graph)
        outs, outs_tuple = _outputs(func(*leaves), "vjp")
        seeds = _vectors(v, outs, "outputs", "vjp")
        live = [(o, s) for o, s in zip(outs, seeds, strict=True) if o.requires_grad]
        parts: list[Any] = [_zeros(x) for x in leaves]
        if live:
            root, seed = _one_root([o for o, _ in live], [s for _, s in live])
            found = grad(
                root, leaves, grad_outputs=seed, create_graph=create_graph, allow_unused=True
            )
            parts = [p if f is None else f for p, f in zip(parts, found, strict=True)]
    return _detached(outs, outs_tuple, create_graph), _shaped(parts, ins_tuple, create_graph)


def jvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), J v)``, the second shaped like the outputs, as
    ``torch.autograd.functional.jvp``; by the double-VJP (see the module)."""
    ins, _ = _tensors(inputs, "inputs", "jvp")
    tangents = _vectors(v, ins, "input", "jvp")
    with enable_grad():
        leaves = _inputs(ins, create_graph)
        outs, outs_tuple = _outputs(func(*leaves), "jvp")
        parts = directional(outs, leaves, tangents, create_graph)
    return _detached(outs, outs_tuple, create_graph), _shaped(parts, outs_tuple, create_graph)


def _second(
    name: str, func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool
) -> tuple[Any, Any]:
    ins, ins_tuple = _tensors(inputs, "inputs", name)
    vectors = _vectors(v, ins, "input", name)
    with enable_grad():
        leaves = _inputs(ins, create_graph)
        outs, _ = _outputs(func(*leaves), name)
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {name} should contain a single "
                "element"
            )
        out = outs[0].reshape(()) if outs[0].ndim else outs[0]
        parts = hessian_vector(out, leaves, vectors, create_graph)
    return _detached(outs, False, create_graph), _shaped(parts, ins_tuple, create_graph)


def hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), H v)`` of a function with one output element, shaped like the
    inputs, as ``torch.autograd.functional.hvp``: the gradient of ``grad · v`` (the Hessian
    is symmetric where it exists, so this is ``vᵀ H`` too)."""
    return _second("hvp", func, inputs, v, create_graph)


def vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), vᵀ H)``, as ``torch.autograd.functional.vhp``."""
    return _second("vhp", func, inputs, v, create_graph)


#: the names torch.autograd.functional has and gradcli offers
NAMES = ("hvp", "jvp", "vhp", "vjp")

__all__ = [
    "NAMES", "directional", "forward_columns", "hessian_vector", "hvp", "jvp", "rows",
    "transposed", "vhp", "vjp",
]  # fmt: skip
