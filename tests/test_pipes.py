"""Pipes and scripts (docs/json.md; docs/commands.md, "batch"; docs/api.md; issue 4): ``eval -``,
NDJSON ``batch``, ``@file`` inputs, ``--save`` and the ``gradcli.evaluate`` API.

Real ``python -m gradcli`` processes wherever the pipe itself matters (stdin bytes, flushing,
exit codes, a reader that goes away); typer's CliRunner, in-process, for the long tables of
small cases. Every JSON document read here goes through :func:`strict_loads`, which refuses
the ``NaN``/``Infinity`` tokens that strict JSON does not have.
"""

from __future__ import annotations

import json
import math
import queue
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest
from harness import REPO, Run, strict_loads

import gradcli

EXIT_CODE = {"parse": 2, "name": 2, "input": 2, "shape": 1, "domain": 1, "value": 1, "limit": 1}
ERROR_FIELDS = {"kind", "message", "line", "column"}
TUTORIAL = {"expr": "a*b+b", "inputs": {"a": [3, 4], "b": [5, 6]}}


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def run(*args: str, stdin: str | bytes | None = None, cwd: Path = REPO) -> Run:
    """``python -m gradcli ARGS`` in a real subprocess, never cached (a run may depend on
    files a test changes); its output is UTF-8 text with no traceback."""
    return harness.run(*args, stdin=stdin, cwd=cwd).assert_clean()


def invoke(*args: str, stdin: str | bytes | None = None) -> Run:
    """The same through CliRunner, in-process, after the CLI's argv pre-processing."""
    return harness.invoke(*args, stdin=stdin).assert_clean()


def ndjson(*requests: Any) -> str:
    return "".join(json.dumps(r) + "\n" for r in requests)


def assert_error(doc: Any, kind: str, *, id: Any = None) -> dict[str, Any]:
    """``doc`` is the error object of ``kind`` (docs/json.md, "Error"); returns ``doc["error"]``."""
    assert "error" in doc, doc
    assert doc["id"] == id and type(doc["id"]) is type(id), doc
    err = doc["error"]
    assert err["kind"] == kind, doc
    assert set(err) <= ERROR_FIELDS, doc
    assert isinstance(err["message"], str) and err["message"], doc
    for pos in ("line", "column"):
        if pos in err:
            assert isinstance(err[pos], int) and err[pos] >= 1, doc
    return err


def assert_json_error_run(r: Run, kind: str, *, id: Any = None) -> dict[str, Any]:
    """An ``eval --json`` failure: exit code of the kind, the error object on stdout and a
    one-line message on stderr."""
    assert r.code == EXIT_CODE[kind], (r.code, r.stdout, r.stderr)
    err = assert_error(r.json, kind, id=id)
    assert r.stderr.strip() and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return err


def rng_normal(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n)


def f32(x: Any) -> Any:
    """``x`` rounded to float32, as plain Python floats (what the JSON shows)."""
    return np.asarray(x, dtype=np.float32).tolist()


# --------------------------------------------------------------------------------------
# eval -: one request on stdin, every field
# --------------------------------------------------------------------------------------

# Every request field at once. r depends on the seed; c is unused (a zero gradient) and in
# float32 its value 0.1 shows the dtype; the gradients of a and c are clipped together with
# the inf-norm; the intermediates are never clipped.
EVERY_FIELD = {
    "expr": "r = randn(2); h = a*b + r; h + b",
    "inputs": {"a": [3, 4], "b": [5, 6], "c": 0.1},
    "wrt": ["a", "c"],
    "grad_output": [1, 2],
    "clip_norm": 1,
    "norm_type": "inf",
    "clip_value": None,
    "id": {"run": [1, "x", None]},
    "seed": 7,
    "dtype": "float32",
}


def test_eval_stdin_every_field_json() -> None:
    r = run("eval", "-", "--json", stdin=json.dumps(EVERY_FIELD))
    assert r.code == 0, r.stderr
    d = r.json
    noise = f32(rng_normal(7, 2))
    h = f32(np.float32([15, 24]) + np.float32(noise))
    assert d["id"] == {"run": [1, "x", None]}
    assert d["expr"] == EVERY_FIELD["expr"]
    assert d["reduction"] is None  # grad_output given
    assert d["output"] == {"shape": [2], "value": f32(np.float32(h) + np.float32([5, 6]))}
    a, b, c = d["inputs"]["a"], d["inputs"]["b"], d["inputs"]["c"]
    assert a["value"] == [3.0, 4.0] and a["requires_grad"] is True
    # d(output · [1, 2]) / da = b * [1, 2] = [5, 12]; inf-norm 12; scale 1 / (12 + 1e-6)
    scale = 1.0 / (12.0 + 1e-6)
    np.testing.assert_allclose(a["grad"], [5 * scale, 12 * scale], rtol=1e-6)
    assert b == {"shape": [2], "value": [5.0, 6.0], "requires_grad": False, "grad": None}
    assert c == {"shape": [], "value": f32(0.1), "requires_grad": True, "grad": 0.0}
    assert c["value"] != 0.1  # float32, not float64
    assert d["clip"]["max_norm"] == 1.0
    assert d["clip"]["norm_type"] == "inf"  # strict JSON's spelling of the float inf
    assert d["clip"]["total_norm"] == 12.0
    assert d["clip"]["scale"] == pytest.approx(scale, rel=1e-6)
    assert set(d["clip"]) == {"max_norm", "norm_type", "total_norm", "scale"}
    assert d["intermediates"]["r"] == {"shape": [2], "value": noise, "grad": None}
    assert d["intermediates"]["h"] == {"shape": [2], "value": h, "grad": [1.0, 2.0]}
    # another seed, other numbers
    other = run("eval", "-", "--json", stdin=json.dumps({**EVERY_FIELD, "seed": 8})).json
    assert other["intermediates"]["r"]["value"] == f32(rng_normal(8, 2))


def test_eval_stdin_every_field_table() -> None:
    r = invoke("eval", "-", stdin=json.dumps(EVERY_FIELD))
    assert r.code == 0, r.stderr
    assert not r.stdout.lstrip().startswith("{")  # a table, not JSON
    for text in ("(2,)", "0.4167", "[1. 2.]"):  # a's clipped grad 5/12; h's grad
        assert text in r.stdout, r.stdout


@pytest.mark.parametrize("spelling", ['"inf"', '"Infinity"', "Infinity", '"INF"'])
def test_norm_type_inf_spellings(spelling: str) -> None:
    text = f'{{"norm_type": {spelling}, ' + json.dumps({**TUTORIAL, "clip_norm": 1})[1:]
    r = invoke("eval", "-", "--json", stdin=text)
    assert r.code == 0, r.stdout + r.stderr
    clip = r.json["clip"]
    assert clip["norm_type"] == "inf"
    assert clip["total_norm"] == 6.0  # the largest |gradient|
    assert r.json["inputs"]["a"]["grad"] == pytest.approx([5 / 6, 1.0], rel=1e-6)


def test_clip_value_and_grad_output_json_and_table() -> None:
    request = {**TUTORIAL, "grad_output": [1, 2], "clip_value": 4.5, "id": "cv"}
    d = invoke("eval", "-", "--json", stdin=json.dumps(request)).json
    assert d["id"] == "cv"
    assert d["reduction"] is None
    assert d["clip"] == {"clip_value": 4.5}
    assert d["inputs"]["a"]["grad"] == [4.5, 4.5]  # [5, 12] clamped
    assert d["inputs"]["b"]["grad"] == [4.0, 4.5]  # [4, 10] clamped
    table = invoke("eval", "-", stdin=json.dumps(request))
    assert table.code == 0
    assert "4.5" in table.stdout and "[20. 30.]" in table.stdout


def test_eval_stdin_minimal_request_is_the_spec_response() -> None:
    r = run("eval", "-", "--json", stdin=json.dumps(TUTORIAL))
    assert r.code == 0
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


def test_explicit_nulls_mean_defaults() -> None:
    request = {
        **TUTORIAL,
        "wrt": None,
        "grad_output": None,
        "clip_norm": None,
        "clip_value": None,
        "id": None,
    }
    assert invoke("eval", "-", "--json", stdin=json.dumps(request)).json == (
        invoke("eval", "-", "--json", stdin=json.dumps(TUTORIAL)).json
    )


# ---- unknown fields ----------------------------------------------------------------------


def test_unknown_fields_are_named_json() -> None:
    request = {**TUTORIAL, "wrtt": ["a"], "clipnorm": 1, "id": "typo"}
    r = run("eval", "-", "--json", stdin=json.dumps(request))
    err = assert_json_error_run(r, "input", id="typo")
    assert "wrtt" in err["message"] and "clipnorm" in err["message"]
    assert "wrtt" in r.stderr


def test_unknown_fields_are_named_table() -> None:
    r = invoke("eval", "-", stdin=json.dumps({**TUTORIAL, "grad-output": [1, 1]}))
    assert r.code == 2
    assert r.stdout == ""
    assert "grad-output" in r.stderr


# ---- ids -------------------------------------------------------------------------------

IDS = [
    0,
    -17,
    2.5,
    10**20,
    "",
    "req-1",
    "ünï ☃ \u2028",
    None,
    True,
    {"a": {"b": [1, None, "x", False]}},
    [1, "two", [3.5, None]],
    [],
    {},
]

# A request that fails with each kind (and how): the id must come back in every case.
FAILING = {
    "parse": {"expr": "a +* 2", "inputs": {"a": 1}},
    "name": {"expr": "tanhh(a)", "inputs": {"a": 1}},
    "input": {"expr": "a", "inputs": {"a": [1, [2]]}},
    "shape": {"expr": "a @ b", "inputs": {"a": [1, 2], "b": [1, 2, 3]}},
    "value": {"expr": "a[1.5]", "inputs": {"a": [1, 2]}},
    "domain": {"expr": "inv(A)", "inputs": {"A": [[1, 2], [2, 4]]}},
    "limit": {"expr": "zeros(20000, 20000)", "inputs": {}},
}


@pytest.mark.parametrize("id", IDS, ids=repr)
def test_id_echoed_on_success(id: Any) -> None:
    r = invoke("eval", "-", "--json", stdin=json.dumps({**TUTORIAL, "id": id}))
    assert r.code == 0
    assert r.json["id"] == id and type(r.json["id"]) is type(id)


@pytest.mark.parametrize("id", IDS, ids=repr)
@pytest.mark.parametrize("kind", ["parse", "shape", "input"])
def test_id_echoed_on_error(id: Any, kind: str) -> None:
    r = invoke("eval", "-", "--json", stdin=json.dumps({**FAILING[kind], "id": id}))
    assert_json_error_run(r, kind, id=id)


def test_id_echoed_when_the_request_itself_is_bad() -> None:
    # unknown field, bad "wrt", bad seed: the id still comes back
    for extra in ({"bogus": 1}, {"wrt": "a"}, {"seed": -1}, {"dtype": "float16"}):
        r = invoke("eval", "-", "--json", stdin=json.dumps({**TUTORIAL, **extra, "id": [7]}))
        assert_json_error_run(r, "input", id=[7])


def test_ids_echoed_in_batch() -> None:
    good = [{**TUTORIAL, "id": id} for id in IDS]
    bad = [{**FAILING["shape"], "id": id} for id in IDS]
    r = run("batch", stdin=ndjson(*good, *bad))
    assert r.code == 1
    out = r.lines
    assert len(out) == 2 * len(IDS)
    for doc, id in zip(out, IDS + IDS, strict=True):
        assert doc["id"] == id and type(doc["id"]) is type(id)
    assert all("error" not in doc for doc in out[: len(IDS)])
    for doc in out[len(IDS) :]:
        assert_error(doc, "shape", id=doc["id"])


# ---- error kinds and exit codes -----------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(FAILING))
def test_error_kinds_and_exit_codes(kind: str) -> None:
    request = json.dumps({**FAILING[kind], "id": kind})
    err = assert_json_error_run(invoke("eval", "-", "--json", stdin=request), kind, id=kind)
    if kind == "parse":
        assert (err["line"], err["column"]) == (1, 4)
    table = invoke("eval", "-", stdin=request)
    assert table.code == EXIT_CODE[kind]
    assert table.stdout == ""
    assert table.stderr.strip()


def test_error_exit_codes_in_a_real_process() -> None:
    for kind in ("parse", "shape"):
        r = run("eval", "-", "--json", stdin=json.dumps(FAILING[kind]))
        assert_json_error_run(r, kind)


BAD_REQUESTS = [
    ("empty stdin", "", "input"),
    ("not an object", "[1, 2]", "input"),
    ("two documents", json.dumps(TUTORIAL) * 2, "input"),
    ("truncated", json.dumps(TUTORIAL)[:-3], "input"),
    ("no expr", json.dumps({"inputs": {"a": 1}}), "input"),
    ("no inputs", json.dumps({"expr": "1"}), "input"),
    ("expr not a string", json.dumps({"expr": 3, "inputs": {}}), "input"),
    ("inputs a list", json.dumps({"expr": "1", "inputs": [1]}), "input"),
    ("wrt a string", json.dumps({**TUTORIAL, "wrt": "a"}), "input"),
    ("wrt unknown name", json.dumps({**TUTORIAL, "wrt": ["z"]}), "name"),
    ("both clips", json.dumps({**TUTORIAL, "clip_norm": 1, "clip_value": 1}), "input"),
    ("norm_type 0", json.dumps({**TUTORIAL, "clip_norm": 1, "norm_type": 0}), "input"),
    ("norm_type word", json.dumps({**TUTORIAL, "clip_norm": 1, "norm_type": "l2"}), "input"),
    ("clip_norm string", json.dumps({**TUTORIAL, "clip_norm": "1"}), "input"),
    ("negative seed", json.dumps({**TUTORIAL, "seed": -1}), "input"),
    ("float seed", json.dumps({**TUTORIAL, "seed": 1.5}), "input"),
    ("bad dtype", json.dumps({**TUTORIAL, "dtype": "float16"}), "input"),
    ("grad_output shape", json.dumps({**TUTORIAL, "grad_output": [1, 2, 3]}), "shape"),
    ("bool value", json.dumps({"expr": "a", "inputs": {"a": True}}), "input"),
    ("duplicate key", '{"expr": "a", "inputs": {"a": 1, "a": 2}}', "input"),
]


@pytest.mark.parametrize(
    ("text", "kind"), [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS]
)
def test_bad_requests(text: str, kind: str) -> None:
    assert_json_error_run(invoke("eval", "-", "--json", stdin=text), kind)


def test_eval_stdin_refuses_name_value_arguments() -> None:
    r = invoke("eval", "-", "a=1", "--json", stdin=json.dumps(TUTORIAL))
    assert_json_error_run(r, "input")


def test_grad_output_on_a_scalar_output() -> None:
    d = invoke("eval", "-", "--json", stdin=json.dumps({"expr": "x*x", "inputs": {"x": 3},
                                                        "grad_output": 2})).json  # fmt: skip
    assert d["reduction"] is None
    assert d["inputs"]["x"]["grad"] == 12.0


# --------------------------------------------------------------------------------------
# batch
# --------------------------------------------------------------------------------------


def test_batch_answers_every_line_in_order_despite_bad_lines() -> None:
    long_line = json.dumps({"expr": "sum(a)", "inputs": {"a": [1] * 600}}).encode()
    assert len(long_line) > 1000
    lines = [
        json.dumps({**TUTORIAL, "id": 1}).encode(),  # 1 ok
        b'{"expr": "sum(a)", "inputs": ',  # 2 malformed JSON
        b"",  # 3 blank: skipped
        json.dumps({"expr": "sum(a +* 2)", "inputs": {"a": 1}, "id": "p"}).encode(),  # 4
        json.dumps({**FAILING["shape"], "id": "s"}).encode(),  # 5 shape
        b"\x00\x01\x02\x1b[31mGARBAGE\x7f\x08",  # 6 binary garbage (valid UTF-8)
        long_line,  # 7 over --max-line-bytes
        b'{"expr": "sum(a)", "inputs": {"a": [1]}, "id": "\xff\xfe\xc3"}',  # 8 not UTF-8
        json.dumps({**TUTORIAL, "id": "crlf"}).encode() + b"\r",  # 9 ok, \r\n
        b"   \t ",  # 10 whitespace only: skipped
        json.dumps({"expr": "sum(q)", "inputs": {"a": 1}, "id": "n"}).encode(),  # 11 name
        b"\x89PNG\r\x1a\x00\x00\x00\rIHDR\xff",  # 12 binary garbage, not UTF-8
        json.dumps({**FAILING["domain"], "id": "d"}).encode(),  # 13 domain
        json.dumps({"expr": "sum(a)", "inputs": {"a": [1, 2]}, "id": "last"}).encode(),  # 14
    ]
    stream = b"\n".join(lines)  # the last line has no newline at the end
    r = run("batch", "--max-line-bytes", "1000", stdin=stream)
    assert r.code == 1, r.stderr
    out = r.lines
    expected = [  # (input_line, kind or None for success, id)
        (1, None, 1),
        (2, "input", None),
        (4, "parse", "p"),
        (5, "shape", "s"),
        (6, "input", None),
        (7, "limit", None),
        (8, "input", None),
        (9, None, "crlf"),
        (11, "name", "n"),
        (12, "input", None),
        (13, "domain", "d"),
        (14, None, "last"),
    ]
    assert len(out) == len(expected), r.stdout
    for doc, (line, kind, id) in zip(out, expected, strict=True):
        if kind is None:
            assert "error" not in doc, doc
            assert doc["id"] == id
        else:
            assert_error(doc, kind, id=id)
            assert doc["input_line"] == line, doc
            assert set(doc) == {"id", "error", "input_line"}
    assert out[0]["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert out[7]["inputs"]["b"]["grad"] == [4.0, 5.0]  # the \r\n line
    assert out[-1]["output"]["value"] == 3.0
    assert out[2]["error"]["line"] == 1 and out[2]["error"]["column"] == 8  # in "sum(a +* 2)"
    # A position in a one-line request is on line 1 (the newline that ends it is not a line)
    assert out[1]["error"].get("line", 1) == 1, out[1]
    assert "1,000" in out[5]["error"]["message"] or "1000" in out[5]["error"]["message"]
    assert "UTF-8" in out[6]["error"]["message"]


def test_batch_all_good_exits_0_and_skips_blank_lines() -> None:
    stream = "\r\n".join(["", json.dumps(TUTORIAL), "", "  ", json.dumps(TUTORIAL), "", ""])
    r = run("batch", stdin=stream)
    assert r.code == 0, r.stderr
    assert len(r.lines) == 2
    assert r.stderr == ""


def test_batch_empty_input() -> None:
    r = run("batch", stdin=b"")
    assert (r.code, r.stdout) == (0, "")
    r = run("batch", "--accumulate", stdin=b"\n\n")
    assert r.code == 0
    assert r.lines == [{"accumulated": {}, "requests": 0, "failed": 0}]


def test_batch_reads_a_file_like_stdin(tmp_path: Path) -> None:
    text = ndjson({**TUTORIAL, "id": 1}, FAILING["parse"], {**TUTORIAL, "wrt": ["b"]})
    path = tmp_path / "requests.ndjson"
    path.write_text(text, "utf-8")
    from_file = run("batch", str(path))
    from_stdin = run("batch", "-", stdin=text)
    assert from_file.code == from_stdin.code == 1
    assert from_file.stdout == from_stdin.stdout
    assert len(from_file.lines) == 3


def test_batch_missing_file() -> None:
    r = run("batch", "no/such/requests.ndjson")
    assert r.code == 2
    assert_error(r.json, "input")
    assert "no/such/requests.ndjson" in r.json["error"]["message"]


def test_batch_strict_json_for_non_finite_numbers() -> None:
    text = "\n".join(
        [
            '{"expr": "log(x)", "inputs": {"x": [0, -1, 1, NaN, Infinity]}, "id": 1}',
            '{"expr": "x*2", "inputs": {"x": [NaN, Infinity, "-inf", "nan"]}, "id": 2}',
            '{"expr": "sum(sqrt(x))", "inputs": {"x": [0, 4]}, "clip_norm": 1, "id": 3}',
            '{"expr": "9**9**9 * x", "inputs": {"x": 1}, "id": 4}',
            '{"expr": "x", "inputs": {"x": 1}, "id": NaN}',
            '{"expr": "x", "inputs": {"x": 1}, "id": [Infinity, -Infinity]}',
            '{"expr": "x +* 1", "inputs": {"x": NaN}, "id": -Infinity}',
        ]
    )
    r = run("batch", stdin=text)
    out = r.lines  # strict_loads would raise on a NaN/Infinity token
    assert len(out) == 7
    assert r.code == 1  # the last line is a parse error
    assert out[0]["output"]["value"] == ["-inf", "nan", 0.0, "nan", "inf"]
    assert out[0]["inputs"]["x"]["grad"] == ["inf", -1.0, 1.0, "nan", 0.0]
    assert out[1]["output"]["value"] == ["nan", "inf", "-inf", "nan"]
    assert out[1]["inputs"]["x"]["value"] == ["nan", "inf", "-inf", "nan"]
    assert out[2]["clip"]["total_norm"] == "inf"  # sqrt'(0) = inf
    assert out[3]["output"]["value"] == "inf"


def test_non_finite_clipping_warns_in_gradcli_words_only() -> None:
    # sqrt'(0) = inf: the total norm is inf, the scale 0 and inf * 0 a nan gradient, as
    # clip_grad_norm_ gives. gradcli says so in its own words; NumPy's RuntimeWarning (with
    # a gradcli source line) must not reach the user.
    args = ("eval", "sum(sqrt(x))", "x=[0, 1]", "--clip-norm", "1", "--json")
    r = run(*args)
    assert r.code == 0
    assert r.json["inputs"]["x"]["grad"] == ["nan", 0.0]
    assert r.json["clip"]["total_norm"] == "inf"
    assert "non-finite" in r.stderr
    assert "RuntimeWarning" not in r.stderr and ".py:" not in r.stderr, r.stderr
    b = run("batch", stdin=json.dumps({"expr": "sum(sqrt(x))", "inputs": {"x": [0, 1]},
                                       "clip_norm": 1}))  # fmt: skip
    assert b.code == 0
    assert "RuntimeWarning" not in b.stderr and ".py:" not in b.stderr, b.stderr


def test_batch_unknown_fields_and_file_paths_are_errors(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0]))
    text = ndjson(
        {**TUTORIAL, "wrtt": ["a"], "id": 1},
        {"expr": "sum(x)", "inputs": {"x": "@x.npy"}, "id": 2},
        {"expr": "x", "inputs": {"x": [1.0, 2.0]}, "grad_output": "@x.npy", "id": 3},
        {**TUTORIAL, "id": 4},
    )
    r = run("batch", stdin=text, cwd=tmp_path)
    assert r.code == 1
    out = r.lines
    assert "wrtt" in assert_error(out[0], "input", id=1)["message"]
    assert "@x.npy" in assert_error(out[1], "input", id=2)["message"]
    assert_error(out[2], "input", id=3)
    assert "error" not in out[3]


def test_batch_seed_and_dtype_per_request() -> None:
    text = ndjson(
        {"expr": "randn(3)", "inputs": {}, "seed": 1},
        {"expr": "randn(3)", "inputs": {}, "seed": 2},
        {"expr": "randn(3)", "inputs": {}},  # default seed 0, not the previous line's
        {"expr": "randn(3)", "inputs": {}, "seed": 1, "dtype": "float32"},
        {"expr": "x * 3", "inputs": {"x": 0.1}, "dtype": "float32"},
        {"expr": "x * 3", "inputs": {"x": 0.1}, "dtype": "float64"},
        {"expr": "x * 3", "inputs": {"x": 0.1}},
        {"expr": "x", "inputs": {"x": 1}, "seed": -1},
        {"expr": "x", "inputs": {"x": 1}, "dtype": "int32"},
    )
    r = run("batch", stdin=text)
    assert r.code == 1
    out = r.lines
    assert out[0]["output"]["value"] == rng_normal(1, 3).tolist()
    assert out[1]["output"]["value"] == rng_normal(2, 3).tolist()
    assert out[2]["output"]["value"] == rng_normal(0, 3).tolist()
    assert out[3]["output"]["value"] == f32(rng_normal(1, 3))
    assert out[4]["inputs"]["x"]["value"] == f32(0.1)
    assert out[4]["output"]["value"] == f32(np.float32(0.1) * np.float32(3))
    assert out[5]["output"]["value"] == 0.1 * 3
    assert out[6] == out[5]
    assert_error(out[7], "input")
    assert_error(out[8], "input")


# ---- --accumulate ----------------------------------------------------------------------

DATA = [  # (x, y, wrt): a small least-squares data set, one request per row
    ([1.0, 2.0], 3.0, None),
    ([0.5, -1.0], 0.25, None),
    ([2.0, 0.0], -1.0, ["w", "b"]),  # x, y constants here: they get no gradient
    ([-1.5, 3.0], 2.0, None),
]
LOSS = "h = w @ x + b; (h - y) ** 2"


def test_accumulate_is_the_gradient_of_the_summed_loss() -> None:
    w, b = [0.3, -0.7], 0.1
    lines = []
    for k, (x, y, wrt) in enumerate(DATA):
        request: dict[str, Any] = {"expr": LOSS, "inputs": {"w": w, "b": b, "x": x, "y": y}}
        if wrt is not None:
            request["wrt"] = wrt
        lines.append(json.dumps({**request, "id": k}))
        if k == 1:  # failed lines in the middle contribute nothing
            lines.append(json.dumps({**request, "inputs": {**request["inputs"], "w": [1, 2, 3]}}))
            lines.append('{"expr": "(w @ x - y) **", "inputs": {}}')
            lines.append("not json")
    r = run("batch", "--accumulate", stdin="\n".join(lines) + "\n")
    assert r.code == 1, r.stderr
    out = r.lines
    assert len(out) == len(lines) + 1
    final = out[-1]
    assert set(final) == {"accumulated", "requests", "failed"}
    assert (final["requests"], final["failed"]) == (4, 3)

    # The same loss summed over the data set, as one program, one backward().
    terms, inputs, wrt = [], {"w": w, "b": b}, ["w", "b"]
    for k, (x, y, row_wrt) in enumerate(DATA):
        terms.append(f"(w @ x{k} + b - y{k}) ** 2")
        inputs |= {f"x{k}": x, f"y{k}": y}
        if row_wrt is None:
            wrt += [f"x{k}", f"y{k}"]
    total = gradcli.evaluate(" + ".join(terms), inputs, wrt=wrt)
    acc = final["accumulated"]
    assert set(acc) == {"w", "b", "x", "y"}
    np.testing.assert_allclose(acc["w"], total.grads["w"], rtol=1e-12)
    np.testing.assert_allclose(acc["b"], total.grads["b"], rtol=1e-12)
    for name in ("x", "y"):
        summed = sum(total.grads[f"{name}{k}"] for k, row in enumerate(DATA) if row[2] is None)
        np.testing.assert_allclose(acc[name], summed, rtol=1e-12)
    # and it is the sum of the per-line gradients the stream printed
    ok = [doc for doc in out[:-1] if "error" not in doc]
    assert [doc["id"] for doc in ok] == [0, 1, 2, 3]
    np.testing.assert_allclose(acc["w"], np.sum([d["inputs"]["w"]["grad"] for d in ok], axis=0))


def test_accumulate_twice_the_same_request_and_exit_0() -> None:
    r = run("batch", "--accumulate", stdin=ndjson(TUTORIAL, TUTORIAL))
    assert r.code == 0
    assert r.lines[-1] == {
        "accumulated": {"a": [10.0, 12.0], "b": [8.0, 10.0]},
        "requests": 2,
        "failed": 0,
    }


def test_accumulate_all_failed() -> None:
    r = run("batch", "--accumulate", stdin=ndjson(FAILING["shape"], FAILING["parse"]))
    assert r.code == 1
    assert r.lines[-1] == {"accumulated": {}, "requests": 0, "failed": 2}


# ---- a coprocess -----------------------------------------------------------------------


class Coprocess:
    """One ``gradcli batch`` process; :meth:`ask` writes one line and waits for one line."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gradcli", "batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=harness.gradcli_env(),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def ask(self, request: Any, timeout: float = 60) -> Any:
        assert self.proc.stdin is not None
        # One line, flushed; stdin stays open, so only per-line flushing can answer it.
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            pytest.fail(f"no answer within {timeout} s: the response line was not flushed")
        assert line.endswith(b"\n")
        return strict_loads(line)

    def close(self) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read()


def test_coprocess_round_trip() -> None:
    co = Coprocess()
    try:
        for k in range(3):
            d = co.ask({"expr": "sum(a*b)", "inputs": {"a": [k, 1], "b": [2, 3]}, "id": k})
            assert d["id"] == k
            assert d["output"]["value"] == 2 * k + 3
            assert d["inputs"]["a"]["grad"] == [2.0, 3.0]
        assert co.lines.empty()
    finally:
        code, err = co.close()
    assert code == 0, err
    assert co.lines.empty()  # nothing more after stdin closed


def test_coprocess_error_answers_are_flushed_too() -> None:
    co = Coprocess()
    try:
        assert co.ask({**TUTORIAL, "id": 1})["id"] == 1
        assert_error(co.ask({**FAILING["shape"], "id": 2}), "shape", id=2)
        assert_error(co.ask({"expr": "x", "inputs": {"x": 1}, "bogus": 0}), "input")
        assert co.ask({**TUTORIAL, "id": 4})["inputs"]["a"]["grad"] == [5.0, 6.0]
    finally:
        code, err = co.close()
    assert code == 1, err


# ---- a reader that goes away --------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("request_", [TUTORIAL, FAILING["shape"]], ids=["good", "bad"])
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_batch_into_head_exits_quietly(tmp_path: Path, request_: Any, source: str) -> None:
    path = tmp_path / "many.ndjson"
    path.write_text(ndjson(*[request_] * 20000), "utf-8")  # far more output than a pipe holds
    gradcli_cmd = f'"{sys.executable}" -m gradcli batch'
    if source == "file":
        script = f'{gradcli_cmd} "{path}" | head -n 1; echo "status=${{PIPESTATUS[0]}}"'
    else:
        script = f'cat "{path}" | {gradcli_cmd} | head -n 1; echo "status=${{PIPESTATUS[1]}}"'
    proc = subprocess.run(
        script,
        shell=True,
        executable=shutil.which("bash"),
        capture_output=True,
        text=True,
        cwd=REPO,
        env=harness.gradcli_env(),
        timeout=120,
    )
    first, status = proc.stdout.splitlines()
    strict_loads(first)
    for noise in ("Traceback", "BrokenPipe", "Broken pipe", "Exception ignored", "Errno"):
        assert noise not in proc.stderr, proc.stderr
    assert proc.stderr == ""
    # Quietly: 0 (or death by SIGPIPE, 128 + 13, as `cat` does) — not 1, which docs/json.md reserves
    # for "a line failed" ("Exit codes and error kinds") (and, for the good requests, none did).
    if request_ is TUTORIAL:
        assert status in ("status=0", "status=141"), status
    else:
        assert status in ("status=0", "status=1", "status=141"), status


# --------------------------------------------------------------------------------------
# @file inputs
# --------------------------------------------------------------------------------------


@pytest.fixture
def value_files(tmp_path: Path) -> Path:
    np.save(tmp_path / "a.npy", np.array([[1.0, 2.0], [3.0, 4.0]]))
    (tmp_path / "b.csv").write_text("0.5,-1\n2, 3\n", "utf-8")
    (tmp_path / "c.json").write_text("[1, 2.5, NaN]", "utf-8")
    (tmp_path / "d.txt").write_text("# a comment\n1 2 3\n", "utf-8")
    (tmp_path / "e.csv").write_text("7\n8\n9\n", "utf-8")  # one column: a vector
    return tmp_path


def test_file_inputs_through_the_cli(value_files: Path) -> None:
    r = run(
        "eval", "sum(a * b) + sum(c[:2]) + d @ e",
        "a=@a.npy", "b=@b.csv", "c=@c.json", "d=@d.txt", "e=@e.csv", "--json",
        cwd=value_files,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    d = r.json["inputs"]
    assert d["a"]["value"] == [[1.0, 2.0], [3.0, 4.0]]
    assert d["b"]["value"] == [[0.5, -1.0], [2.0, 3.0]]
    assert d["c"]["value"] == [1.0, 2.5, "nan"]
    assert d["d"]["value"] == [1.0, 2.0, 3.0]
    assert d["e"]["value"] == [7.0, 8.0, 9.0]
    assert d["a"]["grad"] == d["b"]["value"]
    assert d["b"]["grad"] == d["a"]["value"]
    assert d["c"]["grad"] == [1.0, 1.0, 0.0]
    assert d["d"]["grad"] == [7.0, 8.0, 9.0]
    assert r.json["output"]["value"] == (0.5 - 2 + 6 + 12) + 3.5 + (7 + 16 + 27)


def test_file_inputs_float32(value_files: Path) -> None:
    r = run("eval", "sum(b)", "b=@b.csv", "--dtype", "float32", "--json", cwd=value_files)
    assert r.code == 0
    assert r.json["inputs"]["b"]["value"] == [[0.5, -1.0], [2.0, 3.0]]


def _truncated_npy(path: Path) -> None:
    np.save(path, np.arange(100.0))
    path.write_bytes(path.read_bytes()[:-40])


def _object_npy(path: Path) -> None:
    np.save(path, np.array([1, "two", None], dtype=object), allow_pickle=True)


FILE_ERRORS = [  # (name, make the file, the file, words the message must contain)
    ("missing npy", None, "missing.npy", ["missing.npy", "no such file"]),
    ("missing csv", None, "gone.csv", ["gone.csv", "no such file"]),
    ("truncated npy", _truncated_npy, "cut.npy", ["cut.npy", "truncated"]),
    ("object npy", _object_npy, "obj.npy", ["obj.npy", "object"]),
    ("not npy", lambda p: p.write_bytes(b"hello"), "fake.npy", ["fake.npy", ".npy"]),
    (
        "bad csv cell",
        lambda p: p.write_text("1,2\n3,abc\n"),
        "bad.csv",
        ["bad.csv", "line 2", "abc"],
    ),
    ("ragged csv", lambda p: p.write_text("1 2\n3\n"), "rag.txt", ["rag.txt", "line 2"]),
    ("empty csv cell", lambda p: p.write_text("1,,2\n"), "hole.csv", ["hole.csv", "line 1"]),
    ("bad json", lambda p: p.write_text("[1, 2"), "bad.json", ["bad.json"]),
    ("json object", lambda p: p.write_text('{"a": 1}'), "obj.json", ["obj.json"]),
    ("unknown type", lambda p: p.write_text("1"), "x.dat", ["x.dat", ".npy"]),
    ("a directory", lambda p: p.mkdir(), "dir.csv", ["dir.csv", "directory"]),
]


@pytest.mark.parametrize(
    ("make", "filename", "words"), [f[1:] for f in FILE_ERRORS], ids=[f[0] for f in FILE_ERRORS]
)
def test_file_input_errors_name_the_file_and_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any, filename: str, words: list[str]
) -> None:
    if make is not None:
        make(tmp_path / filename)
    monkeypatch.chdir(tmp_path)
    r = invoke("eval", "sum(x)", f"x=@{filename}", "--json")
    err = assert_json_error_run(r, "input")
    for word in words:
        assert word.lower() in err["message"].lower(), err["message"]
    table = invoke("eval", "sum(x)", f"x=@{filename}")
    assert table.code == 2
    assert filename in table.stderr


def test_file_input_error_in_a_real_process(tmp_path: Path) -> None:
    _truncated_npy(tmp_path / "cut.npy")
    r = run("eval", "sum(x)", "x=@cut.npy", cwd=tmp_path)
    assert r.code == 2
    assert "cut.npy" in r.stderr and "truncated" in r.stderr


def test_request_values_are_never_file_paths(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0]))
    (tmp_path / "x.csv").write_text("1,2\n")
    for request in (
        {"expr": "sum(x)", "inputs": {"x": "@x.npy"}, "id": 1},
        {"expr": "sum(x)", "inputs": {"x": "@x.csv"}, "id": 1},
        {"expr": "sum(x)", "inputs": {"x": ["@x.npy"]}, "id": 1},
        {"expr": "x", "inputs": {"x": [1, 2]}, "grad_output": "@x.npy", "id": 1},
    ):
        r = run("eval", "-", "--json", stdin=json.dumps(request), cwd=tmp_path)
        assert_json_error_run(r, "input", id=1)
    # --inputs is a JSON document too: its values are not file names either
    (tmp_path / "inputs.json").write_text('{"x": "@x.npy"}')
    r = run("eval", "sum(x)", "--inputs", "inputs.json", "--json", cwd=tmp_path)
    assert_json_error_run(r, "input")


# --------------------------------------------------------------------------------------
# --save
# --------------------------------------------------------------------------------------


def test_save_npz_matches_the_json_response(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    r = run(
        "eval", "h = tanh(W @ x); k = h * c; sum(k ** 2)",
        "W=[[1, -2], [0.5, 3]]", "x=[0.25, -0.5]", "c=[2, 3]",
        "--json", "--save", str(out),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    d = r.json
    with np.load(out, allow_pickle=False) as saved:
        assert set(saved.files) == {
            "output", "grad_W", "grad_x", "grad_c", "grad_h", "grad_k",
        }  # fmt: skip
        np.testing.assert_array_equal(saved["output"], d["output"]["value"])
        assert saved["output"].shape == ()
        for name in ("W", "x", "c"):
            np.testing.assert_array_equal(saved[f"grad_{name}"], d["inputs"][name]["grad"])
            assert saved[f"grad_{name}"].dtype == np.float64
        for name in ("h", "k"):
            np.testing.assert_array_equal(saved[f"grad_{name}"], d["intermediates"][name]["grad"])


def test_save_npz_only_what_has_a_gradient(tmp_path: Path) -> None:
    out = tmp_path / "wrt.npz"
    request = {
        "expr": "h = tanh(W @ x); k = c * 2; sum(h * k)",
        "inputs": {"W": [[1, -2], [0.5, 3]], "x": [0.25, -0.5], "c": [2, 3]},
        "wrt": ["W"],
        "dtype": "float32",
    }
    r = run("eval", "-", "--json", "--save", str(out), stdin=json.dumps(request))
    assert r.code == 0, r.stderr
    d = r.json
    with np.load(out, allow_pickle=False) as saved:
        # x and c are constants, and k depends on no --wrt input
        assert set(saved.files) == {"output", "grad_W", "grad_h"}
        assert saved["grad_W"].dtype == np.float32
        assert saved["grad_W"].tolist() == d["inputs"]["W"]["grad"]
        assert saved["grad_h"].tolist() == d["intermediates"]["h"]["grad"]
        assert saved["output"].tolist() == d["output"]["value"]


# --------------------------------------------------------------------------------------
# The Python API
# --------------------------------------------------------------------------------------


def test_evaluate_result() -> None:
    r = gradcli.evaluate("h = a*b; sum(h + b)", {"a": [3, 4], "b": [5, 6]}, wrt=["a"])
    assert isinstance(r, gradcli.Result)
    assert isinstance(r.value, np.ndarray) and r.value.shape == ()
    assert r.value == 50.0
    assert r.grads["a"].tolist() == [5.0, 6.0]
    assert r.grads["b"] is None
    value, grad = r.intermediates["h"]
    assert value.tolist() == [15.0, 24.0] and grad.tolist() == [1.0, 1.0]
    assert r.reduction is None
    assert r.clip is None


def test_evaluate_reduction_clip_and_constant_intermediates() -> None:
    r = gradcli.evaluate("k = b * 2; a * k", {"a": [3, 4], "b": [5, 6]}, wrt=["a"], clip_norm=1.0)
    assert r.reduction == "sum"
    assert r.intermediates["k"][1] is None  # depends on no wrt input
    assert r.clip is not None
    assert set(r.clip) == {"max_norm", "norm_type", "total_norm", "scale"}
    assert r.clip["max_norm"] == 1.0 and r.clip["norm_type"] == 2.0
    assert r.clip["total_norm"] == pytest.approx(math.hypot(10, 12))
    assert r.clip["scale"] == pytest.approx(1 / (math.hypot(10, 12) + 1e-6))
    np.testing.assert_allclose(r.grads["a"], np.array([10, 12]) * r.clip["scale"])
    r = gradcli.evaluate("a * b", {"a": [3, 4], "b": [5, 6]}, clip_value=5.5)
    assert r.clip == {"clip_value": 5.5}
    assert r.grads["a"].tolist() == [5.0, 5.5]
    r = gradcli.evaluate("a * b", {"a": [3, 4], "b": [5, 6]}, grad_output=[1, -1])
    assert r.reduction is None
    assert r.grads["a"].tolist() == [5.0, -6.0]


def test_evaluate_keyword_options() -> None:
    r = gradcli.evaluate("x * randn(2)", {"x": 0.1}, seed=3, dtype="float32")
    assert r.value.dtype == np.float32
    assert r.value.tolist() == f32(np.float32(0.1) * np.float32(rng_normal(3, 2)))
    r = gradcli.evaluate("a * b", {"a": [3, 4], "b": [5, 6]}, clip_norm=1, norm_type="inf")
    assert r.clip is not None and r.clip["norm_type"] == math.inf and r.clip["total_norm"] == 6


def test_evaluate_reports_floating_point_trouble_in_result_warnings() -> None:
    # Non-finite values are reported in Result.warnings, never as a NumPy RuntimeWarning
    # (which `python -W error` would turn into an exception).
    for expr, kwargs in (
        ("sum(sqrt(x))", {"clip_norm": 1}),
        ("sum(log(x))", {}),
        ("sum(x / x)", {"clip_value": 1}),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = gradcli.evaluate(expr, {"x": [0.0, 1.0]}, **kwargs)
        assert r.warnings, expr


def test_evaluate_takes_arrays_and_leaves_them_alone() -> None:
    a = np.array([3.0, 4.0])
    r = gradcli.evaluate("a * a", {"a": a})
    assert r.grads["a"].tolist() == [6.0, 8.0]
    r.grads["a"][0] = 99
    r.inputs["a"][0] = 99
    assert a.tolist() == [3.0, 4.0]


# The same request, from the CLI and from evaluate(): to_json() is exactly the response.
SAME_REQUESTS = [
    TUTORIAL,
    {**TUTORIAL, "wrt": ["b"]},
    {**TUTORIAL, "grad_output": [1, 2]},
    {**TUTORIAL, "clip_norm": 1},
    {**TUTORIAL, "clip_norm": 1, "norm_type": 1},
    {**TUTORIAL, "clip_value": 4.5},
    {"expr": "h = tanh(W @ x); sum(h ** 2)", "inputs": {"W": [[1, 2], [3, 4]], "x": [1, -1]}},
    {"expr": "log(x) * randn(3)", "inputs": {"x": [0, -1, 2]}, "seed": 4, "dtype": "float32"},
    {"expr": "x", "inputs": {"x": [[1, 2]]}, "grad_output": [[3, 4]]},
    {**TUTORIAL, "clip_norm": 1, "norm_type": "inf"},
    {"expr": "sum(sqrt(x))", "inputs": {"x": [0, 1]}, "clip_norm": 1},
]


def api(request: dict[str, Any]) -> gradcli.Result:
    """``gradcli.evaluate`` called with a JSON request's fields as its keywords."""
    options = {k: v for k, v in request.items() if k not in ("expr", "inputs")}
    return gradcli.evaluate(request["expr"], request["inputs"], **options)


def test_to_json_equals_the_cli_response() -> None:
    r = run("batch", stdin=ndjson(*SAME_REQUESTS))
    assert r.code == 0, r.stdout
    cli = r.lines
    assert len(cli) == len(SAME_REQUESTS)
    for request, response in zip(SAME_REQUESTS, cli, strict=True):
        assert api(request).to_json() == response, request
    # and `eval -` answers as batch does
    one = run("eval", "-", "--json", stdin=json.dumps(SAME_REQUESTS[-1]))
    assert one.json == cli[-1]


@pytest.mark.parametrize("request_", SAME_REQUESTS, ids=range(len(SAME_REQUESTS)))
def test_to_json_is_strict_json(request_: Any) -> None:
    doc = api(request_).to_json()
    text = json.dumps(doc, allow_nan=False)  # raises on a float nan/inf anywhere
    assert strict_loads(text) == doc


ERROR_CLASSES = {
    "parse": gradcli.ParseError,
    "name": gradcli.NamingError,
    "shape": gradcli.ShapeError,
    "value": gradcli.InvalidValueError,
    "domain": gradcli.DomainError,
    "input": gradcli.InputError,
    "limit": gradcli.LimitError,
}


def test_one_error_class_per_kind() -> None:
    assert len(set(ERROR_CLASSES.values())) == len(ERROR_CLASSES) == len(EXIT_CODE)
    for kind, cls in ERROR_CLASSES.items():
        assert issubclass(cls, gradcli.GradcliError)
        assert cls is not gradcli.GradcliError
        assert cls.kind == kind


@pytest.mark.parametrize("kind", sorted(FAILING))
def test_evaluate_raises_the_typed_error(kind: str) -> None:
    request = FAILING[kind]
    with pytest.raises(gradcli.GradcliError) as info:
        gradcli.evaluate(request["expr"], request["inputs"])
    e = info.value
    assert type(e) is ERROR_CLASSES[kind]
    assert e.kind == kind
    assert isinstance(e.message, str) and e.message
    assert str(e) == e.message
    for pos in (e.line, e.column):
        assert pos is None or (isinstance(pos, int) and pos >= 1)
    assert e.to_json()["kind"] == kind


def test_error_positions_are_one_based_line_and_column() -> None:
    with pytest.raises(gradcli.ParseError) as info:
        gradcli.evaluate("h = a * 2\nk = h +* 1\nk", {"a": 1})
    assert (info.value.line, info.value.column) == (2, 8)  # the '*' after '+'
    with pytest.raises(gradcli.NamingError) as name:
        gradcli.evaluate("a + tanhh(a)", {"a": 1})
    assert (name.value.line, name.value.column) == (1, 5)
    assert "tanh" in name.value.message  # did you mean


@pytest.mark.parametrize(
    ("kwargs", "cls"),
    [
        ({"wrt": ["z"]}, gradcli.NamingError),
        ({"dtype": "float16"}, gradcli.InputError),
        ({"clip_norm": 1, "clip_value": 1}, gradcli.InputError),
        ({"norm_type": -2, "clip_norm": 1}, gradcli.InputError),
        ({"grad_output": [1, 2, 3]}, gradcli.ShapeError),
        ({"max_elements": 1}, gradcli.LimitError),
    ],
)
def test_evaluate_option_errors(kwargs: dict[str, Any], cls: type) -> None:
    with pytest.raises(cls):
        gradcli.evaluate("a * b", {"a": [3, 4], "b": [5, 6]}, **kwargs)
