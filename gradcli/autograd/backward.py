"""The backward pass: ``Tensor.backward()`` and ``autograd.grad()`` (docs/engine.md,
"Backward").

Nodes are visited by decreasing sequence number: every consumer of a node was made after
it, so all of them have added their part of its gradient before it is visited. No recursion
and no separate topological sort; a node is queued when its first gradient arrives. The
running gradients live in a dict local to the call, so a second backward starts clean.
Broadcasting is undone here, once, never inside a rule.

After a node's rule has run, the values it saved are released unless ``retain_graph``; a
later backward that needs them raises torch's error.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError
from .backend import NUMPY
from .node import FREED, FREED_MESSAGE, AccumulateGrad, Node
from .registry import FACTOR, namespaces
from .state import GRAD, NO_GRAD, STATE
from .tensor import Tensor, accumulator, const, edge, tensor_on_edge

_ndarray = np.ndarray
_NOT_WANTED = "element 0 of tensors does not require grad and does not have a grad_fn"


def _seed(out: Tensor, gradient: Any, what: str, create_graph: bool) -> Any:
    """The gradient backward starts from: ones for a scalar, else the one given."""
    if gradient is None:
        if out.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        g: Any = np.ones_like(out.data)
    else:
        g = gradient.data if isinstance(gradient, Tensor) else np.asarray(gradient)
        if g.shape != out.data.shape:
            raise ShapeError(
                f"{what} of shape {g.shape} does not match the output shape {out.data.shape}"
            )
        g = g.astype(out.data.dtype, copy=False)
    if create_graph:
        return gradient if isinstance(gradient, Tensor) else const(g)
    return g


def _root(out: Tensor) -> Node | AccumulateGrad:
    root = edge(out)
    if root is None:
        raise RuntimeError(_NOT_WANTED)
    return root


def backward(out: Tensor, gradient: Any, retain_graph: bool | None, create_graph: bool) -> None:
    """Accumulate d out / d leaf into every leaf's ``.grad``."""
    root = _root(out)
    g = _seed(out, gradient, "backward: gradient", create_graph)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    run(root, g, create_graph, retain, None)


def grad(
    outputs: Tensor,
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = True,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``."""
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    g = _seed(outputs, grad_outputs, "grad: grad_outputs", create_graph)
    root = _root(outputs)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    targets = [edge(t) for t in ins]
    found = run(root, g, create_graph, retain, targets)
    result: list[Tensor | None] = []
    for t, gi in zip(ins, found, strict=True):
        if gi is None:
            result.append(None)
        elif create_graph:
            result.append(gi)
        else:
            result.append(const(np.array(gi, dtype=t.data.dtype, copy=True)))
    return tuple(result)


def run(
    root: Node | AccumulateGrad,
    g: Any,
    create_graph: bool,
    retain: bool,
    targets: list[Node | AccumulateGrad | None] | None,
) -> list[Any]:
    """Propagate ``g`` = d(loss)/d(root) through the graph.

    With ``targets`` None, gradients are accumulated into the ``.grad`` of leaves (and of
    non-leaves that retain theirs). Otherwise the gradient reaching each target node is
    returned and nothing is written (``autograd.grad``).
    """
    arrays, tensors = namespaces()
    xp = tensors if create_graph else arrays
    wanted: dict[Any, list[int]] | None = None
    found: list[Any] = []
    if targets is not None:
        wanted = {}
        for i, t in enumerate(targets):
            if t is not None:
                wanted.setdefault(t, []).append(i)
        found = [None] * len(targets)
    grads: dict[Any, Any] = {root: g}
    owned: set[Any] = set()  # nodes whose gradient buffer is ours to write into in place
    queue = [(-root.seq, root)]
    push, popq = heapq.heappush, heapq.heappop
    pop, get = grads.pop, grads.get
    ndarray = _ndarray
    is_owned = NUMPY.owned
    state = STATE
    prev_mode = state.mode
    state.mode = GRAD if create_graph else NO_GRAD
    try:
        with NUMPY.quiet():
            while queue:
                node: Any = popq(queue)[1]
                gnode = pop(node)
                prim = node.prim
                if wanted is not None and node in wanted:
                    for i in wanted[node]:
                        found[i] = gnode
                    owned.discard(node)  # handed out: never written into again
                if prim is None:
                    if wanted is None:
                        _accumulate(node.variable, gnode, node in owned, create_graph)
                    continue
                if wanted is None and node.retained is not None:
                    kept = node.retained()
                    if kept is not None:
                        _accumulate(kept, gnode, False, create_graph)
                saved = node.saved
                if saved is FREED:
                    raise RuntimeError(FREED_MESSAGE)
                ans = node.ans
                ctx = node.ctx
                if create_graph:
                    if saved:
                        saved = _as_tensors(node)
                    if ans is not None:
                        ans = tensor_on_edge(ans, node)
                if not retain:
                    if node.saved:
                        node.saved = FREED
                    node.ans = None
                form = prim.form
                took = False  # pg is gnode, written into in place: still ours
                if form:
                    # one input, elementwise: g * factor or g / divisor, into g when g is
                    # a buffer of our own of the right shape and dtype
                    to = node.next[0]
                    if to is None:
                        continue
                    local = prim.local(xp, ans, ctx, *saved)
                    if node in owned and (
                        type(local) is float
                        or type(local) is ndarray
                        and local.shape == gnode.shape
                        and (local.dtype == gnode.dtype or local.dtype.kind == "b")
                    ):
                        if form == FACTOR:
                            np.multiply(gnode, local, out=gnode)
                        else:
                            np.divide(gnode, local, out=gnode)
                        pg = gnode
                        took = True
                    elif form == FACTOR:
                        pg = gnode * local
                    else:
                        pg = gnode / local
                    local = None  # not alive while the next rule allocates
                    pairs: Any = ((to, pg),)
                elif prim.nary:
                    rule = prim.vjps[0]
                    pairs = [
                        (to, rule(xp, gnode, ans, ctx, i))
                        for i, to in enumerate(node.next)
                        if to is not None
                    ]
                else:
                    pairs = [
                        (to, rule(xp, gnode, ans, ctx, *saved))
                        for to, rule in zip(node.next, prim.vjps, strict=True)
                        if to is not None and rule is not None
                    ]
                for to, pg in pairs:
                    if pg is None:
                        continue
                    shape = to.shape
                    if pg.shape != shape:
                        pg = xp.sum_to(pg, shape)
                        fresh = is_owned(pg, gnode)
                    else:
                        fresh = took or is_owned(pg, gnode)
                    prev = get(to)
                    if prev is None:
                        grads[to] = pg
                        push(queue, (-to.seq, to))
                        if fresh:
                            owned.add(to)
                    elif to in owned:
                        prev += pg
                    elif fresh:
                        pg += prev
                        grads[to] = pg
                        owned.add(to)
                    else:
                        total = grads[to] = prev + pg
                        if type(total) is ndarray:
                            owned.add(to)
                # what this node held is released now, not when the next one is visited
                gnode = pg = prev = pairs = saved = ans = None
    finally:
        state.mode = prev_mode
    return found


def _as_tensors(node: Node) -> tuple[Any, ...]:
    """A node's saved inputs as tensors in the graph again, for ``create_graph``: each is
    the saved value with the edge it came through, so differentiating the rule reaches the
    same nodes and leaves as the forward pass did."""
    return tuple(
        value if value is None or type(value) is float else tensor_on_edge(value, to)
        for value, to in zip(node.saved, node.next, strict=True)
    )


def _accumulate(t: Tensor, g: Any, owned: bool, create_graph: bool) -> None:
    """Add ``g`` into ``t.grad`` (a new tensor the first time, in place after)."""
    if create_graph:
        if t.grad is not None:
            t.grad = t.grad + g
        elif isinstance(g, Tensor) and g.requires_grad:
            # a tensor of its own, still in the graph: the same g may reach other leaves
            # (x + y), and .grad is the user's to change in place (zero_), as in torch
            t.grad = g * 1.0
        else:
            t.grad = const(np.array(g.data if isinstance(g, Tensor) else g, copy=True))
        return
    if t.grad is None:
        if not owned:
            g = np.array(g, dtype=t.data.dtype, copy=True)
        t.grad = const(g)
    else:
        t.grad.data += g


def leaf_node(t: Tensor) -> AccumulateGrad:
    return accumulator(t)
