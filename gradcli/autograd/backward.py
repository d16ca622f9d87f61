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

import contextvars
import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..i18n import msg
from . import registry
from .backend import NUMPY, ONE64, as_data, backend_of
from .node import (
    ANS,
    FACTOR,
    FREED,
    FREED_MESSAGE,
    WALK_PRODUCT,
    WALK_SUM,
    AccumulateGrad,
    Node,
    identity,
)
from .state import GRAD, NO_GRAD, set_mode
from .tensor import Tensor, const, edge, tensor_on_edge

_ndarray = np.ndarray
_new = object.__new__  # a Tensor without its __init__ (see Tensor)
#: gradients of at least this many elements are written into in place when they can be
INPLACE_MIN = 1 << 14
_NOT_WANTED = "element 0 of tensors does not require grad and does not have a grad_fn"
_UNUSED = (
    "One of the differentiated Tensors appears to not have been used in the graph. "
    "Set allow_unused=True if this is the desired behavior."
)
#: an observer of one backward pass (``gradcli explain``, docs/explain.md): while it is set
#: in this context (thread) and ``observer.watches(out)``, ``backward()`` takes
#: :func:`run`'s walk and reports each step to it; None otherwise, read once per backward
#: pass. A context variable: an ``explain`` in one thread never sees another's steps
OBSERVER: contextvars.ContextVar[Any] = contextvars.ContextVar("gradcli_observer", default=None)


def _seed(out: Tensor, gradient: Any, what: str, create_graph: bool) -> Any:
    """The gradient backward starts from: ones for a scalar, else the one given."""
    if gradient is None:
        if out.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        g: Any = _ones(out.data)
    else:
        g = gradient.data if isinstance(gradient, Tensor) else as_data(gradient)
        if g.shape != out.data.shape:
            raise ShapeError(
                msg(
                    "{what} of shape {shape} does not match the output shape {shape2}",
                    what=what,
                    shape=g.shape,
                    shape2=out.data.shape,
                )
            )
        g = g.astype(out.data.dtype, copy=False)
    if create_graph:  # the seed may become a .grad or a result: an array of its own
        return gradient if isinstance(gradient, Tensor) else const(_own(g))
    return g


def _own(g: Any, dtype: Any = None) -> Any:
    """A copy of ``g`` (as ``dtype``) for a caller to keep: another backend's (lazy) array
    as it is, for it cannot be written into (a copy would compute it)."""
    on = backend_of(g)
    if on is not NUMPY:
        return g if dtype is None else on.astype(g, dtype)
    return np.array(g, dtype=dtype, copy=True)


_ONES: dict[Any, Any] = {}
_FLOAT64 = np.dtype(np.float64)


def _ones(like: Any) -> Any:
    """A read-only one shaped like the scalar ``like``, made once per dtype and shape:
    backward never writes into a gradient it did not make."""
    key = (like.dtype, like.shape)
    one = _ONES.get(key)
    if one is None:
        one = _ONES[key] = np.ones(like.shape, like.dtype)  # NumPy's, for any backend
        one.flags.writeable = False
    return one


# the seed of a float64 scalar, the common case (a full sum of it is viewed without a call)
_ONE64 = _ONES[(_FLOAT64, ())] = ONE64


def _root(out: Tensor) -> Node | AccumulateGrad:
    root = edge(out)
    if root is None:
        raise RuntimeError(_NOT_WANTED)
    return root


def backward(
    out: Tensor, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False
) -> None:
    """Accumulate d out / d leaf into every leaf's ``.grad`` (PyTorch's semantics); this is
    ``Tensor.backward``.

    The values the graph saved are released afterwards unless ``retain_graph``
    (default: ``create_graph``); a second backward through them raises, as in torch.
    """
    root = out.grad_fn or _root(out)
    data = out.data
    if gradient is None and not create_graph and data.size == 1:
        # the common case, without the general checks; a float64 scalar's one directly
        g = _ONE64 if data.ndim == 0 and data.dtype is _FLOAT64 else _ones(data)
    else:
        g = _seed(out, gradient, "backward: gradient", create_graph)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    observer = OBSERVER.get()
    if observer is not None and not create_graph and observer.watches(out):
        run(root, g, False, retain, None, backend_of(out.data), observer)
    elif create_graph:
        run(root, g, True, retain, None)
    elif type(out.data) is _ndarray:
        NUMPY.quietly(_run_plain, root, g, not retain, _ARRAYS or _arrays())
    else:  # another backend's arrays (docs/engine.md, "Backends")
        xp = registry.array_namespace(backend_of(out.data))
        NUMPY.quietly(_run_plain, root, g, not retain, xp)


#: NumPy's array namespace, once the registry has made it (see _arrays)
_ARRAYS: Any = None


def _arrays() -> Any:
    global _ARRAYS
    _ARRAYS = registry.namespaces()[0]
    return _ARRAYS


def grad(
    outputs: Tensor,
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    As torch's: an input the output does not depend on is an error unless
    ``allow_unused`` (its gradient is then None, or zeros with ``materialize_grads``)."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    unused_ok = materialize_grads if allow_unused is None else allow_unused
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    g = _seed(outputs, grad_outputs, "grad: grad_outputs", create_graph)
    root = _root(outputs)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    targets = [edge(t) for t in ins]
    found = run(root, g, create_graph, retain, targets, backend_of(outputs.data))
    if not unused_ok and any(gi is None for gi in found):
        raise RuntimeError(_UNUSED)
    result: list[Tensor | None] = []
    for t, gi in zip(ins, found, strict=True):
        if gi is None:
            result.append(
                const(backend_of(t.data).zeros_like(t.data)) if materialize_grads else None
            )
        elif create_graph:
            result.append(gi)
        else:
            result.append(const(_own(gi, t.data.dtype)))
    return tuple(result)


def run(
    root: Node | AccumulateGrad,
    g: Any,
    create_graph: bool,
    retain: bool,
    targets: list[Node | AccumulateGrad | None] | None,
    backend: Any = NUMPY,
    observe: Any = None,
) -> list[Any]:
    """Propagate ``g`` = d(loss)/d(root) through the graph.

    With ``targets`` None, gradients are accumulated into the ``.grad`` of leaves (and of
    non-leaves that retain theirs). Otherwise the gradient reaching each target node is
    returned and nothing is written (``autograd.grad``). ``observe``: told of every node
    visited with its gradient, then of each gradient its rule sends to its input ``i``
    (and of one summed back down from a broadcast shape) (see OBSERVER).
    """
    xp = registry.namespaces()[1] if create_graph else registry.array_namespace(backend)
    wanted: dict[Any, list[int]] | None = None
    found: list[Any] = []
    #: with targets and releasing: the nodes a target can be reached from; no other node is
    #: visited, so what the others saved is kept (torch runs only the part it needs). When
    #: nothing is released (Jacobian and Hessian loops), visiting more is only more work,
    #: less than finding the part each time.
    needed: set[Any] | None = None
    if targets is not None:
        wanted = {}
        for i, t in enumerate(targets):
            if t is not None:
                wanted.setdefault(t, []).append(i)
        found = [None] * len(targets)
        if not retain:
            needed = _leading_to(root, wanted)
            if root not in needed:
                return found
    # The node being visited is `node`, with its complete gradient `gnode` and whether that
    # buffer is ours to write into (`own`). A node with a single use is complete as soon as
    # its one consumer has run: the last such input of a node is visited next (a chain
    # goes from node to node with no queue), any other waits on `ready`. A node with
    # several uses collects its terms in `grads` and waits in `queue`, by decreasing
    # sequence number, until all of them have arrived.
    node: Any = root
    gnode: Any = g
    own = False
    ready: list[tuple[Any, Any, bool]] = []
    nxt: Any = None
    gnxt: Any = None
    grads: dict[Any, Any] = {}
    owned: set[Any] = set()  # waiting nodes whose gradient buffer is ours to add into
    queue: list[tuple[int, Any]] = []
    popq = heapq.heappop
    pop = grads.pop
    take = ready.pop
    ready_append = ready.append
    ndarray = _ndarray
    release = not retain
    prev_mode = set_mode(GRAD if create_graph else NO_GRAD)
    try:
        with NUMPY.quiet():
            while True:
                if node is None:
                    if ready:
                        node, gnode, own = take()
                    elif queue:
                        node = popq(queue)[1]
                        gnode = pop(node)
                        own = node in owned
                    else:
                        break
                prim = node.prim
                if observe is not None:
                    observe.visit(node, gnode)
                if wanted is not None and node in wanted:
                    for i in wanted[node]:
                        found[i] = gnode
                    own = False  # handed out: never written into again
                if prim is None:
                    if wanted is None:
                        _accumulate(node.variable, gnode, own, create_graph)
                    node = None
                    continue
                if node.retained is not None and wanted is None:
                    kept = node.retained()
                    if kept is not None:
                        _accumulate(kept, gnode, False, create_graph)
                edges = node.next
                if needed is not None and not any(to in needed for to in edges):
                    node = None
                    continue  # a target that leads to no other: its rule need not run
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
                if release and (saved or ans is not None):
                    node.saved = FREED
                    node.ans = None
                form, local_rule, nary, vjps, broadcasts, nsaved, _, _, _ = prim.plan
                node = None  # the next node to visit, if one is found complete below
                if form:
                    # One input, elementwise: g * factor or g / divisor, written into g
                    # when g is a large buffer of our own of the right shape and dtype.
                    # Its one edge leads somewhere (the node exists because it does).
                    to = edges[0]
                    if needed is not None and to not in needed:
                        continue
                    local = (
                        local_rule(xp, ans, ctx, saved[0]) if saved else local_rule(xp, ans, ctx)
                    )
                    if own and gnode.size >= INPLACE_MIN and fits_into(local, gnode):
                        if form == FACTOR:
                            NUMPY.multiply_into(gnode, local)
                        else:
                            NUMPY.divide_into(gnode, local)
                        fresh = True
                    else:
                        gnode = gnode * local if form == FACTOR else gnode / local
                        fresh = type(gnode) is ndarray
                    local = saved = ans = None  # not alive while the next rule allocates
                    if observe is not None:
                        observe.send(0, to, gnode)
                    if to.uses == 1:
                        node, own = to, fresh
                        continue
                    _collect(to, gnode, fresh, grads, owned, queue)
                    gnode = None
                    continue
                # the input shapes where an input was broadcast up (see Primitive.broadcasts)
                shapes = ctx if broadcasts else None
                nxt = None
                for i, to in enumerate(edges):
                    if to is None or (needed is not None and to not in needed):
                        continue
                    if nary:
                        pg = vjps[0](xp, gnode, ans, ctx, i)
                    else:
                        rule = vjps[i]
                        if rule is identity:
                            pg = gnode
                        elif rule is None:
                            continue
                        else:
                            # called with its arguments spelled out: a call with *saved
                            # costs twice as much
                            if nsaved == 2:
                                pg = rule(xp, gnode, ans, ctx, saved[0], saved[1])
                            elif nsaved == 0:
                                pg = rule(xp, gnode, ans, ctx)
                            else:
                                pg = rule(xp, gnode, ans, ctx, *saved)
                            if pg is None:
                                continue
                    # a fresh array (not g itself, not a view, not a NumPy scalar, which
                    # += would only rebind) can take later terms in place
                    fresh = pg is not gnode and type(pg) is ndarray and pg.base is None
                    if shapes is not None and pg.shape != shapes[i]:
                        if observe is not None:
                            observe.unbroadcast(i, pg)
                        pg = xp.sum_to(pg, shapes[i])
                        fresh = type(pg) is ndarray and pg.base is None
                    if observe is not None:
                        observe.send(i, to, pg)
                    if to.uses == 1:
                        # the last such input is visited next, the others after it (the
                        # order of a stack: W3b's peak memory depends on it)
                        if nxt is not None:
                            ready_append((nxt, gnxt, own))
                        nxt, gnxt, own = to, pg, fresh
                        continue
                    _collect(to, pg, fresh, grads, owned, queue)
                # what this node held is released now, not when the next one is visited
                pg = saved = ans = None
                if nxt is not None:
                    node, gnode = nxt, gnxt
                    gnxt = None
                else:
                    gnode = None
    finally:
        set_mode(prev_mode)
    return found


def _run_plain(root: Node | AccumulateGrad, g: Any, release: bool, xp: Any) -> None:
    """:func:`run` for ``backward()`` without ``create_graph``, the common case: rules on
    arrays, gradients into ``.grad``, every node visited. The same walk as run's, without
    the branches for targets and for tensors; two implementations of one walk are kept
    identical by the tests, which run every rule through both."""
    node: Any = root
    gnode: Any = g
    own = False
    saved: Any = ()
    ans: Any = None
    # whether the gradient passed on is a large array, once a factor step has had to know:
    # a factor or an elementwise product keeps its size, so a chain asks NumPy once
    gbig: bool | None = None
    ready: list[tuple[Any, Any, bool]] = []
    nxt: Any = None
    gnxt: Any = None
    grads: dict[Any, Any] = {}
    owned: set[Any] = set()
    queue: list[tuple[int, Any]] = []
    popq = heapq.heappop
    ndarray = _ndarray
    big = INPLACE_MIN
    # the module's constants as locals: a local is read for less than a global
    freed, factor, of_ans, walk_sum, walk_product = FREED, FACTOR, ANS, WALK_SUM, WALK_PRODUCT
    # No grad mode to switch: rules here see arrays only (never a tensor), so nothing they
    # do is recorded. backward() calls it through NUMPY.quietly: its floating-point errors
    # are expected, never reported (docs/engine.md, "Backward").
    while True:
        if node is None:
            gbig = None
            if ready:
                node, gnode, own = ready.pop()
            elif queue:
                node = popq(queue)[1]
                gnode = grads.pop(node)
                own = node in owned
            else:
                break
        prim = node.prim
        if prim is None:
            saved = ans = None  # not alive while a leaf's gradient is copied
            t = node.variable
            if own and t.grad is None and gnode.dtype is t.data.dtype:
                # _accumulate's common case written out: a leaf's first gradient, a
                # buffer of our own of its dtype, taken as .grad without a copy
                grad = _new(Tensor)
                grad.data = gnode
                grad.grad = None
                grad.requires_grad = False
                grad.grad_fn = None
                grad._acc = None
                t.grad = grad
            else:
                _accumulate(t, gnode, own, False)
            node = None
            continue
        if node.retained is not None:
            kept = node.retained()
            if kept is not None:
                saved = ans = None
                _accumulate(kept, gnode, False, False)
        form, local_rule, nary, vjps, broadcasts, nsaved, saves, direct, walk = prim.plan
        if saves:
            saved = node.saved
            if saved is freed:
                raise RuntimeError(FREED_MESSAGE)
            ans = node.ans
            if release:
                node.saved = freed
                node.ans = None
        else:
            saved = ()
            ans = None
        if form:
            # g * factor or g / divisor (see run)
            to = node.next[0]
            if direct is not None:  # a saved value (Primitive.direct): no call
                local = ans if direct == of_ans else saved[direct]
            elif nsaved:
                local = local_rule(xp, ans, node.ctx, saved[0])
            else:
                local = local_rule(xp, ans, node.ctx)
            if (
                own
                and gbig is not False
                and (gbig or (gbig := gnode.size >= big))
                and fits_into(local, gnode)
            ):
                if form == factor:
                    NUMPY.multiply_into(gnode, local)
                else:
                    NUMPY.divide_into(gnode, local)
            else:
                gnode = gnode * local if form == factor else gnode / local
                own = type(gnode) is ndarray
            local = None  # saved and ans: replaced by the next node's, or released first
            if to.uses == 1:
                node = to
                continue
            saved = ans = None  # not alive while _collect adds
            _collect(to, gnode, own, grads, owned, queue)
            node = gnode = None
            continue
        edges = node.next
        ctx = node.ctx
        shapes = ctx if broadcasts else None
        if walk == walk_sum and shapes is None:
            # add, nothing broadcast: g itself goes on, to one input (x + 0.5) or to both
            # (a * b + b). The same steps as the loop below.
            to, other = edges
            own = False  # g is now shared by this node's inputs (the loop's `fresh`)
            if to is None or other is None:
                if to is None:
                    to = other
                if to.uses == 1:
                    node = to
                    continue
                node = None
                if to in owned:
                    grads[to] += gnode
                else:
                    _collect(to, gnode, False, grads, owned, queue)
                gnode = None
                continue
            node = None
            if to.uses == 1:
                node = to
            elif to in owned:
                grads[to] += gnode
            else:
                _collect(to, gnode, False, grads, owned, queue)
            if other.uses == 1:
                if node is not None:
                    ready.append((node, gnode, False))
                node = other
            elif other in owned:
                grads[other] += gnode
            else:
                _collect(other, gnode, False, grads, owned, queue)
            if node is None:
                gnode = None
            continue
        elif walk == walk_product:
            # mul: g times the other input for each input, the loop below unrolled
            node = nxt = None
            to, other = edges
            if to is not None:
                # a product is a new array (its base None), a NumPy scalar or another
                # backend's array; a gradient summed back down may be a view
                pg = gnode * saved[direct[0]]
                fresh = type(pg) is ndarray
                if shapes is not None and pg.shape != shapes[0]:
                    pg = xp.sum_to(pg, shapes[0])
                    fresh = type(pg) is ndarray and pg.base is None
                if to.uses == 1:
                    nxt, gnxt, own = to, pg, fresh
                elif to in owned:
                    grads[to] += pg
                else:
                    _collect(to, pg, fresh, grads, owned, queue)
            if other is not None:
                pg = gnode * saved[direct[1]]
                fresh = type(pg) is ndarray
                if shapes is not None and pg.shape != shapes[1]:
                    pg = xp.sum_to(pg, shapes[1])
                    fresh = type(pg) is ndarray and pg.base is None
                if other.uses == 1:
                    if nxt is not None:
                        ready.append((nxt, gnxt, own))
                    nxt, gnxt, own = other, pg, fresh
                elif other in owned:
                    grads[other] += pg
                else:
                    _collect(other, pg, fresh, grads, owned, queue)
            pg = saved = None
            if nxt is not None:
                node, gnode = nxt, gnxt
                gnxt = None
                if shapes is not None or not broadcasts:
                    gbig = None  # a gradient of another size
            else:
                gnode = None
            continue
        node = nxt = None
        i = -1
        for to in edges:
            i += 1
            if to is None:
                continue
            if nary:
                pg = vjps[0](xp, gnode, ans, ctx, i)
            else:
                rule = vjps[i]
                if rule is identity:
                    pg = gnode
                elif rule is None:
                    continue
                elif direct is not None:  # g times a saved input (Primitive.direct)
                    pg = gnode * saved[direct[i]]
                elif nsaved == 2:
                    pg = rule(xp, gnode, ans, ctx, saved[0], saved[1])
                elif nsaved == 0:
                    pg = rule(xp, gnode, ans, ctx)
                else:
                    pg = rule(xp, gnode, ans, ctx, *saved)
                if pg is None:
                    continue
            if shapes is not None and pg.shape != shapes[i]:
                pg = xp.sum_to(pg, shapes[i])
            fresh = pg is not gnode and type(pg) is ndarray and pg.base is None
            if to.uses == 1:
                if nxt is not None:
                    ready.append((nxt, gnxt, own))
                nxt, gnxt, own = to, pg, fresh
            elif to in owned:
                grads[to] += pg  # a later term into a buffer of ours (_collect's case)
            else:
                _collect(to, pg, fresh, grads, owned, queue)
        pg = saved = ans = None
        gbig = None  # a rule's gradient, of any size
        if nxt is not None:
            node, gnode = nxt, gnxt
            gnxt = None
        else:
            gnode = None


def fits_into(local: Any, g: Any) -> bool:
    """Whether a factor or divisor ``local`` can be applied by writing into the gradient
    ``g`` (a large buffer of backward's own): a float, or an array of ``g``'s shape and
    dtype (or a boolean mask). Asked only of large buffers: the walks test ``own`` and the
    size first, so small arrays pay for no call."""
    return type(local) is float or (
        type(local) is _ndarray
        and local.shape == g.shape
        and (local.dtype == g.dtype or local.dtype.kind == "b")
    )


def _collect(
    to: Any, pg: Any, fresh: bool, grads: dict[Any, Any], owned: set[Any], queue: list[Any]
) -> None:
    """Add ``pg`` to the gradient waiting for ``to``, a node of several uses."""
    prev = grads.get(to)
    if prev is None:
        grads[to] = pg
        heapq.heappush(queue, (-to.seq, to))
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
        if type(total) is _ndarray:
            owned.add(to)


def _leading_to(root: Any, targets: dict[Any, Any]) -> set[Any]:
    """The nodes below ``root`` from which a node of ``targets`` can be reached (targets
    included): an iterative depth-first walk, children before their parent."""
    needed: set[Any] = set()
    seen: set[Any] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        edges = () if node.prim is None else node.next
        if done:
            if node in targets or any(to in needed for to in edges):
                needed.add(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((to, False) for to in edges if to is not None and to not in seen)
    return needed


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
            t.grad = const(_own(g.data if isinstance(g, Tensor) else g))
        return
    if t.grad is None:
        if type(g) is not _ndarray and not isinstance(g, np.generic):
            g = backend_of(g).astype(g, t.data.dtype)  # a lazy array: nothing to copy
        elif not owned or (g.dtype is not t.data.dtype and g.dtype != t.data.dtype):
            g = np.array(g, dtype=t.data.dtype, copy=True)  # a float32 leaf: float32 .grad
        grad = _new(Tensor)  # const(g) written out: every leaf's first .grad
        grad.data = g
        grad.grad = None
        grad.requires_grad = False
        grad.grad_fn = None
        grad._acc = None
        t.grad = grad
    else:
        t.grad.data += g
