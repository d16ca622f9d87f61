"""The computation graph of a program (``gradcli graph``): its nodes and their gradients.

Every node with its operation, value and the gradient of the (summed) output with respect to
it, as JSON or as Graphviz DOT text (docs/api.md, "gradcli.analysis"; the ``graph`` command
in docs/commands.md, its JSON in docs/json.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import autograd as E
from ..api import prepare
from ..io import json_array
from ..language import DEFAULT_MAX_PROGRAM_CHARS


@dataclass
class Node:
    id: int
    op: str
    label: str | None
    value: np.ndarray
    grad: np.ndarray | None
    inputs: list[int]


@dataclass
class Graph:
    expr: str
    output: int
    nodes: list[Node]
    #: floating-point warnings counted while computing (the CLI prints them on stderr)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "output": self.output,
            "nodes": [
                {
                    "id": n.id,
                    "op": n.op,
                    "label": n.label,
                    "shape": list(n.value.shape),
                    "value": json_array(n.value),
                    "grad": json_array(n.grad),
                    "inputs": n.inputs,
                }
                for n in self.nodes
            ],
        }

    def to_dot(self) -> str:
        """Graphviz DOT text: one box per node, edges from inputs to the node they make."""
        lines = ["digraph gradcli {", "  rankdir=BT;", '  node [shape=box, fontname="monospace"];']
        for n in self.nodes:
            title = n.op if n.label is None else f"{n.label} = {n.op}" if n.inputs else n.label
            text = f"{title}\\nshape {tuple(n.value.shape)}"
            text += f"\\nvalue {_short(n.value)}"
            if n.grad is not None:
                text += f"\\ngrad {_short(n.grad)}"
            style = ', style="bold"' if n.id == self.output else ""
            lines.append(f'  n{n.id} [label="{_dot_escape(text)}"{style}];')
        for n in self.nodes:
            for i in n.inputs:
                lines.append(f"  n{i} -> n{n.id};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _graph_order(
    root: E.Tensor, made: dict[int, tuple[str, tuple[E.Tensor, ...]]]
) -> list[E.Tensor]:
    """Every tensor ``root`` was made from (constants too), inputs before their results:
    an iterative depth-first walk over the traced ops (a graph may be 100,000 deep)."""
    order: list[E.Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[E.Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
        elif id(t) not in visited:
            visited.add(id(t))
            stack.append((t, True))
            inputs = made.get(id(t), (None, ()))[1]
            stack.extend((p, False) for p in reversed(inputs) if id(p) not in visited)
    return order


def _short(a: np.ndarray) -> str:
    """An array of the graph on one line; a 0-d value as ``eval`` writes it (``18.0``)."""
    arr = np.asarray(a)
    text = np.array2string(arr, precision=4, threshold=6, edgeitems=2).replace("\n", " ")
    if arr.ndim == 0 and arr.dtype.kind == "f":  # NumPy writes 18. and 1.e+20
        text = re.sub(r"(?<=\d)\.(?=$|e)", ".0", text)
    return text


def _dot_escape(text: str) -> str:
    # keep the \n line breaks DOT understands; escape quotes and stray backslashes
    return (
        text.replace("\\n", "\x00").replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\n")
    )


def graph(
    expr: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    wrt: Iterable[str] | None = None,
    dtype: Any = "float64",
    seed: int = 0,
    max_elements: int = E.DEFAULT_MAX_ELEMENTS,
    max_program_chars: int = DEFAULT_MAX_PROGRAM_CHARS,
    backend: str = "numpy",
    chunks: Any = None,
    scheduler: str | None = None,
) -> Graph:
    """The computation graph of ``expr``: every node with its operation, value and the
    gradient of the (summed) output with respect to it. ``backend="dask"``: the passes on
    Dask arrays in chunks of ``chunks`` bytes, every node computed together on Dask's
    threads or the ``scheduler`` (docs/dask.md)."""
    if backend != "numpy" or chunks is not None or scheduler is not None:
        from . import on_dask

        at = on_dask.where(backend, chunks, scheduler)
        if at is not None:
            return on_dask.graph(
                expr, inputs, at, wrt=wrt, dtype=dtype, seed=seed, max_elements=max_elements,
                max_program_chars=max_program_chars,
            )  # fmt: skip
    setup = prepare(
        expr,
        inputs,
        wrt=wrt,
        dtype=dtype,
        max_elements=max_elements,
        max_program_chars=max_program_chars,
    )
    with E.computation(max_elements) as fp, E.tracing() as traced:
        leaves = setup.leaves()
        ev = setup.program.run(leaves, dtype=setup.dtype, seed=seed)
        for name, t in ev.bindings.items():
            t.label = name
        out = ev.output
        made = {id(t): (op, inputs) for t, op, inputs in traced}
        order = _graph_order(out, made)
        for t in order:
            if t.requires_grad:
                t.retain_grad()
        root = E.sum(out) if out.ndim else out
        if root.requires_grad:
            root.backward()
    ids = {id(t): k for k, t in enumerate(order)}
    nodes = []
    for t in order:
        op, parents = made.get(id(t), (None, ()))
        nodes.append(
            Node(
                id=ids[id(t)],
                op=op or ("input" if t.label in setup.values else "constant"),
                label=t.label,
                value=t.data,
                grad=None if t.grad is None else t.grad.data,
                inputs=[ids[id(p)] for p in parents],
            )
        )
    return Graph(expr, ids[id(out)], nodes, fp.messages())
