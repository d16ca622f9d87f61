"""``gradcli.func``: ``torch.func``'s ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``, ``grad``,
``grad_and_value`` and ``hessian`` under their names and calling conventions, for scripts
run with ``import gradcli as torch`` (docs/api.md, "PyTorch's namespaces", "Forward mode
and Hessian-vector products").

Forward mode is the double-VJP of :mod:`gradcli.autograd.functional`: one backward pass
recorded with a dummy upstream gradient, then a backward pass of it per tangent.
``jacfwd`` makes one such pass per input element and ``jacrev`` one backward pass per output
element, each the first pass recorded and the others replayed (docs/engine.md, "Replay").
``vjp``, ``grad`` and ``grad_and_value`` are one backward pass; ``hessian`` differentiates
each gradient element once more (a pass per output element, then one per input element of
each), so it is for the small functions of a tutorial, not for large inputs (``gradcli.hvp``).
Outputs are tensors or tuples of tensors (torch's pytrees beyond that are not taken).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .autograd.backward import grad as _grad
from .autograd.functional import directional, forward_columns, rows
from .autograd.state import enable_grad
from .autograd.tensor import Tensor, const

#: the names torch.func has and gradcli offers
NAMES = ("grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp")


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


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(func(*primals), vjp_fn)`` as ``torch.func.vjp``: ``vjp_fn(cotangents)``, the
    cotangents shaped as the output (a tuple for a tuple of outputs), gives ``vᵀ J`` as a
    tuple with one tensor per primal; it may be called again. With ``has_aux``, ``func``
    returns ``(output, aux)`` and the result is ``(output, vjp_fn, aux)``."""
    for p in primals:
        if not isinstance(p, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(p)}")
    with enable_grad():
        leaves = [const(p.data, requires_grad=True) for p in primals]
        out, aux = _call(func, leaves, has_aux, "vjp")
        outs, as_tuple = _outputs(out, "vjp")

    def vjp_fn(cotangents: Any) -> tuple[Tensor, ...]:
        cts = cotangents if as_tuple else (cotangents,)
        if (
            not isinstance(cts, (tuple, list))
            or len(cts) != len(outs)
            or not all(isinstance(c, Tensor) for c in cts)
        ):
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure "
                "of outputs to the function."
            )
        parts = [np.zeros(x.shape, dtype=x.dtype) for x in leaves]
        for o, c in zip(outs, cts, strict=True):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output has a shape of {list(c.shape)} and "
                    f"output has a shape of {list(o.shape)}."
                )
            if not o.requires_grad:
                continue
            with enable_grad():
                found = _grad(o, leaves, grad_outputs=c.data, retain_graph=True, allow_unused=True)
            for i, f in enumerate(found):
                if f is not None:
                    parts[i] = parts[i] + f.data
        return tuple(const(p) for p in parts)

    values = tuple(o.detach() for o in outs)
    result: tuple[Any, ...] = (values if as_tuple else values[0], vjp_fn)
    return (*result, _aux(aux)) if has_aux else result


def _scalar_grads(
    func: Callable[..., Any], args: Sequence[Any], argnums: int | tuple[int, ...],
    has_aux: bool, fn: str,
) -> tuple[Any, Tensor, Any]:  # fmt: skip
    """The gradient of ``func``'s scalar output w.r.t. the ``argnums`` arguments (a tensor,
    or a tuple for a tuple of ``argnums``), the output detached, and the aux."""
    nums, nums_tuple = _argnums(argnums, len(args), fn)
    for a in nums:
        if not isinstance(args[a], Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(args[a])}")
    with enable_grad():
        leaves = {a: const(args[a].data, requires_grad=True) for a in nums}
        out, aux = _call(func, [leaves.get(i, x) for i, x in enumerate(args)], has_aux, fn)
        if not isinstance(out, Tensor) or out.ndim != 0:
            dims = f"tensor with {out.ndim} dims" if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(
                f"{fn}(f)(*args): Expected f(*args) to return a scalar Tensor, got {dims}. "
                "Maybe you wanted to use the vjp or jacrev APIs instead?"
            )
        ins = [leaves[a] for a in nums]
        found = _grad(out, ins, allow_unused=True) if out.requires_grad else (None,) * len(ins)
    grads = tuple(
        const(np.zeros(x.shape, dtype=x.dtype) if f is None else f.data)
        for x, f in zip(ins, found, strict=True)
    )
    return (grads if nums_tuple else grads[0]), out.detach(), _aux(aux)


def grad(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The function that gives the gradient of ``func``'s scalar output with respect to the
    ``argnums`` arguments, as ``torch.func.grad`` (with ``has_aux``: ``(grad, aux)``)."""

    def g(*args: Any) -> Any:
        grads, _, aux = _scalar_grads(func, args, argnums, has_aux, "grad")
        return (grads, aux) if has_aux else grads

    return g


def grad_and_value(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """As :func:`grad`, with the value: ``(grad, value)``, with ``has_aux``
    ``(grad, (value, aux))``, as ``torch.func.grad_and_value``."""

    def g(*args: Any) -> Any:
        grads, value, aux = _scalar_grads(func, args, argnums, has_aux, "grad_and_value")
        return (grads, (value, aux)) if has_aux else (grads, value)

    return g


def _onehot(shape: tuple[int, ...], i: int, dtype: Any) -> np.ndarray:
    seed = np.zeros(int(np.prod(shape)), dtype=dtype)
    seed[i] = 1.0
    return seed.reshape(shape)


def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The function that gives ``func``'s Hessian with respect to the ``argnums`` arguments,
    ``output.shape + input.shape + input.shape``, as ``torch.func.hessian`` (its
    ``jacfwd(jacrev(func))``): nested tuples ``H[a][b]`` for a tuple of ``argnums``. Each
    gradient element is differentiated again, so this is for small inputs."""

    def h(*args: Any) -> Any:
        nums, nums_tuple = _argnums(argnums, len(args), "hessian")
        for a in nums:
            if not isinstance(args[a], Tensor):
                raise RuntimeError(f"hessian: argument {a} to differentiate is not a Tensor")
        with enable_grad():
            leaves = {a: const(args[a].data, requires_grad=True) for a in nums}
            out, _ = _call(func, [leaves.get(i, x) for i, x in enumerate(args)], False, "hessian")
            if not isinstance(out, Tensor):
                raise RuntimeError("hessian(f, ...): expected f(*args) to return a Tensor")
            ins = [leaves[a] for a in nums]
            n_out, shape_out = out.numel(), tuple(out.shape)
            blocks = [
                [np.zeros((n_out, x.numel(), y.numel()), dtype=out.dtype) for y in ins] for x in ins
            ]
            for r in range(n_out if out.requires_grad else 0):
                seed = _onehot(shape_out, r, out.dtype)
                firsts = _grad(
                    out, ins, grad_outputs=seed, create_graph=True, retain_graph=True,
                    allow_unused=True,
                )  # fmt: skip
                for a, g in enumerate(firsts):
                    if g is None or not g.requires_grad:
                        continue
                    for c in range(g.numel()):
                        seconds = _grad(
                            g, ins, grad_outputs=_onehot(tuple(g.shape), c, g.dtype),
                            retain_graph=True, allow_unused=True,
                        )  # fmt: skip
                        for b, s in enumerate(seconds):
                            if s is not None:
                                blocks[a][b][r, c] = s.data.ravel()
        result = tuple(
            tuple(
                const(blocks[a][b].reshape(shape_out + tuple(x.shape) + tuple(y.shape)))
                for b, y in enumerate(ins)
            )
            for a, x in enumerate(ins)
        )
        if nums_tuple:
            return result
        return result[0][0]

    return h


__all__ = list(NAMES)
