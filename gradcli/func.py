"""``gradcli.func``: ``torch.func``'s ``jvp``, ``jacfwd`` and ``jacrev`` under their names and
calling conventions, for scripts run with ``import gradcli as torch`` (docs/api.md,
"PyTorch's namespaces", "Forward mode and Hessian-vector products").

Forward mode is the double-VJP of :mod:`gradcli.autograd.functional`: one backward pass
recorded with a dummy upstream gradient, then a backward pass of it per tangent.
``jacfwd`` makes one such pass per input element and ``jacrev`` one backward pass per output
element, each the first pass recorded and the others replayed (docs/engine.md, "Replay").
Outputs are tensors or tuples of tensors (torch's pytrees beyond that are not taken).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .autograd.functional import directional, forward_columns, rows
from .autograd.state import enable_grad
from .autograd.tensor import Tensor, const

#: the names torch.func has and gradcli offers
NAMES = ("jacfwd", "jacrev", "jvp")


def _tuple_of_tensors(x: Any, what: str, fn: str) -> tuple[Tensor, ...]:
    if not isinstance(x, tuple):
        raise RuntimeError(f"{fn}(f, primals, tangents): Expected {what} to be a tuple.")
    if not all(isinstance(t, Tensor) for t in x):
        raise RuntimeError(f"{fn}(f, primals, tangents): Expected {what} to only contain Tensors.")
    return x


def _outputs(out: Any, fn: str) -> tuple[tuple[Tensor, ...], bool]:
    """The function's outputs as a tuple, and whether it returned a tuple."""
    if isinstance(out, Tensor):
        return (out,), False
    if isinstance(out, (tuple, list)) and all(isinstance(t, Tensor) for t in out):
        return tuple(out), True
    raise RuntimeError(
        f"{fn}(f, ...): expected f(*primals) to return a Tensor or a tuple of Tensors, "
        f"got {type(out).__name__}"
    )


def _call(func: Callable[..., Any], args: Sequence[Any], has_aux: bool, fn: str) -> Any:
    out = func(*args)
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(
            f"{fn}(f, ...): output of function f should be a tuple: (output, aux) if has_aux "
            "is True"
        )
    return out


def _aux(aux: Any) -> Any:
    """What torch.func gives back as ``aux``: its tensors cut from the graph."""
    if isinstance(aux, Tensor):
        return aux.detach()
    if isinstance(aux, (tuple, list)):
        return type(aux)(_aux(a) for a in aux)
    if isinstance(aux, dict):
        return {k: _aux(a) for k, a in aux.items()}
    return aux


def jvp(
    func: Callable[..., Any],
    primals: tuple[Tensor, ...],
    tangents: tuple[Tensor, ...],
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> tuple[Any, ...]:
    """``(func(*primals), J · tangents)`` as ``torch.func.jvp``: ``primals`` and ``tangents``
    are tuples of tensors of the same shapes; with ``has_aux``, ``func`` returns
    ``(output, aux)`` and the result is ``(output, jvp_out, aux)``."""
    ps = _tuple_of_tensors(primals, "primals", "jvp")
    ts = _tuple_of_tensors(tangents, "tangents", "jvp")
    if len(ps) != len(ts):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python "
            f"structure. For example, if primals is a tuple of 3 tensors, tangents also must "
            f"be. Got primals with structure {len(ps)} tensors and tangents with structure "
            f"{len(ts)} tensors"
        )
    for p, t in zip(ps, ts, strict=True):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "jvp(f, primals, tangents): Expected primals and tangents to have the same "
                f"shape. Got primal of shape {list(p.shape)} and tangent of shape "
                f"{list(t.shape)}"
            )
    with enable_grad():
        leaves = [const(p.data, requires_grad=True) for p in ps]
        out, aux = _call(func, leaves, has_aux, "jvp")
        outs, as_tuple = _outputs(out, "jvp")
        parts = directional(outs, leaves, [t.data for t in ts])
    values = tuple(o.detach() for o in outs)
    derivs = tuple(const(p) for p in parts)
    result: tuple[Any, ...] = (
        values if as_tuple else values[0],
        derivs if as_tuple else derivs[0],
    )
    return (*result, _aux(aux)) if has_aux else result


def _argnums(argnums: int | tuple[int, ...], n: int, fn: str) -> tuple[list[int], bool]:
    if isinstance(argnums, int):
        nums, as_tuple = [argnums], False
    elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
        nums, as_tuple = list(argnums), True
    else:
        raise RuntimeError(
            f"{fn}: argnums must be int or Tuple[int, ...] of at least one element, got {argnums!r}"
        )
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(
                f"Got argnums={a} but only {n} positional inputs. argnums must be in the range "
                f"[-{n}, {n})"
            )
    return [a % n for a in nums], as_tuple


def _jacobians(
    func: Callable[..., Any],
    args: Sequence[Any],
    argnums: int | tuple[int, ...],
    has_aux: bool,
    fn: str,
) -> Any:
    """The Jacobians of ``func``'s outputs with respect to the ``argnums`` arguments,
    ``output.shape + input.shape`` each, in forward (``jacfwd``) or reverse mode."""
    nums, nums_tuple = _argnums(argnums, len(args), fn)
    for a in nums:
        if not isinstance(args[a], Tensor):
            raise RuntimeError(f"{fn}: argument {a} to differentiate is not a Tensor")
    with enable_grad():
        leaves = {a: const(args[a].data, requires_grad=True) for a in nums}
        call_args = [leaves.get(i, x) for i, x in enumerate(args)]
        out, aux = _call(func, call_args, has_aux, fn)
        outs, outs_tuple = _outputs(out, fn)
        ins = [leaves[a] for a in nums]
        flat = [np.zeros((o.numel(), x.numel()), dtype=o.dtype) for o in outs for x in ins]

        def block(k: int, i: int) -> np.ndarray:
            return flat[k * len(ins) + i]

        if fn == "jacfwd":
            for i, c, columns in forward_columns(outs, ins):
                for k, g in enumerate(columns):
                    if g is not None:
                        block(k, i)[:, c] = g.ravel()
        else:
            for k, o in enumerate(outs):
                if not o.requires_grad:
                    continue
                for r, grads in enumerate(rows(o, ins)):
                    for i, g in enumerate(grads):
                        if g is not None:
                            block(k, i)[r] = g.ravel()
    result = []
    for k, o in enumerate(outs):
        per_input = tuple(
            const(block(k, i).reshape(tuple(o.shape) + tuple(x.shape))) for i, x in enumerate(ins)
        )
        result.append(per_input if nums_tuple else per_input[0])
    jac = tuple(result) if outs_tuple else result[0]
    return (jac, _aux(aux)) if has_aux else jac


def jacfwd(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """The function that gives ``func``'s Jacobian with respect to the ``argnums``
    arguments by forward mode, as ``torch.func.jacfwd``: one pass per input element."""

    def jac(*args: Any) -> Any:
        return _jacobians(func, args, argnums, has_aux, "jacfwd")

    return jac


def jacrev(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """The function that gives ``func``'s Jacobian with respect to the ``argnums``
    arguments by reverse mode, as ``torch.func.jacrev``: one pass per output element."""

    def jac(*args: Any) -> Any:
        return _jacobians(func, args, argnums, has_aux, "jacrev")

    return jac


__all__ = list(NAMES)
