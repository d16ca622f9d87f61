"""Tests of the command line (docs/commands.md; exit codes and error objects as in
docs/json.md, "Error", "Exit codes and error kinds"): real ``python -m gradcli`` processes
for the key cases, typer's CliRunner (after the CLI's own argv pre-processing) for the
cheaper ones.

Every error case is checked for: the exit code of its kind, a one-line ``error...`` cause as
the first line of stderr, no Python traceback anywhere, and in ``--json`` mode a strict-JSON
error object on stdout.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest
from harness import Run

TUTORIAL = ["eval", "a*b+b", "a=[3,4]", "b=[5,6]"]
EXIT_CODE = {"parse": 2, "name": 2, "input": 2, "shape": 1, "domain": 1, "value": 1, "limit": 1}


# Each command line runs once: its result is cached by its arguments.
run = functools.cache(harness.run)
invoke = functools.cache(harness.invoke)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    out = {
        "nul": d / "nul.gc",
        "prog": d / "prog.gc",
        "inputs": d / "inputs.json",
        "npy": d / "a.npy",
        "csv": d / "b.csv",
        "json": d / "c.json",
        "bad": d / "bad.gc",
    }
    out["nul"].write_bytes(b"x\x00 + 1\n")
    out["prog"].write_text("# a program in a file\nh = a*b   # a binding\nsum(h)\n", "utf-8")
    out["inputs"].write_text('{"a": [1, 2], "b": 3}', "utf-8")
    np.save(out["npy"], np.array([[1.0, 2.0], [3.0, 4.0]]))
    out["csv"].write_text("1,2\n3,4\n", "utf-8")
    out["json"].write_text("[1, 2.5]", "utf-8")
    out["bad"].write_text("h = x * 2\nk = h +* 1\nk\n", "utf-8")
    return out


# --------------------------------------------------------------------------------------
# The tutorial
# --------------------------------------------------------------------------------------


def test_tutorial_table() -> None:
    r = run(*TUTORIAL)
    assert r.code == 0, r.stderr
    r.assert_clean()
    out = r.stdout
    assert "a*b+b" in out
    assert "[20. 30.]" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 4}
    assert "[3. 4.]" in rows["a"] and "[5. 6.]" in rows["a"]
    assert "[5. 6.]" in rows["b"] and "[4. 5.]" in rows["b"]
    assert "[20. 30.]" in rows["output"]
    assert "sum" in out.split("output", 1)[1]  # the caption states the reduction
    assert "10.0995" in out  # the total gradient norm, sqrt(102)


def test_tutorial_says_the_implicit_sum_once() -> None:
    # docs/commands.md, "Notes and warnings": the caption under a table says the implicit
    # sum; without a table (--json) a note on stderr says it
    r = run(*TUTORIAL)
    assert r.code == 0
    assert r.stderr == ""
    assert "sum" in r.stdout.split("output", 1)[1]
    j = run(*TUTORIAL, "--json")
    assert j.code == 0
    assert j.stderr.startswith("note: ") and "sum" in j.stderr


def test_tutorial_json_is_the_spec_response() -> None:
    r = run(*TUTORIAL, "--json")
    assert r.code == 0, r.stderr
    r.assert_clean()
    assert r.json == {
        "id": None,
        "expr": "a*b+b",
        "output": {"shape": [2], "value": [20.0, 30.0]},
        "reduction": "sum",
        "inputs": {
            "a": {"shape": [2], "value": [3.0, 4.0], "requires_grad": True, "grad": [5.0, 6.0]},
            "b": {"shape": [2], "value": [5.0, 6.0], "requires_grad": True, "grad": [4.0, 5.0]},
        },
        "intermediates": {},
        "clip": None,
    }


def test_x_plus_y() -> None:
    r = invoke("eval", "x+y", "x=[2,3]", "y=[5,6]", "--json")
    assert r.code == 0
    d = r.json
    assert d["output"]["value"] == [7.0, 9.0]
    assert d["inputs"]["x"]["grad"] == [1.0, 1.0]
    assert d["inputs"]["y"]["grad"] == [1.0, 1.0]


# --------------------------------------------------------------------------------------
# Arguments and options
# --------------------------------------------------------------------------------------


def test_expression_starting_with_minus() -> None:
    r = run("eval", "-x**2", "x=3")
    assert r.code == 0, r.stderr
    assert "-9.0" in r.stdout and "-6.0" in r.stdout
    r = run("eval", "--json", "-x**2", "x=3")  # options before the expression too
    assert r.code == 0, r.stderr
    d = r.json
    assert d["output"] == {"shape": [], "value": -9.0}
    assert d["reduction"] is None
    assert d["inputs"]["x"]["grad"] == -6.0


def test_expression_starting_with_minus_in_process() -> None:
    d = invoke("eval", "-x**2 + --x", "x=3", "--json").json
    assert d["output"]["value"] == -6.0
    assert d["inputs"]["x"]["grad"] == -5.0


def test_program_from_a_file(files: dict[str, Path]) -> None:
    r = run("eval", "-f", str(files["prog"]), "a=[1,2]", "b=[3,4]", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["output"] == {"shape": [], "value": 11.0}
    assert d["intermediates"] == {"h": {"shape": [2], "value": [3.0, 8.0], "grad": [1.0, 1.0]}}
    assert d["inputs"]["a"]["grad"] == [3.0, 4.0]
    assert d["inputs"]["b"]["grad"] == [1.0, 2.0]


def test_program_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    program = tmp_path / "bom.gc"
    program.write_bytes(b"\xef\xbb\xbfx * 2\n")  # as some editors save UTF-8
    r = run("eval", "-f", str(program), "x=3", "--json")
    assert r.code == 0, r.stderr
    assert r.json["output"]["value"] == 6.0


def test_inputs_from_a_file(files: dict[str, Path]) -> None:
    r = run("eval", "a*b", "--inputs", str(files["inputs"]), "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["output"]["value"] == [3.0, 6.0]
    assert d["inputs"]["a"]["grad"] == [3.0, 3.0]
    assert d["inputs"]["b"] == {"shape": [], "value": 3.0, "requires_grad": True, "grad": 3.0}


def test_inputs_from_stdin() -> None:
    r = run("eval", "a*b", "--inputs", "-", "--json", stdin='{"a": [1, 2], "b": 3}')
    assert r.code == 0, r.stderr
    d = r.json
    assert d["output"]["value"] == [3.0, 6.0]
    assert d["inputs"]["b"]["grad"] == 3.0


def test_values_from_npy_csv_and_json_files(files: dict[str, Path]) -> None:
    r = run(
        "eval",
        "sum(a) + sum(b*b) + sum(c)",
        f"a=@{files['npy']}",
        f"b=@{files['csv']}",
        f"c=@{files['json']}",
        "--json",
    )
    assert r.code == 0, r.stderr
    d = r.json
    assert d["inputs"]["a"]["value"] == [[1.0, 2.0], [3.0, 4.0]]
    assert d["inputs"]["b"]["value"] == [[1.0, 2.0], [3.0, 4.0]]
    assert d["inputs"]["c"]["value"] == [1.0, 2.5]
    assert d["output"]["value"] == 10.0 + 30.0 + 3.5
    assert d["inputs"]["a"]["grad"] == [[1.0, 1.0], [1.0, 1.0]]
    assert d["inputs"]["b"]["grad"] == [[2.0, 4.0], [6.0, 8.0]]
    assert d["inputs"]["c"]["grad"] == [1.0, 1.0]


def test_constant_expression_values() -> None:
    r = run("eval", "x * 2", "x=linspace(0, 1, 3)", "W=eye(2)", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["inputs"]["x"]["value"] == [0.0, 0.5, 1.0]
    assert d["inputs"]["W"]["value"] == [[1.0, 0.0], [0.0, 1.0]]
    assert d["output"]["value"] == [0.0, 1.0, 2.0]
    assert d["inputs"]["W"]["grad"] == [[0.0, 0.0], [0.0, 0.0]]  # unused: zeros, not an error


def test_dtype_float32() -> None:
    r = run("eval", "x/3", "x=1", "--dtype", "float32", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    v, g = d["output"]["value"], d["inputs"]["x"]["grad"]
    assert v == pytest.approx(1 / 3, rel=1e-6)
    assert v != 1 / 3  # a float32 result, not float64's
    assert g == pytest.approx(1 / 3, rel=1e-6)
    assert float(np.float32(v)) == float(np.float32(1) / np.float32(3))


def test_seed() -> None:
    r = run("eval", "randn(2)", "--seed", "3", "--json")
    assert r.code == 0, r.stderr
    assert r.json["output"]["value"] == np.random.default_rng(3).standard_normal(2).tolist()
    d = invoke("eval", "randn(2)", "--json").json  # default seed 0
    assert d["output"]["value"] == np.random.default_rng(0).standard_normal(2).tolist()


def _table_rows(stdout: str) -> str:
    return "\n".join(line for line in stdout.splitlines() if "│" in line)


def test_precision() -> None:
    short = invoke("eval", "x/3", "x=1", "--precision", "2")
    assert short.code == 0
    rows = _table_rows(short.stdout)
    assert "0.33" in rows and "0.333" not in rows
    long = invoke("eval", "x/3", "x=1", "--precision", "8")
    assert long.code == 0
    rows = _table_rows(long.stdout)
    assert "0.33333333" in rows and "0.333333333" not in rows


def test_full_shows_every_element() -> None:
    summary = invoke("eval", "x*1", "x=arange(2000)")
    assert summary.code == 0
    assert "..." in summary.stdout
    assert "1.000e+03" not in summary.stdout  # element 1000 is summarised away
    full = invoke("eval", "x*1", "x=arange(2000)", "--full")
    assert full.code == 0
    assert "..." not in full.stdout
    assert full.stdout.count("1.000e+03") == 2  # x and output
    assert "1.999e+03" in full.stdout and "1.234e+03" in full.stdout


def test_save_npz(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    r = run(*TUTORIAL, "--save", str(out))
    assert r.code == 0, r.stderr
    with np.load(out) as data:
        assert set(data.files) == {"output", "grad_a", "grad_b"}
        np.testing.assert_array_equal(data["output"], [20.0, 30.0])
        np.testing.assert_array_equal(data["grad_a"], [5.0, 6.0])
        np.testing.assert_array_equal(data["grad_b"], [4.0, 5.0])


def test_wrt() -> None:
    r = run(*TUTORIAL, "--wrt", "a", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["inputs"]["a"]["requires_grad"] is True
    assert d["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert d["inputs"]["b"]["requires_grad"] is False
    assert d["inputs"]["b"]["grad"] is None


def test_grad_output() -> None:
    r = run(*TUTORIAL, "--grad-output", "[1,2]", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["reduction"] is None
    assert d["inputs"]["a"]["grad"] == [5.0, 12.0]  # b * g
    assert d["inputs"]["b"]["grad"] == [4.0, 10.0]  # (a + 1) * g


def test_clip_norm() -> None:
    r = run(*TUTORIAL, "--clip-norm", "1", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    total = math.sqrt(102.0)
    scale = 1.0 / (total + 1e-6)
    clip = d["clip"]
    assert set(clip) == {"max_norm", "norm_type", "total_norm", "scale"}
    assert clip["max_norm"] == 1.0
    assert clip["norm_type"] == 2.0
    assert clip["total_norm"] == pytest.approx(total, rel=1e-12)
    assert clip["total_norm"] == pytest.approx(10.0995, abs=1e-4)
    assert clip["scale"] == pytest.approx(scale, rel=1e-12)
    assert d["inputs"]["a"]["grad"] == pytest.approx([5 * scale, 6 * scale], rel=1e-12)
    assert d["inputs"]["b"]["grad"] == pytest.approx([4 * scale, 5 * scale], rel=1e-12)


def test_clip_value() -> None:
    r = invoke(*TUTORIAL, "--clip-value", "1", "--json")
    assert r.code == 0, r.stderr
    d = r.json
    assert d["clip"] == {"clip_value": 1.0}
    assert d["inputs"]["a"]["grad"] == [1.0, 1.0]
    assert d["inputs"]["b"]["grad"] == [1.0, 1.0]


def test_help_and_functions() -> None:
    r = run("--help")
    assert r.code == 0
    assert "eval" in r.stdout
    r = run("eval", "--help")
    assert r.code == 0
    assert "--wrt" in r.stdout and "--json" in r.stdout
    r = run("functions")
    assert r.code == 0, r.stderr
    assert "tanh" in r.stdout
    assert "sigmoid" in r.stdout


# --------------------------------------------------------------------------------------
# Hard inputs that work
# --------------------------------------------------------------------------------------


def test_ten_thousand_nested_parentheses() -> None:
    n = 10_000
    r = run("eval", "(" * n + "x" + ")" * n, "x=2", "--json")
    assert r.code == 0, r.stderr[-2000:]
    r.assert_clean()
    d = r.json
    assert d["output"]["value"] == 2.0
    assert d["inputs"]["x"]["grad"] == 1.0


def test_huge_power_is_inf_with_a_warning() -> None:
    r = run("eval", "9**9**9", "--json")
    assert r.code == 0, r.stderr
    r.assert_clean()
    assert r.json["output"] == {"shape": [], "value": "inf"}
    assert "warning" in r.stderr
    table = invoke("eval", "9**9**9")
    assert table.code == 0
    assert "inf" in table.stdout
    assert "warning" in table.stderr


def test_non_finite_values_are_strict_json() -> None:
    r = invoke("eval", "x*2", 'x=[NaN, Infinity, "-inf"]', "--json")
    assert r.code == 0
    d = r.json
    assert d["output"]["value"] == ["nan", "inf", "-inf"]
    assert d["inputs"]["x"]["grad"] == [2.0, 2.0, 2.0]


def test_json_request_on_stdin_echoes_the_id() -> None:
    r = invoke("eval", "-", "--json", stdin='{"id": 7, "expr": "x*y", "inputs": {"x": 2, "y": 3}}')
    assert r.code == 0
    d = r.json
    assert d["id"] == 7
    assert d["output"]["value"] == 6.0
    r = invoke("eval", "-", "--json", stdin='{"id": "q", "expr": "2x", "inputs": {"x": 1}}')
    assert r.code == 2
    assert r.json["id"] == "q"
    assert r.json["error"]["kind"] == "parse"


# --------------------------------------------------------------------------------------
# Bad input: exit code, one-line cause on stderr, no traceback, JSON error object
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    id: str
    args: tuple[str, ...]
    kind: str | tuple[str, ...]
    contains: tuple[str, ...] = ()
    position: tuple[int, int] | None = None
    subprocess: bool = False  # also run as a real process
    stdin: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.kind if isinstance(self.kind, tuple) else (self.kind,)

    @property
    def code(self) -> int:
        codes = {EXIT_CODE[k] for k in self.kinds}
        assert len(codes) == 1
        return codes.pop()

    def argv(self, files: dict[str, Path]) -> tuple[str, ...]:
        return tuple(a.format(**{k: str(v) for k, v in files.items()}) for a in self.args)


BAD = [
    Bad("unclosed-paren", ("eval", "(1 + 2"), "parse", ("expected",), (1, 7), True),
    Bad("unopened-paren", ("eval", "1 + 2)"), "parse", ("')'",), (1, 6), True),
    Bad("unclosed-bracket", ("eval", "sum([1, 2)"), "parse", ("')'",), (1, 10)),
    Bad("implicit-product", ("eval", "2x", "x=1"), "parse", ("operator",), (1, 2), True),
    Bad("unknown-function", ("eval", "sinn(x)", "x=1"), "name", ("sinn", "`sin`"), (1, 1), True),
    Bad("unknown-name", ("eval", "x + y", "x=1"), "name", ("`y`",), (1, 5), True),
    Bad("too-many-arguments", ("eval", "sin(x, x)", "x=1"), "name", ("sin",), (1, 1), True),
    Bad("missing-argument", ("eval", "sum()"), "name", ("sum",), (1, 1)),
    Bad("bad-keyword", ("eval", "sum(x, axs=0)", "x=[1,2]"), "name", ("axs", "`axis`"), (1, 8)),
    Bad(
        "shape-add",
        ("eval", "a + b", "a=[1,2]", "b=[1,2,3]"),
        "shape",
        ("(2,)", "(3,)"),
        subprocess=True,
    ),
    Bad(
        "shape-matmul",
        ("eval", "A @ v", "A=[[1,2],[3,4]]", "v=[1,2,3]"),
        "shape",
        ("(2, 2)", "(3,)"),
        subprocess=True,
    ),
    Bad("index-out-of-range", ("eval", "x[5]", "x=[1,2]"), "shape", ("5",)),
    Bad("singular-matrix", ("eval", "inv(A)", "A=[[1,2],[2,4]]"), "domain", ("singular",)),
    Bad("bad-json-value", ("eval", "a", "a=[1,2"), "input", ("a",), subprocess=True),
    Bad("boolean-value", ("eval", "a", "a=true"), "input", ("true",), subprocess=True),
    Bad("empty-expression", ("eval", ""), "parse", ("empty",), (1, 1), True),
    Bad("only-a-comment", ("eval", "# nothing"), "parse", ("empty",), (1, 1)),
    Bad("dunder-import", ("eval", "__import__('os')"), "name", ("__import__",), (1, 1), True),
    Bad("dunder-attribute", ("eval", "x.__class__", "x=1"), "name", ("__class__",), (1, 3), True),
    Bad("too-large", ("eval", "zeros(10**12)"), "limit", ("limit",), subprocess=True),
    Bad(
        "unknown-wrt",
        ("eval", "a*b", "a=1", "b=2", "--wrt", "c"),
        ("name", "input"),
        ("`c`",),
        subprocess=True,
    ),
    Bad("missing-file", ("eval", "a", "a=@nope.npy"), "input", ("nope.npy",), subprocess=True),
    Bad("nul-byte", ("eval", "-f", "{nul}", "x=1"), "parse", ("NUL",), (1, 2), True),
    Bad(
        "nul-byte-request",
        ("eval", "-", "--json"),
        "parse",
        ("NUL",),
        (1, 2),
        stdin='{"expr": "x\\u0000", "inputs": {"x": 1}}',
    ),
    Bad(
        "both-clips",
        (*TUTORIAL, "--clip-norm", "1", "--clip-value", "1"),
        "input",
        ("clip",),
        subprocess=True,
    ),
    Bad(
        "grad-output-shape",
        ("eval", "x*2", "x=[1,2]", "--grad-output", "[1,2,3]"),
        "shape",
        ("grad_output",),
    ),
    Bad("parse-error-on-line-2", ("eval", "-f", "{bad}", "x=1"), "parse", (), (2, 8)),
    Bad("input-named-like-a-function", ("eval", "sum(sum)", "sum=[1,2]"), ("name", "input")),
    Bad("bad-request-json", ("eval", "-", "--json"), "input", (), stdin='{"expr": "x",'),
    Bad("bad-option-value", ("eval", "x", "x=1", "--dtype", "float16"), "input", ("float16",)),
]
SUBPROCESS_BAD = [b for b in BAD if b.subprocess]


def _with_json(args: tuple[str, ...]) -> tuple[str, ...]:
    return args if "--json" in args else (*args, "--json")


def _without_json(args: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a for a in args if a != "--json")


def check_json_error(bad: Bad, r: Run) -> dict[str, Any]:
    assert r.code == bad.code, (r.code, r.stdout, r.stderr)
    r.assert_clean()
    d = r.json
    assert set(d) == {"id", "error"}
    err = d["error"]
    assert set(err) <= {"kind", "message", "line", "column"}
    assert {"kind", "message"} <= set(err)
    assert err["kind"] in bad.kinds, err
    assert isinstance(err["message"], str) and err["message"]
    for text in bad.contains:
        assert text in err["message"], (text, err["message"])
    if bad.position is not None:
        assert (err.get("line"), err.get("column")) == bad.position, err
    # stderr: a one-line cause that starts with "error" and holds the whole message
    first = r.first_error_line
    assert first.startswith("error"), r.stderr
    assert err["message"] in first, (err["message"], r.stderr)
    return err


@pytest.mark.parametrize("bad", SUBPROCESS_BAD, ids=[b.id for b in SUBPROCESS_BAD])
def test_bad_input_json_subprocess(bad: Bad, files: dict[str, Path]) -> None:
    check_json_error(bad, run(*_with_json(bad.argv(files)), stdin=bad.stdin))


@pytest.mark.parametrize("bad", BAD, ids=[b.id for b in BAD])
def test_bad_input_json(bad: Bad, files: dict[str, Path]) -> None:
    check_json_error(bad, invoke(*_with_json(bad.argv(files)), stdin=bad.stdin))


@pytest.mark.parametrize("bad", BAD, ids=[b.id for b in BAD])
def test_bad_input_table_mode(bad: Bad, files: dict[str, Path]) -> None:
    r = invoke(*_without_json(bad.argv(files)), stdin=bad.stdin)
    assert r.code == bad.code, (r.code, r.stdout, r.stderr)
    r.assert_clean()
    assert r.stdout == "", "no partial result on stdout after an error"
    first = r.first_error_line
    assert first.startswith("error"), r.stderr
    message = invoke(*_with_json(bad.argv(files)), stdin=bad.stdin).json["error"]["message"]
    assert message in first, (message, r.stderr)


def test_limit_error_is_fast() -> None:
    start = time.perf_counter()
    r = invoke("eval", "zeros(10**12)", "--json")
    assert time.perf_counter() - start < 2.0
    assert r.code == 1
    assert r.json["error"]["kind"] == "limit"


def test_parse_error_shows_the_line_and_a_caret() -> None:
    r = run("eval", "x + 2x", "x=1")
    assert r.code == 2
    r.assert_clean()
    lines = r.stderr.splitlines()
    assert lines[0].startswith("error")
    src = next(i for i, line in enumerate(lines) if line.strip() == "x + 2x")
    caret = lines[src + 1]
    assert caret.strip() == "^"
    assert caret.index("^") == lines[src].index("x + 2x") + 5  # column 6: the second x


def test_parse_error_caret_on_a_later_line(files: dict[str, Path]) -> None:
    r = invoke("eval", "-f", str(files["bad"]), "x=1")
    assert r.code == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith("error")
    src = next(i for i, line in enumerate(lines) if line.strip() == "k = h +* 1")
    caret = lines[src + 1]
    assert caret.strip() == "^"
    assert caret.index("^") == lines[src].index("k = h +* 1") + 7  # the '*'


def test_user_text_is_not_rich_markup() -> None:
    r = invoke("eval", "[bold]x", "x=1")
    assert r.code == 2
    assert "[bold]x" in r.stderr


def test_save_failure_leaves_one_json_object(tmp_path: Path) -> None:
    # an unwritable --save path is an error; stdout must still be one JSON object, not a
    # success response followed by an error object
    target = tmp_path / "missing-dir" / "out.npz"
    r = invoke(*TUTORIAL, "--json", "--save", str(target))
    assert r.code == 2
    r.assert_clean()
    d = r.json
    assert d["error"]["kind"] == "input"


def test_main_in_process_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    from gradcli.cli import main

    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with pytest.raises(SystemExit) as done:
        main(["eval", "x * 2", "x=3", "--json"])
    assert done.value.code in (0, None)
    assert gc.isenabled() and gc.get_freeze_count() == frozen


@pytest.mark.parametrize("value", ["sum(ones((2, 3)), axis=0)", "ones((3, 2)).T[0]"])
def test_constant_values_with_keywords_and_attributes(value: str) -> None:
    # `axis` and `T` are not read as inputs of the constant expression
    r = run("eval", "sum(x)", f"x={value}", "--json")
    assert r.code == 0, r.stderr
    assert r.json["output"]["value"] == (3.0 if value.endswith("[0]") else 6.0)


def test_inputs_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    inputs = tmp_path / "in.json"
    inputs.write_bytes(b'\xef\xbb\xbf{"x": [1, 2]}')
    r = run("eval", "sum(x * 2)", "--inputs", str(inputs), "--json")
    assert r.code == 0, r.stderr
    assert r.json["output"]["value"] == 6.0


def test_total_grad_norm_that_overflows_float32_warns_nothing_raw() -> None:
    r = run("eval", "x * 1e38", "x=[1, 2]", "--dtype", "float32")
    assert r.code == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr and "engine.py" not in r.stderr


def test_batch_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    requests = tmp_path / "requests.ndjson"
    line = b'{"expr": "sum(x * 2)", "inputs": {"x": [1, 2]}}\n'
    requests.write_bytes(b"\xef\xbb\xbf" + line + line)
    r = run("batch", str(requests))
    assert r.code == 0, r.stdout + r.stderr
    assert [d["output"]["value"] for d in r.lines] == [6.0, 6.0]


def _passes_in_a_fresh_interpreter(code: str) -> None:
    """``code``'s assertions hold in a new Python, where nothing is imported yet."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_help_and_the_cli_modules_load_without_numpy():
    # start-up time: NumPy and the engine are imported by the commands that compute, and
    # `from . import <module>` inside gradcli must not load them through gradcli.__getattr__
    code = (
        "import sys; from gradcli import cli, options, errors; "
        "assert 'numpy' not in sys.modules, sorted(m for m in sys.modules if 'numpy' in m)"
    )
    _passes_in_a_fresh_interpreter(code)


def test_commands_are_made_when_first_looked_up():
    # start-up time: typer reads every command's signature when it makes the click group;
    # a run makes only the command it runs, --help and typos still see them all
    code = (
        "from gradcli import arguments; from gradcli.cli import app; import typer.main; "
        "g = arguments.click_group(app); eager = typer.main.get_command(app); "
        "assert list(g.commands) == list(eager.commands), list(g.commands); "
        "assert g.commands._made == {}; "
        "cmd = g.get_command(None, 'eval'); assert list(g.commands._made) == ['eval']; "
        "assert [p.name for p in cmd.params] == [p.name for p in eager.commands['eval'].params]; "
        "assert g.get_command(None, 'eval') is cmd; assert g.get_command(None, 'evl') is None; "
        "assert g.list_commands(None) == eager.list_commands(None); "
        "assert len(g.commands) == len(eager.commands)"
    )
    _passes_in_a_fresh_interpreter(code)
    typo = run("evl", "x", "x=1")
    assert typo.code == 2
    assert "No such command 'evl'. Did you mean 'eval'?" in typo.stderr
    help_text = run("--help").stdout
    for name in ("eval", "batch", "check", "jacobian", "explain", "repl", "functions"):
        assert f"\n  {name} " in help_text


def test_the_help_lists_the_commands_without_making_them():
    # start-up time: `gradcli --help` reads each command's one-line help from its
    # registration; the text is what typer's group prints after making every command
    code = (
        "import contextlib, io; from gradcli import arguments; from gradcli.cli import app; "
        "import typer.main\n"
        "def shown(group):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "        group.main(['--help'], prog_name='gradcli', standalone_mode=False)\n"
        "    return out.getvalue()\n"
        "g = arguments.click_group(app); lazy = shown(g); assert g.commands._made == {}\n"
        "eager = shown(typer.main.get_command(app)); assert lazy == eager, (lazy, eager)\n"
        "assert 'Commands:' in lazy and 'functions' in lazy"
    )
    _passes_in_a_fresh_interpreter(code)
