"""Presentation of the other commands: jacobian, jvp, hessian (and H v), check, graph,
optimize, explain (docs/commands.md). The result table, errors, warnings and the consoles
are in :mod:`gradcli.present`, whose helpers these tables share."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .errors import escape_controls
from .i18n import tr, translate
from .layout import _BARE_POINT, NO_GRAD, ArrayCell, _print_table, _show, format_array
from .present import CONSTANT, _cell, _num, _shape, _text


def print_jacobian(jac: Any, console: Console, *, precision: int = 4, full: bool = False) -> None:
    """One row per input: d output / d input with its shape (output.shape + input.shape)."""
    shape = _shape(jac.value)
    caption = (
        tr("output shape {shape}; forward mode (one pass per input element)", shape=shape)
        if getattr(jac, "mode", "reverse") == "forward"
        else tr("output shape {shape}", shape=shape)
    )
    table = Table(title=_text(jac.expr), caption=Text(caption))
    table.add_column(tr("d output / d"), no_wrap=True)
    table.add_column(tr("shape"), no_wrap=True)
    table.add_column(tr("jacobian"), overflow="fold")
    for name, j in jac.jacobian.items():
        table.add_row(_text(name), Text(_shape(j)), ArrayCell(j, precision=precision, full=full))
    _print_table(console, table)


def _input_table(title: str, caption: str, columns: tuple[str, ...]) -> Table:
    table = Table(
        title=_text(title), caption=Text(caption), caption_justify="left", box=box.HEAVY_HEAD
    )
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def print_jvp(res: Any, console: Console, *, precision: int = 4, full: bool = False) -> None:
    """Every input with its tangent (or held fixed), then the output with its tangent: the
    Jacobian-vector product J t (docs/commands.md, "jvp")."""

    def cell(a: np.ndarray | None, missing: str = NO_GRAD) -> ArrayCell | Text:
        return _cell(a, precision=precision, full=full, missing=missing)

    table = _input_table(
        res.expr.strip(),
        tr(
            "the output's tangent is J t, its directional derivative along the inputs' "
            "tangents (forward mode)"
        ),
        (tr("name"), tr("shape"), tr("value"), tr("tangent")),
    )
    names = list(res.inputs)
    for i, name in enumerate(names):
        value = res.inputs[name]
        table.add_row(
            _text(name), Text(_shape(value)), cell(value),
            cell(res.tangents.get(name), tr("— (held fixed)")), end_section=i == len(names) - 1,
        )  # fmt: skip
    out = (Text(tr("output"), style="bold"), Text(_shape(res.value)), cell(res.value),
           cell(res.jvp))  # fmt: skip
    table.add_row(*out)
    _print_table(console, table)


def print_hvp(res: Any, console: Console, *, precision: int = 4, full: bool = False) -> None:
    """Every input with its part of v and of H v (docs/commands.md, "hessian")."""

    def cell(a: np.ndarray | None, missing: str = NO_GRAD) -> ArrayCell | Text:
        return _cell(a, precision=precision, full=full, missing=missing)

    table = _input_table(
        tr("Hessian-vector product of {expr}", expr=res.expr.strip()),
        tr(
            "value {value}; H v by one double backward, without forming the Hessian; an "
            "input given no vector has a zero part of v",
            value=format_array(res.value, precision=precision),
        ),
        (tr("name"), tr("shape"), tr("value"), tr("vector"), "H v"),
    )
    for name, value in res.inputs.items():
        wanted = name in res.hvp
        vector = res.vector.get(name)
        table.add_row(
            _text(name), Text(_shape(value)), cell(value),
            cell(vector, "0" if wanted else CONSTANT), cell(res.hvp.get(name)),
        )  # fmt: skip
    _print_table(console, table)


def print_hessian(hes: Any, console: Console, *, precision: int = 4) -> None:
    """The Hessian as a matrix with a label per row and column (``x[0]``, ``W[1,2]``)."""
    n = len(hes.labels)
    title = _text(tr("Hessian of {expr}", expr=hes.expr))
    caption = Text(tr("value {value}", value=format_array(hes.value, precision=precision)))
    if n > 40:  # too wide for columns: one labelled row per line, NumPy-formatted
        table = Table(title=title, caption=caption)
        table.add_column(tr("row"), no_wrap=True)
        table.add_column(tr("second derivatives"), overflow="fold")
        for label, row in zip(hes.labels, hes.hessian, strict=True):
            table.add_row(_text(label), ArrayCell(row, precision=precision))
    else:
        table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD)
        table.add_column("", no_wrap=True, style="bold")
        for label in hes.labels:
            table.add_column(_text(label), justify="right", no_wrap=True)
        for label, row in zip(hes.labels, hes.hessian, strict=True):
            table.add_row(_text(label), *(Text(_num(v, precision - 2)) for v in row))
    _print_table(console, table)


def print_check(chk: Any, console: Console) -> None:
    """Worst absolute and relative error per input, and where it occurs."""
    table = Table(
        title=_text(
            tr("gradient check of {expr}", expr=chk.expr)
            if chk.order == 1
            else tr("Hessian check of {expr}", expr=chk.expr)
        ),
        caption=Text(
            tr(
                "central differences in float64, eps {eps:g}; pass when "
                "|analytic - numeric| <= {atol:g} + {rtol:g} |numeric|",
                eps=chk.eps,
                atol=chk.atol,
                rtol=chk.rtol,
            )
        ),
    )
    columns = (tr("input"), tr("result"), tr("abs error"), tr("rel error"), tr("worst at"),
               tr("analytic"), tr("numeric"))  # fmt: skip
    for col in columns:
        table.add_column(col, overflow="fold")
    for name, c in chk.inputs.items():
        where = _text(f"{name}[{','.join(map(str, c.worst_index))}]" if c.worst_index else name)
        table.add_row(
            _text(name),
            Text(tr("ok"), style="green") if c.ok else Text(tr("FAILED"), style="bold red"),
            Text(_num(c.max_abs_error, 1)),
            Text(_num(c.max_rel_error, 1)),
            where,
            Text(_num(c.analytic)),
            Text(_num(c.numeric)),
        )
    _print_table(console, table)


def print_graph(g: Any, console: Console, *, precision: int = 4, max_nodes: int = 400) -> None:
    """The computation graph as a tree from the output down to the inputs. A node used twice
    is drawn once; later uses point to it by number."""
    from rich.tree import Tree

    nodes = g.nodes
    if len(nodes) > max_nodes:
        _show(
            console,
            Text(
                tr(
                    "the graph has {n} nodes: too many to draw as a tree (use --json or --dot)",
                    n=len(nodes),
                )
            ),
        )
        return

    def label(n: Any) -> Text:
        name, op = escape_controls(n.label or ""), escape_controls(n.op)
        if n.inputs:  # an operation, perhaps bound to a name
            head = Text.assemble((f"#{n.id} ", "dim"), (f"{name} = " if name else "", "bold"),
                                 (op, "cyan"))  # fmt: skip
        else:  # an input (named) or a constant
            head = Text.assemble((f"#{n.id} ", "dim"), (name, "bold"),
                                 (f" ({op})" if name else op, "cyan"))  # fmt: skip
        value = _short_array(n.value, precision)
        head.append("  " + tr("{shape}  value {value}", shape=_shape(n.value), value=value))
        if n.grad is not None:
            grad = _short_array(n.grad, precision)
            head.append("  " + tr("grad {grad}", grad=grad), style="green")
        return head

    drawn: set[int] = set()
    by_id = {n.id: n for n in nodes}
    root = Tree(label(by_id[g.output]))
    drawn.add(g.output)
    stack = [(root, by_id[g.output])]
    while stack:  # iterative: deep graphs must not recurse
        branch, node = stack.pop()
        for i in node.inputs:
            child = by_id[i]
            if i in drawn:
                branch.add(
                    _text(
                        tr(
                            "→ #{i} {node} (drawn once, elsewhere)",
                            i=i,
                            node=child.label or child.op,
                        ),
                        style="dim",
                    )
                )
            else:
                drawn.add(i)
                stack.append((branch.add(label(child)), child))
    _show(console, Group(_text(g.expr, style="bold"), root))


def _short_array(a: np.ndarray, precision: int) -> str:
    """An array of the graph on one line, summarised past 8 elements; numbers as ``eval``
    writes them (a 0-d value ``18.0``, not NumPy's ``18.``)."""
    arr = np.asarray(a)
    text = np.array2string(arr, precision=precision, threshold=8, edgeitems=2)
    if arr.ndim == 0 and arr.dtype.kind == "f":
        text = _BARE_POINT.sub(".0", text)
    return " ".join(text.split())


_SPARK = "▁▂▃▄▅▆▇█"


def loss_plot(
    losses: list[float],
    *,
    width: int = 60,
    height: int = 8,
    last_step: int | None = None,
    every: int = 1,
) -> Text:
    """A text plot of the loss curve (log scale when the losses span decades), ``width``
    cells wide with its tick labels: the console's width (docs/cli.md, "optimize"), and
    never less than 8 columns of curve. ``losses`` are those before steps 0, ``every``,
    2 ``every`` ..., then the one after ``last_step`` steps (optimize thins a long
    history, see analysis.LossHistory)."""
    values = np.asarray(losses, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return Text(tr("(no finite loss to plot)"))
    log = bool(finite.min() > 0 and finite.max() / finite.min() > 100)
    ys = np.log10(values) if log else values
    # the axis spans every loss, so the labels (and what is left for the curve) are known
    # before the losses are resampled to the columns
    lo, hi = float(np.min(ys[np.isfinite(ys)])), float(np.max(ys[np.isfinite(ys)]))
    if not hi > lo:  # a constant loss: on the bottom row, labelled with its value
        hi = lo + 1.0
    span = hi - lo
    ticks = [hi - (height - 1 - row) * span / (height - 1) for row in range(height - 1, -1, -1)]
    labels = [f"{10**t if log else t:.4g}" for t in ticks]
    pad = max(len(label) for label in labels)
    columns = max(8, width - pad - 2)
    idx = np.linspace(0, len(ys) - 1, num=min(columns, len(ys))).round().astype(int)
    col = ys[idx]
    level = np.where(np.isfinite(col), np.round((col - lo) / span * (height - 1)), -1)
    lines = []
    for row, label in zip(range(height - 1, -1, -1), labels, strict=True):
        chars = ["•" if lv == row else " " for lv in level]
        lines.append(f"{label:>{pad}} ┤" + "".join(chars))
    lines.append(" " * (pad + 1) + "└" + "─" * len(col))
    last = len(values) - 1 if last_step is None else last_step
    notes = [tr("every {every} steps", every=every)] if every > 1 else []
    notes += [tr("log scale")] if log else []
    footer = [tr("step 0 … {last}", last=last)] + ([f"({', '.join(notes)})"] if notes else [])
    indent = " " * (pad + 2)
    if len(indent) + len("  ".join(footer)) <= width:
        lines.append(indent + "  ".join(footer))
    else:  # a narrow console: one note a line, under the curve while it fits
        lines += [(indent if len(indent) + len(part) <= width else "") + part for part in footer]
    return Text("\n".join(lines))


def print_optimization(
    opt: Any, console: Console, *, precision: int = 4, full: bool = False
) -> None:
    """Final values and gradients, and the loss curve as wide as the console. A run that
    stopped early (``--tol``, Ctrl-C) says how many of its steps it took, and why."""
    ran = tr("{n} steps", n=opt.steps_run)
    if opt.steps_run != opt.steps:
        ran = tr("{n} of {steps} steps", n=opt.steps_run, steps=opt.steps)
    if opt.interrupted:
        ran = tr("interrupted after {ran}", ran=ran)
    elif opt.converged:
        ran = tr("{ran} (loss change < tol {tol:g})", ran=ran, tol=opt.tol)
    caption = [
        tr(
            "{ran}, lr {lr:g}: loss {first} → {last}",
            ran=ran,
            lr=opt.lr,
            first=_num(opt.losses[0], precision),
            last=_num(opt.losses[-1], precision),
        ),
        *(translate(note) for note in opt.notes),  # a thinned loss history
    ]
    title = tr("{optimizer} on {expr}", optimizer=opt.optimizer, expr=opt.expr)
    table = Table(title=_text(title), caption=Text("\n".join(caption)))
    table.add_column(tr("name"), no_wrap=True)
    table.add_column(tr("shape"), no_wrap=True)
    table.add_column(tr("final value"), overflow="fold")
    table.add_column(tr("gradient"), overflow="fold")
    for name, (value, grad) in opt.final.items():
        table.add_row(
            _text(name),
            Text(_shape(value)),
            ArrayCell(value, precision=precision, full=full),
            ArrayCell(grad, precision=precision, full=full) if grad is not None else Text(NO_GRAD),
        )
    _print_table(console, table)
    _show(console, Text(tr("loss"), style="bold"))
    plot = loss_plot(opt.losses, width=console.width, last_step=opt.steps_run, every=opt.loss_every)
    _show(console, plot, soft_wrap=True)


def print_explain(ex: Any, console: Console, *, precision: int = 4, full: bool = False) -> None:
    """``gradcli explain``: the forward steps, then the backward steps in the engine's order,
    then the final gradients (docs/explain.md). Arrays are summarised as in ``eval``."""
    forward = ex.forward
    by_id = {s["id"]: s for s in forward}

    def arr(a: Any) -> str:  # an array inside a sentence: one line, summarised past 1000
        return " ".join(format_array(np.asarray(a), precision=precision, full=full).split())

    def cell(a: Any) -> ArrayCell | Text:
        return Text("") if a is None else ArrayCell(np.asarray(a), precision=precision, full=full)

    def name(k: Any) -> str:
        if k is None:
            return "—"
        s = by_id[k]
        return f"#{k} {s['label']}" if s["label"] else f"#{k} {s['op']}"

    table = Table(title=_text(tr("forward: {expr}", expr=ex.expr.strip())), box=box.HEAVY_HEAD)
    for column in ("#", tr("node"), tr("computes"), tr("shape"), tr("value")):
        table.add_column(column, overflow="fold")
    for s in forward:
        said = translate(s["text"])
        text = (
            said
            if not s["label"] or s["op"] in ("input", "constant")
            else (f"{s['label']} = {said}")
        )
        table.add_row(Text(str(s["id"])), _text(text), _text(translate(s["summary"])),
                      Text(_shape(s["value"])), cell(s["value"]))  # fmt: skip
    _print_table(console, table)

    steps = Table(title=Text(tr("backward, in the order the engine ran it")), box=box.HEAVY_HEAD)
    for column in (tr("step"), tr("node"), tr("what happens"), tr("gradient")):
        steps.add_column(column, overflow="fold")
    for s in ex.backward:
        kind = s["kind"]
        node, words, grad = name(s.get("node")), "", s.get("grad")
        if kind == "wrt":
            node = "—"
            words = tr(
                "not in --wrt, so constants (no gradient flows to them): {names}",
                names=", ".join(s["constants"]),
            )
        elif kind == "reduction":
            words = tr(
                "the output {node} has shape {shape}: backward starts from its sum, as "
                "z.sum().backward()",
                node=name(s["output"]),
                shape=tuple(s["shape"]),
            )
        elif kind == "seed":
            words = (
                tr("start: the gradient given by --grad-output")
                if s["source"] == "grad_output"
                else tr("start: d output / d output = 1")
            )
        elif kind == "accumulate":
            terms = " + ".join(
                tr("{grad} (from {node})", grad=arr(t["grad"]), node=name(t["from"]))
                for t in s["terms"]
            )
            words = tr("gradients meet: {terms} = {grad}", terms=terms, grad=arr(grad))
        elif kind == "node":
            where = " " + tr("(part of {node})", node=name(s["node"])) if s["inner"] else ""
            node = f"{name(s['node'])}{where}" if not s["inner"] else f"{s['primitive']}{where}"
            said = f" — {translate(s['summary'])}" if s["summary"] else ""
            lines = [tr("{primitive}{said}; rule: {rule}", primitive=s["primitive"], said=said,
                        rule=s["rule"])]  # fmt: skip
            for send in s["sends"]:
                to = name(send["to"]) if send["to"] is not None else tr("a constant")
                got = tr("nothing (no gradient)") if send["grad"] is None else arr(send["grad"])
                lines.append(tr("→ {to} (input {i}): {got}", to=to, i=send["input"], got=got))
            words = "\n".join(lines)
        elif kind == "unbroadcast":
            words = tr(
                "broadcasting undone for {node}: {before} of shape {from_shape} summed over "
                "axis {axes} to shape {shape}",
                node=name(s["to"]),
                before=arr(s["before"]),
                from_shape=tuple(s["from_shape"]),
                axes=", ".join(map(str, s["axes"])),
                shape=tuple(s["shape"]),
            )
        elif kind == "leaf":
            words = tr("accumulated into {name}.grad", name=s["label"])
        elif kind == "keep":
            words = tr("the binding {name} keeps its gradient (retain_grad)", name=s["label"])
        elif kind == "clip":
            node, grad = "—", None
            if s["method"] == "norm":
                words = tr(
                    "clip_grad_norm_: total {p}-norm {total}, max_norm {max_norm}: scaled by "
                    "{scale}",
                    p=_num(s["norm_type"], precision),
                    total=_num(s["total_norm"], precision),
                    max_norm=_num(s["max_norm"], precision),
                    scale=_num(s["scale"], precision),
                )
            else:
                v = _num(abs(s["clip_value"]), precision)
                words = tr("clip_grad_value_: clamped to [-{v}, {v}]", v=v)
            for n, ba in s["grads"].items():
                words += f"\n{n}: {arr(ba['before'])} → {arr(ba['after'])}"
        steps.add_row(Text(str(s["step"])), _text(node), _text(words), cell(grad))
    if not ex.backward:
        steps.add_row(Text(""), Text("—"), Text(tr("no input requires grad")), Text(""))
    _print_table(console, steps)
    constant = translate(CONSTANT)
    grads = "; ".join(f"{n}: {constant if g is None else arr(g)}" for n, g in ex.gradients.items())
    _show(console, _text(tr("gradients: {grads}", grads=grads) if grads else tr("no inputs")))
