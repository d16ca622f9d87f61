"""The benchmark suite runs end to end on tiny sizes (``python -m benchmarks --quick``).

Not a benchmark: it checks that the entry point starts, checks every library's answers,
prints the table with the selected workloads, and writes the JSON file. Torch is not needed
(its rows are skipped). OpenBLAS's environment is left as it is (``--keep-openblas-env``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SELECTED = ("W1", "W2", "W3a", "W3c", "W8", "W9", "W12")


def test_quick_run_prints_the_selected_rows(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--only",
            ",".join(SELECTED),
            "--keep-openblas-env",
            "--json",
            str(out_json),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = done.stdout
    assert "gradcli benchmarks" in table
    lines = table.splitlines()
    for wid in SELECTED:
        assert any(line.split()[:1] == [wid] for line in lines), f"no {wid} row in:\n{table}"
    for absent in ("W3b", "W4", "W5", "W6", "W7"):
        assert not any(line.split()[:1] == [absent] for line in lines)
    assert "NumPy" in table and "targets:" in table

    data = json.loads(out_json.read_text())
    measured = {
        (r["workload"], r["metric"], r["library"]) for r in data["rows"] if r["stats"] is not None
    }
    for wid in SELECTED:
        assert (wid, "time", "gradcli") in measured
        assert (wid, "time", "numpy") in measured
    assert ("W3a", "mem net", "gradcli") in measured
    # HIPS autograd has no row for issue 14's workloads; torch's is there, measured or not
    libraries = {(r["workload"], r["library"]) for r in data["rows"]}
    for wid in ("W3c", "W8", "W9"):
        assert (wid, "torch") in libraries
        assert (wid, "autograd") not in libraries
    # W12: forward mode in gradcli's row, reverse mode in a second row; torch's two, measured
    # or not; no target
    assert ("W12", "time", "gradcli-reverse") in measured
    assert ("W12", "torch") in libraries and ("W12", "torch-reverse") in libraries
    assert {t["workload"] for t in data["targets"]} == {"W1", "W2", "W3a", "W3c", "W8", "W9"}
    assert all(t["status"] in ("PASS", "MISS", "SKIP") for t in data["targets"])
    assert data["env"]["numpy"]
