"""Graph nodes, kept apart from tensors (docs/engine.md, "Nodes").

A tensor holds its data, ``grad``, ``requires_grad`` and ``grad_fn``. Its ``grad_fn`` is a
:class:`Node`: the primitive that made it, the values that primitive's rule *saves* (and
nothing else), its static context (axes, shapes), a sequence number that orders the
backward pass, and edges to the nodes of its inputs. A leaf that requires grad is reached
through an :class:`AccumulateGrad`, which writes its ``.grad``.

Nothing here points from a node back to the tensor it made, except a weak reference when
that tensor retains its gradient: an intermediate no rule saved dies as soon as forward no
longer needs it, and a graph has no reference cycles.
"""

from __future__ import annotations

import itertools
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import Primitive
    from .tensor import Tensor

#: every node gets the next number when it is made, ``next(SEQ)``, so a node's inputs always
#: have smaller numbers than the node: backward visits nodes by decreasing number (the
#: builtin next costs less than the counter's bound ``__next__``, a method wrapper)
SEQ = itertools.count()

#: how a primitive of one elementwise input gives its VJP: a general rule, ``g * factor``
#: or ``g / divisor`` (see families.unary)
GENERAL, FACTOR, DIVISOR = 0, 1, 2
#: ``Primitive.direct`` of a factor or divisor that is the output (see families.unary)
ANS = -1
#: the plain backward walk's shortcuts for two-input nodes (Primitive._walk): none, the
#: gradient passed on to both inputs (add), or the gradient times the other input (mul)
WALK_LOOP, WALK_SUM, WALK_PRODUCT = 0, 1, 2


def identity(xp: Any, g: Any, ans: Any, ctx: Any, *saved: Any) -> Any:
    """The VJP that passes the gradient on unchanged (``add``'s, ``reshape``'s): backward
    recognises it and makes no call."""
    return g


#: ``Node.saved`` after backward has used and released it
FREED: tuple[Any, ...] = ("freed",)

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class Node:
    """One recorded primitive call: ``grad_fn`` of the tensor it made."""

    __slots__ = ("ans", "ctx", "next", "prim", "retained", "saved", "seq", "uses")

    prim: Primitive
    #: per input: the Node or AccumulateGrad its gradient goes to, or None (no gradient)
    next: tuple[Node | AccumulateGrad | None, ...]
    #: per input, the value the rule reads (None where it reads none), or () when the rule
    #: reads no input, or FREED after backward
    saved: tuple[Any, ...]
    #: the output's value when the rule reads it, else None
    ans: Any
    #: static context; for a primitive that broadcasts, the input shapes (None when no
    #: input was broadcast): where backward sums a gradient back down
    ctx: Any
    seq: int
    #: how many edges lead here: with exactly one, backward visits this node as soon as
    #: that one consumer has given its gradient (no queue, no waiting)
    uses: int
    #: a weak reference to the output tensor when it retains its gradient
    retained: weakref.ref[Tensor] | None

    def name(self) -> str:
        """torch's name of the backward function: ``MulBackward0``."""
        return "".join(part.capitalize() for part in self.prim.name.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self) -> tuple[tuple[Node | AccumulateGrad | None, int], ...]:
        return tuple((fn, 0) for fn in self.next)


class AccumulateGrad:
    """The node of a leaf that requires grad: adds what reaches it into ``variable.grad``."""

    __slots__ = ("__weakref__", "seq", "uses", "variable")

    prim = None
    variable: Tensor
    seq: int
    uses: int

    # No __init__, as Node has none: made by tensor.accumulator(), which sets every field.

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad>"

    @property
    def next_functions(self) -> tuple[()]:
        return ()
