"""Rows of results, the verdict on each target, the printed table and the JSON file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .targets import ALL_IDS, MEM_BASE, MEM_NET, MEM_RAW, TARGETS, TIME, Target
from .timing import Stats, format_value

METRIC_ORDER = (TIME, MEM_NET, MEM_RAW, MEM_BASE)
SHOWN_METRICS = (TIME, MEM_NET, MEM_RAW)
LIB_ORDER = (
    "gradcli", "gradcli-reverse", "jobs1", "halves", "numpy", "imports", "tables", "floor",
    "typer", "torch", "torch-reverse", "autograd", "bound",
)  # fmt: skip
METRIC_LABEL = {TIME: "time", MEM_NET: "peak RSS net", MEM_RAW: "peak RSS raw"}


@dataclass
class Row:
    wid: str
    metric: str
    lib: str  # gradcli, numpy, torch, autograd, imports, tables, floor, typer, jobs1, halves, ...
    label: str  # what is shown in the library column
    stats: Stats | None  # None: skipped
    note: str = ""  # why skipped, or a remark
    short: str = ""  # a short name for the summary lines (default: label)


@dataclass
class Verdict:
    target: Target
    ref_label: str
    ratio: float | None  # gradcli ÷ reference; None when either side is missing
    status: str  # PASS, MISS or SKIP
    note: str = ""

    @property
    def text(self) -> str:
        return f"≤ {self.target.limit:g}× {self.ref_label}"

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.target.wid,
            "metric": self.target.metric,
            "reference": self.target.ref,
            "reference_label": self.ref_label,
            "limit": self.target.limit,
            "ratio": self.ratio,
            "status": self.status,
            "note": self.note,
        }


@dataclass
class Results:
    env: dict[str, Any]
    descriptions: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def find(self, wid: str, metric: str, lib: str) -> Row | None:
        for r in self.rows:
            if (r.wid, r.metric, r.lib) == (wid, metric, lib):
                return r
        return None

    def ratio(self, row: Row) -> float | None:
        mine = self.find(row.wid, row.metric, "gradcli")
        if mine is None or mine.stats is None or row.stats is None or row.stats.median <= 0:
            return None
        return mine.stats.median / row.stats.median

    def verdicts(self) -> list[Verdict]:
        out = []
        for t in TARGETS:
            if t.wid not in self.descriptions:
                continue  # not selected in this run
            ref = self.find(t.wid, t.metric, t.ref)
            label = (ref.short or ref.label) if ref is not None else t.ref
            mine = self.find(t.wid, t.metric, "gradcli")
            if ref is None or ref.stats is None:
                note = ref.note if ref is not None else "not measured"
                out.append(Verdict(t, label, None, "SKIP", note))
            elif mine is None or mine.stats is None:
                note = mine.note if mine is not None else "not measured"
                out.append(Verdict(t, label, None, "SKIP", note))
            elif mine.stats.median <= 0 or ref.stats.median <= 0:
                note = "a median is not positive: the noise exceeds the effect (more requests?)"
                out.append(Verdict(t, label, None, "SKIP", note))
            else:
                ratio = mine.stats.median / ref.stats.median
                out.append(Verdict(t, label, ratio, "PASS" if ratio <= t.limit else "MISS"))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "workloads": self.descriptions,
            "rows": [
                {
                    "workload": r.wid,
                    "metric": r.metric,
                    "library": r.lib,
                    "label": r.label,
                    "stats": None if r.stats is None else r.stats.to_json(),
                    "gradcli_over_this": self.ratio(r),
                    "note": r.note,
                }
                for r in self.rows
            ],
            "targets": [v.to_json() for v in self.verdicts()],
            "notes": self.notes,
        }

    def write_json(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.3g}×"


def print_header(console: Any, env: dict[str, Any]) -> None:
    from .envinfo import describe_pools

    lines = [
        ("mode", env["mode"]),
        ("Python", f"{env['python']} ({env['executable']})"),
        ("platform", env["platform"]),
        ("CPU", f"{env['cpu']}; {env['cpus']} CPUs, {env['cpus_usable']} usable"),
        ("load average", f"{env['load_average']}; idle wait: {env['waited_for_idle']}"),
        ("huge pages", f"THP {env['transparent_hugepages']}"),
        ("NumPy", f"{env['numpy']}, built with {env['blas_build']}"),
        ("thread pools", describe_pools(env["threadpools"])),
        ("OpenBLAS env", env["openblas_env"]),
        ("thread env", ", ".join(f"{k}={v}" for k, v in env["env_threads"].items()) or "none"),
        ("PyTorch", env["torch"] + (f"; {env['torch_threads']}" if "torch_threads" in env else "")),
        ("torch python", env["torch_python"] + _torch_py_version(env)),
        ("HIPS autograd", env["autograd"]),
        ("gradcli", env["gradcli"]),
        ("W5/W6 launch", env["gradcli_launch"]),
        ("bytecode", env["bytecode"]),
    ]
    from rich.markup import escape

    for key, value in lines:
        console.print(f"[bold]{key:>14}[/bold]  {escape(value)}", highlight=False, soft_wrap=True)
    console.print()


def _torch_py_version(env: dict[str, Any]) -> str:
    v = env.get("torch_python_version")
    return f" ({v})" if v else ""


def _iqr_pct(s: Stats) -> str:
    if s.median == 0:
        return ""
    return f"±{50 * (s.q3 - s.q1) / abs(s.median):.1f}%"


def print_table(console: Any, results: Results) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title="gradcli benchmarks (issues 6 and 14)",
        caption="median over rounds (in-process) or launches (processes); IQR as ± half the "
        "interquartile range over the median; ratio = gradcli's median ÷ this row's median",
        box=box.SIMPLE_HEAVY,
    )
    for name, kw in (
        ("ID", {"style": "bold", "no_wrap": True}),
        ("metric", {"no_wrap": True}),
        ("library (workload above)", {"max_width": 58}),
        ("median", {"justify": "right", "no_wrap": True}),
        ("IQR", {"justify": "right", "no_wrap": True}),
        ("min – max", {"justify": "right", "no_wrap": True}),
        ("ratio", {"justify": "right", "no_wrap": True}),
        ("target", {"no_wrap": True}),
        ("verdict", {"no_wrap": True}),
    ):
        table.add_column(name, **kw)
    verdicts = {(v.target.wid, v.target.metric, v.target.ref): v for v in results.verdicts()}
    ids = [w for w in ALL_IDS if w in results.descriptions]
    for n, wid in enumerate(ids):
        rows = sorted(
            (r for r in results.rows if r.wid == wid and r.metric in SHOWN_METRICS),
            key=lambda r: (SHOWN_METRICS.index(r.metric), LIB_ORDER.index(r.lib)),
        )
        table.add_row(wid, "", f"[bold]{escape(results.descriptions[wid])}[/bold]", *[""] * 6)
        for i, r in enumerate(rows):
            first_of_metric = i == 0 or rows[i - 1].metric != r.metric
            v = verdicts.get((r.wid, r.metric, r.lib))
            if r.stats is None:
                cells = ["—", "", ""]
            else:
                s = r.stats
                cells = [
                    format_value(s.median, s.unit),
                    _iqr_pct(s),
                    f"{format_value(s.lo, s.unit)} – {format_value(s.hi, s.unit)}",
                ]
            if r.lib == "gradcli" and r.stats is not None:
                ratio = "1"
            else:
                ratio = _fmt_ratio(results.ratio(r))
            status = ""
            if v is not None:
                style = {"PASS": "green", "MISS": "bold red", "SKIP": "dim"}[v.status]
                status = f"[{style}]{v.status}[/{style}]"
            elif r.stats is None:
                status = "[dim]skipped[/dim]"
            table.add_row(
                "",
                METRIC_LABEL[r.metric] if first_of_metric else "",
                "  " + escape(r.label),
                *cells,
                ratio,
                f"≤ {v.target.limit:g}×" if v is not None else "",
                status,
                end_section=i == len(rows) - 1 and n < len(ids) - 1,
            )
    console.print(table)


def print_summary(console: Any, results: Results) -> None:
    from rich.markup import escape

    verdicts = results.verdicts()
    counts = {s: sum(v.status == s for v in verdicts) for s in ("PASS", "MISS", "SKIP")}
    console.print(
        f"targets: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['SKIP']} skipped",
        highlight=False,
    )
    for v in verdicts:
        t = v.target
        metric = METRIC_LABEL.get(t.metric, t.metric)
        if v.status == "MISS" and v.ratio is not None:
            console.print(
                f"  [bold red]MISS[/bold red] {t.wid} {metric}: gradcli ÷ {escape(v.ref_label)} = "
                f"{v.ratio:.3g}×, target {escape(v.text)}: over by {v.ratio / t.limit:.2f}× "
                f"(gradcli must get {100 * (1 - t.limit / v.ratio):.0f}% lower)",
                highlight=False,
            )
        elif v.status == "SKIP":
            console.print(f"  [dim]SKIP[/dim] {t.wid} {metric} {v.text}: {v.note}", highlight=False)
    skipped = sorted({r.note for r in results.rows if r.stats is None and r.note})
    for note in [*skipped, *results.notes]:
        console.print(f"  note: {escape(note)}", highlight=False)
