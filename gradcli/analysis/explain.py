"""A gradient step by step (``gradcli explain``): the forward pass as a numbered list of
nodes, then the backward pass in the order the engine runs it (docs/explain.md).

The forward steps are the traced ops of ``gradcli graph`` (:mod:`.compgraph`). The backward
steps are not derived here: the engine's own walk reports every node it visits and every
gradient it sends on to an observer (``backward.OBSERVER``, docs/explain.md, "How the steps
are observed"), and this module only writes down what it was told. The evaluation is
``gradcli.evaluate``'s (the same program run, seed, implicit ``sum``, ``grad_output`` and
clipping), so the final gradients are its numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import api
from .. import autograd as E
from ..autograd import backward as engine_backward
from ..i18n import msg
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS, FUNCTIONS
from .compgraph import _graph_order

#: operators the program writes between its operands (the forward step's ``text``)
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**"}


@dataclass
class Explanation:
    """The steps of one evaluation: ``forward`` and ``backward`` are lists of step objects
    (dicts whose arrays are NumPy arrays until :meth:`to_json`), ``gradients`` the final
    gradient of every input (None outside ``wrt``), as ``evaluate`` gives them."""

    expr: str
    output: int | None
    forward: list[dict[str, Any]]
    backward: list[dict[str, Any]]
    gradients: dict[str, np.ndarray | None]
    value: np.ndarray
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``explain --json`` document (docs/explain.md, docs/explain.schema.json)."""
        return {
            "expr": self.expr,
            "output": self.output,
            "value": {"shape": list(self.value.shape), "value": json_array(self.value)},
            "forward": [_plain(s) for s in self.forward],
            "backward": [_plain(s) for s in self.backward],
            "gradients": {n: json_array(g) for n, g in self.gradients.items()},
        }


def _plain(value: Any) -> Any:
    """A step with its arrays as JSON values (json_array: nested lists, "nan", "inf")."""
    if isinstance(value, np.ndarray):
        return json_array(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class _Watch:
    """The observer of one backward pass (see ``backward.OBSERVER``): every event, with a
    copy of its gradient, since the engine adds later terms into its buffers in place."""

    def __init__(self, root: E.Tensor) -> None:
        self.root = root
        self.events: list[tuple[Any, ...]] = []
        self.node: Any = None

    def watches(self, out: Any) -> bool:
        return out is self.root

    def visit(self, node: Any, g: Any) -> None:
        self.node = node
        self.events.append(("visit", node, np.array(g, copy=True)))

    def send(self, i: int, to: Any, g: Any) -> None:
        """The node last visited sends ``g`` to its input ``i`` (``to``: where it goes)."""
        self.events.append(("send", self.node, i, to, np.array(g, copy=True)))

    def unbroadcast(self, i: int, g: Any) -> None:
        """The node last visited made ``g`` for input ``i``, which is summed down next."""
        self.events.append(("unbroadcast", self.node, i, np.array(g, copy=True)))


@contextmanager
def _observing(watch: _Watch) -> Iterator[None]:
    token = engine_backward.OBSERVER.set(watch)
    try:
        yield
    finally:
        engine_backward.OBSERVER.reset(token)


def explain(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    grad_output: Any = None,
    clip_norm: float | None = None,
    norm_type: Any = 2.0,
    clip_value: float | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
) -> Explanation:
    """The forward and backward steps of ``evaluate(expr, inputs, ...)``, with its numbers."""
    seed = api.check_seed(seed)
    clip_norm, clip_value, p = api.check_clipping(clip_norm, clip_value, norm_type)
    setup = api.prepare(
        expr, inputs, wrt=wrt, dtype=dtype, max_elements=max_elements,
        max_program_chars=max_program_chars,
    )  # fmt: skip
    with E.computation(max_elements) as fp:
        # api._fresh's steps, traced (as compgraph.graph) and observed
        with E.tracing() as traced:
            leaves = setup.leaves()
            ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
            for name, t in ev.bindings.items():
                t.label = name
            out = ev.output
            g = None if grad_output is None else api._grad_output(grad_output, setup, max_elements)
            root, reduction = api._root(out, g)
        watch = _Watch(root)
        if root.requires_grad:
            with _observing(watch):
                root.backward(g)
        grads: dict[str, np.ndarray | None] = {}
        for name, leaf in leaves.items():
            if name not in setup.wanted:
                grads[name] = None
            else:
                grads[name] = leaf.grad.data if leaf.grad is not None else np.zeros_like(leaf.data)
        intermediates = {
            n: (t.data, (t.grad.data if t.grad is not None else np.zeros_like(t.data)).copy())
            if t.requires_grad
            else (t.data, None)
            for n, t in ev.bindings.items()
        }
        run = api._Run(out.data, grads, intermediates, reduction, ev.literal_overflow)
        before = {n: gr.copy() for n, gr in grads.items() if gr is not None}
        clip = api._clip(run, clip_norm, clip_value, p)
    result = api._finish(expr, setup, run, clip, fp, None)

    made = {id(t): (op, ins) for t, op, ins in traced}
    order = _graph_order(root, made)
    ids = {id(t): k for k, t in enumerate(order)}
    forward = [_forward_step(k, t, made, ids, setup.values, t is root and reduction == "sum")
               for k, t in enumerate(order)]  # fmt: skip
    nodes = _engine_ids(order, made, ids)
    backward: list[dict[str, Any]] = []
    constants = [n for n in setup.values if n not in setup.wanted]
    if constants:
        backward.append({"kind": "wrt", "wrt": list(setup.wanted), "constants": constants})
    if reduction == "sum":
        backward.append({"kind": "reduction", "node": ids[id(root)], "output": ids[id(out)],
                         "shape": list(out.shape)})  # fmt: skip
    if root.requires_grad:
        seed_grad = g if g is not None else np.ones_like(root.data)
        source = "grad_output" if g is not None else "ones"
        backward.append({"kind": "seed", "node": ids[id(root)], "source": source,
                         "grad": seed_grad})  # fmt: skip
        backward.extend(_backward_steps(watch.events, nodes, forward))
    if clip is not None:
        backward.append(_clip_step(clip, before, grads))
    for k, s in enumerate(backward, 1):
        s["step"] = k
    backward = [{"step": s.pop("step"), **s} for s in backward]
    return Explanation(
        expr=expr,
        output=ids[id(out)],
        forward=forward,
        backward=backward,
        gradients=result.grads,
        value=result.value,
        warnings=result.warnings,
        notes=result.notes,
    )


def _forward_step(
    k: int,
    t: E.Tensor,
    made: dict[int, tuple[str, tuple[E.Tensor, ...]]],
    ids: dict[int, int],
    values: Mapping[str, Any],
    implicit: bool,
) -> dict[str, Any]:
    op, parents = made.get(id(t), (None, ()))
    inputs = [ids[id(p)] for p in parents]
    if op is None:
        op = "input" if t.label in values else "constant"
        text = t.label if op == "input" else msg("a constant")
        summary: str = msg("an input") if op == "input" else msg("a number or constant")
    else:
        names = [f"#{i}" for i in inputs]
        if op in _INFIX and len(names) == 2:
            text = f"{names[0]} {_INFIX[op]} {names[1]}"
        elif op == "neg" and len(names) == 1:
            text = f"-{names[0]}"
        else:
            text = f"{op}({', '.join(names)})"
        spec = FUNCTIONS.get(op)
        summary = spec.summary if spec is not None else _PRIMITIVE_WORDS.get(op, op)
    if implicit:
        summary = msg("sum of elements: the implicit sum() of a non-scalar output")
    return {
        "id": k,
        "op": op,
        "label": t.label,
        "text": text,
        "summary": summary,
        "inputs": inputs,
        "shape": list(t.data.shape),
        "value": t.data,
        "requires_grad": bool(t.requires_grad),
        "implicit": implicit,
    }


#: what the primitives without a function of their own name compute
_PRIMITIVE_WORDS: dict[str, str] = {
    "add": msg("elementwise sum"), "sub": msg("elementwise difference"),
    "mul": msg("elementwise product"), "div": msg("elementwise quotient"),
    "neg": msg("negation"), "getitem": msg("elements picked by an index"),
    "stack": msg("tensors joined along a new axis"),
}  # fmt: skip


def _engine_ids(
    order: list[E.Tensor], made: dict[int, tuple[str, tuple[E.Tensor, ...]]], ids: dict[int, int]
) -> dict[Any, tuple[int, bool]]:
    """Each engine node → (the forward step it is, or is part of; whether it is the
    step's own node). An operation of several primitives (``var``, a vector @ a matrix)
    has nodes of its own between its output's node and its operands'."""
    nodes: dict[Any, tuple[int, bool]] = {}
    for t in order:
        fn: Any = t.grad_fn
        if fn is None and t._acc is not None:
            fn = t._acc()
        if fn is not None:
            nodes[fn] = (ids[id(t)], True)
    for t in order:  # inputs before results: inner nodes go to the op that made them
        if t.grad_fn is None:
            continue
        k = ids[id(t)]
        stack = [to for to in t.grad_fn.next if to is not None]
        while stack:
            n = stack.pop()
            if n in nodes:
                continue
            nodes[n] = (k, False)
            if n.prim is not None:
                stack.extend(to for to in n.next if to is not None)
    return nodes


def _backward_steps(
    events: list[tuple[Any, ...]], nodes: dict[Any, tuple[int, bool]], forward: list[Any]
) -> list[dict[str, Any]]:
    """The engine's events as steps: per node visited, the terms that met there (when
    several did), the binding or leaf that keeps the gradient, the rule and what it sent
    to each input, and the broadcasting it undid."""
    steps: list[dict[str, Any]] = []
    terms: dict[Any, list[dict[str, Any]]] = {}
    current: dict[Any, dict[str, Any]] = {}  # node -> its step, while sends arrive
    pending: dict[tuple[Any, int], dict[str, Any]] = {}  # an unbroadcast step awaiting its sum

    def where(n: Any) -> int | None:
        return nodes[n][0] if n in nodes else None

    for event in events:
        kind, node = event[0], event[1]
        if kind == "visit":
            g = event[2]
            arrived = terms.pop(node, [])
            if len(arrived) > 1:
                steps.append({"kind": "accumulate", "node": where(node), "terms": arrived,
                              "grad": g})  # fmt: skip
            if node.prim is None:
                var = node.variable
                steps.append({"kind": "leaf", "node": where(node), "label": var.label, "grad": g})
                continue
            kept = node.retained() if node.retained is not None else None
            if kept is not None:
                steps.append({"kind": "keep", "node": where(node), "label": kept.label, "grad": g})
            k, own = nodes.get(node, (None, False))
            parents = forward[k]["inputs"] if own and k is not None else []
            sends = []
            for i, to in enumerate(node.next):
                to_id = where(to) if to is not None else None
                if to is None and len(parents) == len(node.next):
                    to_id = parents[i]
                sends.append({"input": i, "to": to_id, "grad": None})
            prim = node.prim
            spec = FUNCTIONS.get(prim.name)
            step = {
                "kind": "node",
                "node": k,
                "primitive": prim.name,
                "inner": not own,
                "grad": g,
                "rule": prim.doc,
                "summary": spec.summary if spec is not None else _PRIMITIVE_WORDS.get(prim.name),
                "sends": sends,
            }
            steps.append(step)
            current = {node: step}
        elif kind == "unbroadcast":
            i, g = event[2], event[3]
            step = current[node]
            target = step["sends"][i]["to"]
            u = {"kind": "unbroadcast", "node": step["node"], "input": i, "to": target,
                 "from_shape": list(g.shape), "shape": None, "axes": None, "before": g,
                 "grad": None}  # fmt: skip
            pending[(node, i)] = u
            steps.append(u)
        else:  # send
            i, to, g = event[2], event[3], event[4]
            step = current[node]
            step["sends"][i]["grad"] = g
            summed = pending.pop((node, i), None)
            if summed is not None:
                summed["grad"] = g
                summed["shape"] = list(g.shape)
                summed["axes"] = _summed_axes(tuple(summed["from_shape"]), g.shape)
            step["sends"][i]["unbroadcast"] = summed is not None
            if to.uses > 1:
                terms.setdefault(to, []).append({"from": step["node"], "input": i, "grad": g})
    for step in steps:
        for s in step.get("sends", ()):
            s.setdefault("unbroadcast", False)
    return steps


def _summed_axes(big: tuple[int, ...], small: tuple[int, ...]) -> list[int]:
    """The axes of ``big`` summed to get ``small`` (broadcasting undone, NumPy's rules):
    the leading axes ``small`` lacks, and those where it has 1 and ``big`` more."""
    lead = len(big) - len(small)
    return [a for a in range(len(big)) if a < lead or (small[a - lead] == 1 and big[a] != 1)]


def _clip_step(
    clip: dict[str, Any], before: dict[str, np.ndarray], after: Mapping[str, Any]
) -> dict[str, Any]:
    step: dict[str, Any] = {"kind": "clip"}
    if "clip_value" in clip:
        step.update(method="value", clip_value=float(clip["clip_value"]))
    else:
        # as arrays: written by json_array, "inf" for the infinity norm (docs/json.md)
        step.update(
            method="norm",
            **{
                k: np.asarray(float(clip[k]))
                for k in ("max_norm", "norm_type", "total_norm", "scale")
            },
        )
    step["grads"] = {n: {"before": b, "after": after[n]} for n, b in before.items()}
    return step


__all__ = ["Explanation", "explain"]
