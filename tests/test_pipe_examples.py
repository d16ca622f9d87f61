"""The pipe and script examples (examples/pipeline.sh, requests.ndjson, coprocess.py,
evaluate_api.py) run as a user would run them, and print the numbers their comments promise.

Each runs in a subprocess at the repository root with ``GRADCLI="<python> -m gradcli"`` (so
no installed ``gradcli`` is needed) and the repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def strict_loads(text: str) -> Any:
    """json.loads that refuses the NaN/Infinity tokens, as a strict JSON reader does."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"):
        env.pop(var, None)
    env["NO_COLOR"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env["GRADCLI"] = f"{sys.executable} -m gradcli"
    env["PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        args,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env=_env(),
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _assert_names_both_shapes(message: str) -> None:
    """A shape error names the operation and both shapes (docs/language.md, "Errors")."""
    assert "matmul" in message or "@" in message, message
    assert "(2,)" in message and "(3,)" in message, message


def _lines_after(heading: str, stdout: str) -> list[str]:
    """The output lines of one ``### heading`` section of a shell example."""
    sections = stdout.split("\n### ")
    found = [s for s in sections if s.startswith(heading)]
    assert len(found) == 1, f"no section {heading!r} in:\n{stdout}"
    return [line for line in found[0].splitlines()[1:] if line.strip()]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_pipeline_sh() -> None:
    proc = _run(["bash", str(EXAMPLES / "pipeline.sh")])
    assert proc.returncode == 0, proc.stderr

    assert _lines_after("1.", proc.stdout) == [
        "id: tutorial",
        "output: [20.0, 30.0] reduced with sum",
        "grad of a: [5.0, 6.0]",
        "grad of b: [4.0, 5.0]",
    ]

    error, status = _lines_after("2.", proc.stdout)
    error = strict_loads(error)
    assert error["id"] == 7
    assert error["error"]["kind"] == "shape"
    _assert_names_both_shapes(error["error"]["message"])
    assert status == "exit status: 1"

    lines = _lines_after("3.", proc.stdout)
    assert lines[:3] == [
        "tutorial: output [20.0, 30.0], grads {'a': [5.0, 6.0], 'b': [4.0, 5.0]}",
        "2: output 50.0, grads {'a': [5.0, 6.0], 'b': None}",
        "vjp: output [20.0, 30.0], grads {'a': [5.0, 12.0], 'b': [4.0, 10.0]}",
    ]
    assert lines[3].startswith("oops: shape error on line 4: ")
    _assert_names_both_shapes(lines[3])
    # clip_grad_norm_: every gradient times 1 / (sqrt(102) + 1e-6)
    assert lines[4].startswith("clipped: output 50.0, grads {'a': [0.4950737")
    assert lines[5] == "batch exit status: 1 (one line failed; every line was answered)"
    assert len(lines) == 6


def test_requests_ndjson_through_batch() -> None:
    path = EXAMPLES / "requests.ndjson"
    requests = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert len(requests) == 5
    # The file shows the optional request fields it promises.
    fields = {k for r in requests for k in r}
    assert {"id", "wrt", "grad_output", "clip_norm"} <= fields

    proc = _run([sys.executable, "-m", "gradcli", "batch", str(path)])
    assert proc.returncode == 1  # one deliberately bad line
    responses = [strict_loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in responses] == [r["id"] for r in requests]
    failed = [r for r in responses if "error" in r]
    assert len(failed) == 1
    assert failed[0]["id"] == "oops"
    assert failed[0]["input_line"] == 4
    assert failed[0]["error"]["kind"] == "shape"
    _assert_names_both_shapes(failed[0]["error"]["message"])
    tutorial, wrt_a, vjp, _, clipped = responses
    assert tutorial["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert tutorial["reduction"] == "sum"
    assert wrt_a["inputs"]["b"]["grad"] is None
    assert wrt_a["intermediates"]["h"]["grad"] == [1.0, 1.0]
    assert vjp["inputs"]["b"]["grad"] == [4.0, 10.0]
    assert vjp["reduction"] is None
    assert clipped["clip"]["total_norm"] == pytest.approx(102**0.5)


def test_coprocess_py() -> None:
    proc = _run([sys.executable, str(EXAMPLES / "coprocess.py")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[:4] == [
        "step 0: w = [0.0, 0.0], loss = 10.0, grad = [-6.0, 2.0]",
        "step 1: w = [1.5, -0.5], loss = 2.5, grad = [-3.0, 1.0]",
        "step 2: w = [2.25, -0.75], loss = 0.625, grad = [-1.5, 0.5]",
        "step 3: w = [2.625, -0.875], loss = 0.15625, grad = [-0.75, 0.25]",
    ]
    assert out[4].startswith("bad request: parse error: ")
    assert "column 20" in out[4]  # the third '*' of '***'
    assert out[5:] == [
        "final: w = [2.8125, -0.9375], loss = 0.0390625",
        "gradcli exit status: 1",
    ]


def test_evaluate_api_py() -> None:
    proc = _run([sys.executable, str(EXAMPLES / "evaluate_api.py")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[:10] == [
        "value: [20. 30.]",
        "grad a: [5. 6.]",
        "grad b: [4. 5.]",
        "reduction: sum",
        "h: [15. 24.] grad h: [1. 1.]",
        "grad a: [5. 6.] grad b: None",
        "total norm 10.0995, scale 0.099015",
        "clipped grad a: [0.4951 0.5941]",
        out[8],  # the JSON line, checked below
        out[9],  # the shape error, checked below
    ]
    assert out[9].startswith("ShapeError (kind 'shape'): ")
    _assert_names_both_shapes(out[9])
    assert strict_loads(out[8]) == {
        "id": None,
        "expr": "x * y",
        "output": {"shape": [], "value": 6.0},
        "reduction": None,
        "inputs": {
            "x": {"shape": [], "value": 2.0, "requires_grad": True, "grad": 3.0},
            "y": {"shape": [], "value": 3.0, "requires_grad": False, "grad": None},
        },
        "intermediates": {},
        "clip": None,
    }
    assert out[10] == "ParseError (kind 'parse') at line 2, column 8"
    assert len(out) == 11
