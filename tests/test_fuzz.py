"""Fuzzing the parser, the evaluator and the command line (issue 7): random byte strings,
random token soups (names, numbers, operators, brackets, commas, ``;``, new lines, keywords,
stray characters) and deeply nested constructs. Only clean errors are allowed: a
``GradcliError`` from the API, exit codes 0, 1 or 2 from the CLI, never a traceback and never
an "internal error".

A fast profile runs by default; the long one is marked ``slow`` (``pytest -m slow``), or runs
in a default run with ``GRADCLI_LONG=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import token_soups
from typer.testing import CliRunner

import gradcli
from gradcli import language
from gradcli.cli import app
from gradcli.errors import KINDS

REPO = Path(__file__).resolve().parent.parent
EXIT_CODE = {"parse": 2, "name": 2, "input": 2, "shape": 1, "domain": 1, "value": 1, "limit": 1}
MAX_ELEMENTS = 10**5  # random programs must not allocate gigabytes: `ones(1e3, 1e3, 99)`
INPUTS = {"x": 0.5, "y": [1.0, -2.0, 3.0], "W": [[1.0, 2.0], [3.0, -4.0]], "T": [[0.5]]}
INPUT_ARGS = [f"{k}={json.dumps(v)}" for k, v in INPUTS.items()]

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
_SCALE = float(os.environ.get("GRADCLI_LONG_SCALE", "1"))
long_profile = (lambda f: f) if os.environ.get("GRADCLI_LONG") else pytest.mark.slow


def fast(n: int) -> Any:
    return settings(max_examples=n, deadline=None, suppress_health_check=_SUPPRESS)


def long(n: int) -> Any:
    return settings(max_examples=int(n * _SCALE), deadline=None, suppress_health_check=_SUPPRESS)


def check_error(err: gradcli.GradcliError, text: str | None = None) -> None:
    assert err.kind in KINDS and err.exit_code == EXIT_CODE[err.kind], (err.kind, err.exit_code)
    assert isinstance(err.message, str) and err.message.strip()
    assert "internal error" not in err.message, err.message
    if err.line is not None:
        assert isinstance(err.line, int) and err.line >= 1, err.line
        if text is not None:
            assert err.line <= len(text.split("\n")), (err.line, text)
    if err.column is not None:
        assert isinstance(err.column, int) and err.column >= 1, err.column
    json.dumps(err.to_json(), allow_nan=False)


def parse_cleanly(text: str) -> None:
    try:
        language.parse(text)
        language.compile_program(text)
    except gradcli.GradcliError as err:
        check_error(err, text)


def evaluate_cleanly(text: str, inputs: dict[str, Any] | None = None) -> None:
    try:
        r = gradcli.evaluate(text, INPUTS if inputs is None else inputs, max_elements=MAX_ELEMENTS)
    except gradcli.GradcliError as err:
        check_error(err, text)
        return
    json.dumps(r.to_json(), allow_nan=False)


RUNNER = CliRunner()


def cli_cleanly(args: list[str], stdin: str | bytes | None = None, *, lines: int | None = 1) -> Any:
    """Run the CLI in-process; a clean outcome: exit 0/1/2, no traceback, one JSON line."""
    result = RUNNER.invoke(app, args, input=stdin)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{args!r}: uncaught {exc!r}"
    out, err = result.stdout, result.stderr
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, err)
    assert "Traceback" not in out + err, err
    assert "internal error" not in out + err, (args, err)
    if err.strip():
        first = next(line for line in err.splitlines() if line.strip())
        assert first.startswith(("error", "warning", "note")), (args, first)
    if lines is not None:
        assert len(out.splitlines()) == lines, (args, out)
    return [json.loads(line, parse_constant=_refuse) for line in out.splitlines()]


def _refuse(token: str) -> Any:
    raise AssertionError(f"non-standard JSON token {token}")


# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

random_bytes = st.binary(max_size=200)
decodings = st.sampled_from(
    [("utf-8", "replace"), ("utf-8", "surrogateescape"), ("latin-1", "strict")]
)
# deeply nested constructs of every kind the grammar allows
_NEST = [
    ("(", ")"), ("[", "]"), ("-", ""), ("+", ""), ("tanh(", ")"), ("sum(", ")"),
    ("x**", ""), ("[x, ", "]"), ("(x, ", ")"), ("", "[0]"), ("", ".T"), ("abs(-", ")"),
    ("-(", ")**2"), ("where(x, ", ", 1)"),
]  # fmt: skip
deep = st.builds(
    lambda parts, n, core: (
        "".join(o for o, _ in parts) * n + core + "".join(c for _, c in reversed(parts)) * n
    ),
    st.lists(st.sampled_from(_NEST), min_size=1, max_size=2),
    st.integers(1, 300),
    st.sampled_from(["x", "1", "y", "W", "[1, 2]", "0.5"]),
)
json_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)
requests = st.fixed_dictionaries(
    {"expr": token_soups(max_tokens=12), "inputs": st.just(INPUTS)},
    optional={
        "wrt": st.lists(st.sampled_from(["x", "y", "W", "q"]), max_size=2) | json_documents,
        "grad_output": json_documents,
        "clip_norm": st.floats(0, 5) | json_documents,
        "clip_value": st.floats(0, 5) | json_documents,
        "norm_type": st.sampled_from([2, 1, "inf"]) | json_documents,
        "seed": st.integers(0, 10) | json_documents,
        "id": json_documents,
    },
)


# --------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------


def _bytes_to_text(data: bytes, decoding: tuple[str, str]) -> str:
    return data.decode(*decoding)


@fast(300)
@given(random_bytes, decodings)
def test_parser_on_random_bytes(data: bytes, decoding: tuple[str, str]) -> None:
    parse_cleanly(_bytes_to_text(data, decoding))


@fast(300)
@given(token_soups())
def test_parser_on_token_soups(text: str) -> None:
    parse_cleanly(text)


@long_profile
@long(20_000)
@given(random_bytes, decodings)
def test_parser_on_random_bytes_long(data: bytes, decoding: tuple[str, str]) -> None:
    parse_cleanly(_bytes_to_text(data, decoding))


@long_profile
@long(20_000)
@given(token_soups(max_tokens=60))
def test_parser_on_token_soups_long(text: str) -> None:
    parse_cleanly(text)


# --------------------------------------------------------------------------------------
# The evaluator
# --------------------------------------------------------------------------------------


@fast(200)
@given(token_soups())
def test_evaluate_on_token_soups(text: str) -> None:
    evaluate_cleanly(text)


@fast(60)
@given(deep)
def test_evaluate_on_deep_nesting(text: str) -> None:
    evaluate_cleanly(text)


@fast(100)
@given(random_bytes, decodings)
def test_evaluate_on_random_bytes(data: bytes, decoding: tuple[str, str]) -> None:
    evaluate_cleanly(_bytes_to_text(data, decoding))


@long_profile
@long(20_000)
@given(token_soups(max_tokens=60))
def test_evaluate_on_token_soups_long(text: str) -> None:
    evaluate_cleanly(text)


@long_profile
@long(2_000)
@given(deep)
def test_evaluate_on_deep_nesting_long(text: str) -> None:
    evaluate_cleanly(text)


# --------------------------------------------------------------------------------------
# The command line (in-process)
# --------------------------------------------------------------------------------------


def _eval_options() -> set[str]:
    import typer

    command = typer.main.get_command(app).commands["eval"]  # type: ignore[attr-defined]
    names = {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    return names | {"-h", "--help"}


EVAL_OPTIONS = _eval_options()


def _cli_soup(text: str, as_value: bool) -> None:
    # `eval -h` is the help flag and `--` ends the options, whatever docs/cli.md ("Options
    # and arguments") says about expressions that begin with `-`: such texts are
    # command-line syntax, not programs
    if not as_value:
        assume(text.strip() != "--" and text.split("=", 1)[0].strip() not in EVAL_OPTIONS)
    if as_value:
        args = ["eval", "sum(v) + x", f"v={text}", "x=1", "--json"]
    else:
        args = ["eval", text, *INPUT_ARGS, "--json"]
    cli_cleanly([*args, "--max-elements", str(MAX_ELEMENTS)])


@fast(80)
@given(token_soups(), st.booleans())
def test_cli_on_token_soups(text: str, as_value: bool) -> None:
    _cli_soup(text, as_value)


@long_profile
@long(8_000)
@given(token_soups(max_tokens=40), st.booleans())
def test_cli_on_token_soups_long(text: str, as_value: bool) -> None:
    _cli_soup(text, as_value)


def _cli_file(data: bytes, tmp: Path) -> None:
    path = tmp / "program.gc"
    path.write_bytes(data)
    cli_cleanly(["eval", "-f", str(path), *INPUT_ARGS, "--json", "--max-elements", "100000"])


@fast(40)
@given(random_bytes)
def test_cli_on_random_program_files(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    _cli_file(data, tmp_path_factory.getbasetemp())


def _cli_stdin(data: bytes) -> None:
    cli_cleanly(["eval", "-", "--json", "--max-elements", str(MAX_ELEMENTS)], stdin=data)


@fast(40)
@given(random_bytes | json_documents.map(lambda d: json.dumps(d).encode()))
def test_cli_eval_stdin_on_random_documents(data: bytes) -> None:
    _cli_stdin(data)


def _cli_batch(lines: list[Any]) -> None:
    raw = []
    for item in lines:
        raw.append(item if isinstance(item, bytes) else json.dumps(item).encode())
    stdin = b"\n".join(r.replace(b"\n", b" ").replace(b"\r", b" ") for r in raw) + b"\n"
    expected = sum(1 for r in raw if r.replace(b"\n", b" ").replace(b"\r", b" ").strip())
    responses = cli_cleanly(
        ["batch", "--max-elements", str(MAX_ELEMENTS)], stdin=stdin, lines=expected
    )
    for response in responses:
        assert isinstance(response, dict) and ("error" in response or "output" in response)


batch_lines = st.lists(requests | random_bytes | json_documents, min_size=1, max_size=6)


@fast(30)
@given(batch_lines)
def test_cli_batch_on_random_lines(lines: list[Any]) -> None:
    _cli_batch(lines)


@long_profile
@long(3_000)
@given(batch_lines)
def test_cli_batch_on_random_lines_long(lines: list[Any]) -> None:
    _cli_batch(lines)


@long_profile
@long(3_000)
@given(random_bytes | json_documents.map(lambda d: json.dumps(d).encode()))
def test_cli_eval_stdin_on_random_documents_long(data: bytes) -> None:
    _cli_stdin(data)


# --------------------------------------------------------------------------------------
# A few real processes
# --------------------------------------------------------------------------------------


def _subprocess(args: list[str | bytes], stdin: bytes | None = None) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gradcli", *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 1, 2), (args, proc.returncode, err)
    assert "Traceback" not in out + err, err
    assert "internal error" not in out + err, err
    if err.strip():
        assert err.lstrip().startswith(("error", "warning", "note")), err


@pytest.mark.parametrize(
    "program", [b"x[[[[", b"\xff\xfe(x", b"1e999 ** 1e999 - inf", b"\x00\x01(", b"x.T.__dict__"]
)
def test_subprocess_on_nasty_programs(program: bytes, tmp_path: Path) -> None:
    if b"\x00" in program:  # a NUL cannot be in an argument (the OS refuses it): a file
        path = tmp_path / "program.gc"
        path.write_bytes(program)
        _subprocess(["eval", "-f", str(path), *INPUT_ARGS])
    else:
        _subprocess(["eval", program, *INPUT_ARGS, "--json"])
    request = {"expr": program.decode("latin-1"), "inputs": INPUTS}
    _subprocess(["batch"], stdin=program + b"\n" + json.dumps(request).encode() + b"\n")


@fast(3)
@given(token_soups(max_tokens=15))
def test_subprocess_on_token_soups(text: str) -> None:
    _subprocess(["eval", text.replace("\x00", " "), *INPUT_ARGS, "--json"])


@long_profile
@long(200)
@given(token_soups(max_tokens=30))
def test_subprocess_on_token_soups_long(text: str) -> None:
    _subprocess(["eval", text.replace("\x00", " "), *INPUT_ARGS, "--json"])


def test_inputs_used_by_the_fuzzers_are_valid() -> None:
    r = gradcli.evaluate("x * sum(y) + sum(W) + sum(T)", INPUTS)
    assert float(r.value) == np.float64(0.5 * 2.0 + 2.0 + 0.5)
