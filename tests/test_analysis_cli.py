"""The commands of issue 5 from the command line: ``check``, ``jacobian``, ``hessian``,
``graph`` (and ``--dot``), ``optimize`` and ``functions``, in table and ``--json`` mode.

Real ``python -m gradcli`` processes (each launched once and cached); the JSON documents are
checked against docs/json.md, "jacobian --json" to "functions --json" (extra keys are
allowed), the exit codes against its table "Exit codes and error kinds". ``--help`` texts
and their examples run in-process through typer's CliRunner (cheap), after the CLI's own
argv pre-processing.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import harness
import pytest
import typer
from harness import Run

from gradcli.cli import app

COMMANDS = ["check", "jacobian", "hessian", "graph", "optimize", "functions"]


# Every command line launched as a process (all at once, on first use).
CHECK_OK = (
    "check",
    "sum(tanh(W @ x))",
    "W=[[0.5, -0.3, 0.8], [-0.2, 0.4, 0.1]]",
    "x=[1.0, -0.5, 0.25]",
    "--json",
)
CHECK_RELU_TABLE = ("check", "sum(relu(x) * y)", "x=[1, 0, -1]", "y=[2, 3, 4]")
CHECK_RELU_JSON = ("check", "relu(x)", "x=[1, 0, -1]", "--json", "--wrt", "x")
CHECK_ORDER2 = ("check", "sum(sin(x) * y)", "x=[0.3, 1.2]", "y=[2, -1]", "--order", "2")
JACOBIAN_JSON = ("jacobian", "a*b+b", "a=[3,4]", "b=[5,6]", "--json")
JACOBIAN_TABLE = ("jacobian", "outer(a, b)", "a=[1,2]", "b=[3,4,5]", "--wrt", "b")
HESSIAN_JSON = ("hessian", "sum(x**3)", "x=[1,2]", "--json")
HESSIAN_TABLE = ("hessian", "sum(a*b) + s**2", "a=[1,2]", "b=[3,4]", "s=2")
HESSIAN_NOT_SCALAR = ("hessian", "x*x", "x=[1,2]", "--json")
GRAPH = ("graph", "h = a*b; sum(h + b)", "a=[1,2]", "b=[3,4]")
GRAPH_JSON = (*GRAPH, "--json")
GRAPH_DOT = (*GRAPH, "--dot")
OPTIMIZE_ADAM_JSON = ("optimize", "sum((x - 3)**2)", "x=[0, 10]", "--optimizer", "adam",
                      "--lr", "0.1", "--steps", "1000", "--json")  # fmt: skip
# torch 2.13, float64: SGD(momentum=0.9, lr=0.1) with clip_grad_norm_(p, 0.3, inf) each step
# (the same numbers as test_higher_order.py's "clip_norm_inf" case)
OPTIMIZE_TORCH_JSON = ("optimize", "sum((tanh(W @ x) - y) ** 2) + 0.1 * sum(W ** 2)",
                       "W=[[0.5, -0.3, 0.8], [-0.2, 0.4, 0.1]]", "x=[1.0, -0.5, 0.25]",
                       "y=[0.3, -0.7]", "--wrt", "W,x", "--optimizer", "momentum",
                       "--momentum", "0.9", "--lr", "0.1", "--steps", "5", "--clip-norm", "0.3",
                       "--norm-type", "inf", "--json")  # fmt: skip
OPTIMIZE_NO_ZERO_GRAD = ("optimize", "sum(x**2)", "x=[1]", "--steps", "3", "--lr", "0.1",
                         "--no-zero-grad", "--json")  # fmt: skip
OPTIMIZE_TABLE = ("optimize", "sum((x - 3)**2)", "x=[0, 10]", "--steps", "50", "--lr", "0.1")
OPTIMIZE_BAD = ("optimize", "sum(x**2)", "x=[1]", "--optimizer", "rmsprop", "--json")
FUNCTIONS_JSON = ("functions", "--json")
FUNCTIONS_TABLE = ("functions",)
RUNS = (
    CHECK_OK, CHECK_RELU_TABLE, CHECK_RELU_JSON, CHECK_ORDER2, JACOBIAN_JSON, JACOBIAN_TABLE,
    HESSIAN_JSON, HESSIAN_TABLE, HESSIAN_NOT_SCALAR, GRAPH, GRAPH_JSON, GRAPH_DOT,
    OPTIMIZE_ADAM_JSON, OPTIMIZE_TORCH_JSON, OPTIMIZE_NO_ZERO_GRAD, OPTIMIZE_TABLE, OPTIMIZE_BAD,
    FUNCTIONS_JSON, FUNCTIONS_TABLE,
)  # fmt: skip


def _launch(args: tuple[str, ...]) -> Run:
    return harness.run(*args, columns=120)


@functools.cache
def _all_runs() -> dict[tuple[str, ...], Run]:
    """Every command line of this module, launched once, several at a time."""
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        return dict(zip(RUNS, pool.map(_launch, RUNS), strict=True))


def run(*args: str) -> Run:
    """``python -m gradcli ARGS`` in a subprocess at the repository root."""
    runs = _all_runs()
    return runs[args] if args in runs else _launch(args)


def invoke(*args: str) -> Run:
    return harness.invoke(*args, columns=120)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------


def test_check_json_passes_with_exit_0():
    j = run(*CHECK_OK).expect(0).json
    assert set(j) >= {"expr", "ok", "eps", "rtol", "atol", "inputs"}
    assert j["expr"] == "sum(tanh(W @ x))"
    assert j["ok"] is True
    assert (j["eps"], j["rtol"], j["atol"]) == (1e-6, 1e-5, 1e-8)  # docs/commands.md, "check"
    assert list(j["inputs"]) == ["W", "x"]
    for name, ndim in (("W", 2), ("x", 1)):
        c = j["inputs"][name]
        assert set(c) >= {"ok", "max_abs_error", "max_rel_error", "worst_index"}
        assert c["ok"] is True
        assert is_number(c["max_abs_error"]) and 0 <= c["max_abs_error"] < 1e-7
        assert is_number(c["max_rel_error"]) and c["max_rel_error"] >= 0
        assert len(c["worst_index"]) == ndim and all(isinstance(i, int) for i in c["worst_index"])


def test_check_table_fails_at_relu_kink_with_exit_1_naming_input_and_element():
    r = run(*CHECK_RELU_TABLE).expect(1)
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line.count("│") >= 7}
    assert "FAILED" in rows["x"] and "x[1]" in rows["x"], r.stdout
    assert "ok" in rows["y"] and "FAILED" not in rows["y"], r.stdout


def test_check_json_failure():
    j = run(*CHECK_RELU_JSON).expect(1).json
    assert j["ok"] is False
    assert j["inputs"]["x"]["ok"] is False
    assert j["inputs"]["x"]["worst_index"] == [1]
    assert j["inputs"]["x"]["max_abs_error"] == pytest.approx(0.5)


def test_check_order_2_table():
    r = run(*CHECK_ORDER2).expect(0)
    assert "Hessian" in r.stdout
    assert "FAILED" not in r.stdout


# --------------------------------------------------------------------------------------------
# jacobian
# --------------------------------------------------------------------------------------------


def test_jacobian_json():
    j = run(*JACOBIAN_JSON).expect(0).json
    assert set(j) >= {"expr", "output", "jacobian"}
    assert j["expr"] == "a*b+b"
    assert j["output"] == {"shape": [2], "value": [20.0, 30.0]}
    assert list(j["jacobian"]) == ["a", "b"]
    assert j["jacobian"]["a"] == {"shape": [2, 2], "value": [[5.0, 0.0], [0.0, 6.0]]}
    assert j["jacobian"]["b"] == {"shape": [2, 2], "value": [[4.0, 0.0], [0.0, 5.0]]}


def test_jacobian_table_of_a_matrix_output_and_wrt():
    r = run(*JACOBIAN_TABLE).expect(0)
    assert "(2, 3, 3)" in r.stdout, r.stdout  # output.shape + input.shape
    assert "d output / d" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("│ a ")]
    assert not rows, "a is not in --wrt: no Jacobian row for it"


# --------------------------------------------------------------------------------------------
# hessian
# --------------------------------------------------------------------------------------------


def test_hessian_json():
    j = run(*HESSIAN_JSON).expect(0).json
    assert set(j) >= {"expr", "output", "wrt", "labels", "hessian"}
    assert j["output"] == {"shape": [], "value": 9.0}
    assert j["wrt"] == ["x"]
    assert j["labels"] == ["x[0]", "x[1]"]
    assert j["hessian"] == [[6.0, 0.0], [0.0, 12.0]]


def test_hessian_table_is_labelled():
    r = run(*HESSIAN_TABLE).expect(0)
    lines = r.stdout.splitlines()
    header = next(line for line in lines if "a[0]" in line)
    assert header.split() == ["a[0]", "a[1]", "b[0]", "b[1]", "s"], header
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.split()[:1] in (
        ["a[0]"], ["a[1]"], ["b[0]"], ["b[1]"], ["s"]) and line is not header}  # fmt: skip
    assert [float(v) for v in rows["a[0]"]] == [0, 0, 1, 0, 0]
    assert [float(v) for v in rows["b[1]"]] == [0, 1, 0, 0, 0]
    assert [float(v) for v in rows["s"]] == [0, 0, 0, 0, 2]


def test_hessian_of_a_non_scalar_output_is_a_shape_error_suggesting_sum():
    r = run(*HESSIAN_NOT_SCALAR).expect(1)
    err = r.json["error"]
    assert err["kind"] == "shape"
    assert "sum(" in err["message"]
    assert r.stderr.strip(), "a one-line message on stderr too"


# --------------------------------------------------------------------------------------------
# graph
# --------------------------------------------------------------------------------------------


def test_graph_json():
    j = run(*GRAPH_JSON).expect(0).json
    assert set(j) >= {"output", "nodes"}
    nodes = {n["id"]: n for n in j["nodes"]}
    assert len(nodes) == 5
    for n in j["nodes"]:
        assert set(n) >= {"id", "op", "shape", "value", "grad", "inputs"}
        assert all(i in nodes for i in n["inputs"])
    out = nodes[j["output"]]
    assert out["op"] == "sum" and out["shape"] == [] and out["value"] == 18.0
    assert out["grad"] == 1.0
    add = nodes[out["inputs"][0]]
    assert add["op"] == "add" and add["grad"] == [1.0, 1.0]
    mul, b = (nodes[i] for i in add["inputs"])
    assert mul["op"] == "mul" and mul["value"] == [3.0, 8.0]
    a = nodes[mul["inputs"][0]]
    assert mul["inputs"][1] == b["id"]
    assert a["op"] == b["op"] == "input" and a["inputs"] == b["inputs"] == []
    assert a["grad"] == [3.0, 4.0]  # b
    assert b["grad"] == [2.0, 3.0]  # a + 1


def test_graph_table():
    r = run(*GRAPH).expect(0)
    text = r.stdout
    for piece in ("sum", "add", "h = mul", "a (input)", "b (input)", "grad [3. 4.]",
                  "grad [2. 3.]", "value 18"):  # fmt: skip
        assert piece in text, f"{piece!r} not in the graph table:\n{text}"


def test_graph_dot():
    r = run(*GRAPH_DOT).expect(0)
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("digraph") and lines[-1] == "}"
    assert sum("[label=" in line for line in lines) == 5
    edges = sorted(line.strip() for line in lines if "->" in line)
    assert len(edges) == 5  # a->mul, b->mul, mul->add, b->add, add->sum
    if shutil.which("dot") is None:
        pytest.skip("graphviz `dot` is not installed: DOT checked by structure only")
    proc = subprocess.run(
        ["dot", "-Tsvg"], input=r.stdout, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in proc.stdout


# --------------------------------------------------------------------------------------------
# optimize
# --------------------------------------------------------------------------------------------


def test_optimize_json_converges_and_has_the_loss_history():
    j = run(*OPTIMIZE_ADAM_JSON).expect(0).json
    assert set(j) >= {"expr", "optimizer", "lr", "steps", "losses", "final"}
    assert j["optimizer"] == "adam" and j["lr"] == 0.1 and j["steps"] == 1000
    assert len(j["losses"]) == 1001, "the loss before each step, then the final loss"
    assert j["losses"][0] == 9 + 49
    assert j["losses"][-1] < 1e-10
    assert set(j["final"]) == {"x"}
    assert set(j["final"]["x"]) >= {"value", "grad"}
    assert all(abs(v - 3) < 1e-6 for v in j["final"]["x"]["value"])


def test_optimize_json_matches_torch_with_clipping_and_momentum():
    # torch 2.13, float64: SGD(momentum=0.9, lr=0.1) with clip_grad_norm_(p, 0.3, inf) each
    # step (the same numbers as test_higher_order.py's "clip_norm_inf" case)
    j = run(*OPTIMIZE_TORCH_JSON).expect(0).json
    expected = [0.388654997497053, 0.33944914575172835, 0.25685697136761254,
                0.1688851259363649, 0.10828822254032702, 0.10823652685220604]  # fmt: skip
    assert j["losses"] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert list(j["final"]) == ["W", "x"]
    assert j["final"]["x"]["value"] == pytest.approx(
        [0.9599247709517051, -0.5717484708264221, -0.00898486653451241], rel=1e-12, abs=1e-12
    )


def test_optimize_no_zero_grad_accumulates():
    j = run(*OPTIMIZE_NO_ZERO_GRAD).expect(0).json
    x, acc, xs = 1.0, 0.0, [1.0]
    for _ in range(3):  # the gradient is never zeroed: it is the running sum of 2 x
        acc += 2 * x
        x -= 0.1 * acc
        xs.append(x)
    assert j["losses"] == pytest.approx([v * v for v in xs], rel=1e-14)
    assert j["final"]["x"]["value"] == pytest.approx([x], rel=1e-14)
    assert len(j["losses"]) == 4


def test_optimize_table():
    r = run(*OPTIMIZE_TABLE).expect(0)
    assert "sgd" in r.stdout and "loss" in r.stdout
    assert "50 steps" in r.stdout
    assert "x" in r.stdout and "(2,)" in r.stdout


def test_optimize_unknown_optimizer_is_a_usage_error():
    r = run(*OPTIMIZE_BAD).expect(2)
    assert r.json["error"]["kind"] == "input"


# --------------------------------------------------------------------------------------------
# functions
# --------------------------------------------------------------------------------------------

# docs/language.md, "Function calls": the functions and aliases it lists
DOCUMENTED_FUNCTIONS = """
abs sign sqrt square exp expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh
tanh arcsinh arccosh arctanh sigmoid relu softplus floor ceil round maximum minimum arctan2 pow
clip where sum mean prod max min norm logsumexp var std softmax log_softmax reshape transpose
flatten squeeze expand_dims concatenate stack flip matmul dot outer trace diag det inv solve
zeros ones full eye arange linspace rand randn
""".split()  # noqa: SIM905
DOCUMENTED_ALIASES = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "amax", "amin",
                "concat"]  # fmt: skip


def test_functions_json_lists_every_function_with_its_texts():
    rows = run(*FUNCTIONS_JSON).expect(0).json
    assert isinstance(rows, list)
    by_name = {row["name"]: row for row in rows}
    missing = sorted(set(DOCUMENTED_FUNCTIONS) - set(by_name))
    assert not missing, f"functions missing from `gradcli functions`: {missing}"
    aliases = {a for row in rows for a in row.get("aliases", [])}
    assert set(DOCUMENTED_ALIASES) <= aliases, sorted(set(DOCUMENTED_ALIASES) - aliases)
    for row in rows:
        for key in ("signature", "summary", "derivative"):
            assert isinstance(row.get(key), str) and row[key].strip(), (row["name"], key)
    assert by_name["sin"]["signature"] == "sin(x)"
    assert by_name["sin"]["derivative"] == "g cos(x)"


def test_functions_table():
    r = run(*FUNCTIONS_TABLE).expect(0)
    names = {line.split()[0] for line in r.stdout.splitlines() if line.split()}
    missing = sorted(set(DOCUMENTED_FUNCTIONS) - names)
    assert not missing, f"functions missing from the table: {missing}"
    assert "derivative" in r.stdout


# --------------------------------------------------------------------------------------------
# --help: every command shows an example, and the examples run
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_an_example(command):
    r = invoke(command, "--help").expect(0)
    assert "Example" in r.stdout, f"`gradcli {command} --help` shows no example:\n{r.stdout}"


def _examples(command: str) -> list[list[str]]:
    click_command = typer.main.get_command(app).commands[command]
    out = []
    for line in (click_command.help or "").splitlines():
        line = line.strip()
        if line.startswith(f"gradcli {command}"):
            out.append(shlex.split(line.split(" | ")[0])[1:])
    return out


@pytest.mark.parametrize("command", ["check", "jacobian", "hessian", "graph", "optimize"])
def test_help_examples_run(command):
    examples = _examples(command)
    assert examples, f"no `gradcli {command} ...` example line in its help"
    for args in examples:
        invoke(*args).expect(0)


# --------------------------------------------------------------------------------------------
# floating-point warnings: counted, once on stderr, as eval does (issue 7)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("jacobian", "x * 1e308 * 10", "x=[1, 2]", "--json"),
        ("hessian", "sum(exp(x * 1000))", "x=[1, 2]", "--json"),
        ("graph", "sum(exp(x * 1000))", "x=[1, 2]", "--json"),
        ("graph", "sum(exp(x * 1000))", "x=[1, 2]", "--dot"),
        ("optimize", "sum(x * 1e308 * 10)", "x=[1, 2]", "--steps", "3", "--json"),
        ("check", "sum(log(x))", "x=[1e-7, 2]", "--eps", "1e-6", "--json"),
    ],
)
def test_floating_point_warnings_are_reported_once_on_stderr(args: tuple[str, ...]) -> None:
    r = harness.run(*args)
    assert r.code in (0, 1), r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("warning: ") for line in lines), r.stderr
    assert len(lines) == len(set(lines)) <= 3, r.stderr  # one line per kind
    assert any(k in r.stderr for k in ("overflow", "invalid value")), r.stderr
    assert "RuntimeWarning" not in r.stderr


def test_no_warning_line_when_nothing_overflows() -> None:
    r = harness.run("jacobian", "x * 2", "x=[1, 2]", "--json")
    assert r.code == 0 and r.stderr == ""
