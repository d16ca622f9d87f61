"""Work whose size is quadratic or unbounded (issue 12, item 7).

``check``, ``jacobian`` and ``hessian`` make a number of passes of the program that grows
with the sizes of the inputs and the output (``check``: two forward runs per input element),
each pass over all of them: past ``--max-passes`` (default 50,000) they are refused before
the work starts, kind ``limit``, exit 1, with a message naming the option. ``optimize`` keeps
at most ``--max-history`` losses (default 100,000), evenly thinned, so that its memory does
not grow with ``--steps``; ``loss_every`` in its JSON says how they are spaced.
"""

from __future__ import annotations

import harness
import pytest
from harness import REPO, Run, strict_loads

from gradcli import analysis
from gradcli.analysis import DEFAULT_MAX_HISTORY, DEFAULT_MAX_PASSES, LossHistory
from gradcli.errors import LimitError
from gradcli.options import DEFAULT_MAX_HISTORY as CLI_MAX_HISTORY
from gradcli.options import DEFAULT_MAX_PASSES as CLI_MAX_PASSES


def run(*args: str) -> Run:
    """``python -m gradcli ARGS`` — with a timeout far below what the refused work would
    take, so that work that is not refused fails the test instead of running on."""
    proc = harness.process(args, stdin=None, cwd=REPO, env=harness.gradcli_env(), timeout=30)
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), args)


def assert_refused(r: Run, command: str, passes: int, limit: int) -> None:
    """A ``limit`` error: exit 1, the error object, and one line on stderr that names the
    command, the passes needed, the limit and the option that raises it."""
    message = (
        f"{command} would make {passes:,} forward and backward passes of the program, "
        f"over the limit of {limit:,} (raise it with --max-passes)"
    )
    assert r.code == 1, (r.stdout, r.stderr)
    assert r.json == {"id": None, "error": {"kind": "limit", "message": message}}
    assert r.stderr == f"error (limit): {message}\n"


def test_the_cli_defaults_are_the_engines() -> None:
    assert (CLI_MAX_PASSES, CLI_MAX_HISTORY) == (DEFAULT_MAX_PASSES, DEFAULT_MAX_HISTORY)
    assert DEFAULT_MAX_PASSES == 50_000 and DEFAULT_MAX_HISTORY == 100_000


# --------------------------------------------------------------------------------------
# --max-passes
# --------------------------------------------------------------------------------------


def test_check_of_a_hundred_thousand_elements_is_refused_before_it_starts() -> None:
    # 2 forward runs per element, 1 forward run for the analytic side
    r = run("check", "sum(x**2)", "x=ones(10**5)", "--json")
    assert_refused(r, "check", 200_001, 50_000)


def test_check_table_mode_says_the_same_in_one_line() -> None:
    r = run("check", "sum(x**2)", "x=ones(10**5)")
    assert r.code == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--max-passes" in r.stderr


def test_max_passes_raises_the_limit_exactly() -> None:
    # x of 100 elements, a scalar output: 1 forward run + 1 backward pass + 200 finite
    # difference runs = 202 passes
    assert_refused(run("check", "sum(x**2)", "x=ones(100)", "--max-passes", "201", "--json"),
                   "check", 202, 201)  # fmt: skip
    r = run("check", "sum(x**2)", "x=ones(100)", "--max-passes", "202", "--json")
    assert r.code == 0, r.stderr
    assert r.json["ok"] is True and r.json["inputs"]["x"]["max_abs_error"] < 1e-6


def test_check_order_2() -> None:
    # the Hessian (forward, backward, 1 more per element) and 2 gradients per element
    r = run("check", "sum(x**3)", "x=ones(10)", "--order", "2", "--max-passes", "51", "--json")
    assert_refused(r, "check", 2 + 10 + 4 * 10, 51)
    r = run("check", "sum(x**3)", "x=ones(10)", "--order", "2", "--max-passes", "52", "--json")
    assert r.code == 0 and r.json["ok"] is True


def test_jacobian_of_a_large_output() -> None:
    # one backward pass per output element
    assert_refused(run("jacobian", "x*ones(10**5)", "x=1", "--json"), "jacobian", 100_001, 50_000)
    r = run("jacobian", "x*ones(10)", "x=2", "--max-passes", "11", "--json")
    assert r.code == 0
    assert r.json["jacobian"]["x"] == {"shape": [10], "value": [1.0] * 10}


def test_hessian() -> None:
    r = run("hessian", "sum(x**3)", "x=ones(100)", "--max-passes", "101", "--json")
    assert_refused(r, "hessian", 102, 101)
    r = run("hessian", "sum(x**3)", "x=[1, 2]", "--max-passes", "4", "--json")
    assert r.code == 0 and r.json["hessian"] == [[6.0, 0.0], [0.0, 12.0]]


def test_max_passes_must_be_positive() -> None:
    r = run("check", "x", "x=1", "--max-passes", "0")
    assert r.code == 2 and "--max-passes" in r.stderr


def test_the_api_refuses_the_same() -> None:
    with pytest.raises(LimitError, match=r"check would make 2,001 .* --max-passes"):
        analysis.check("sum(x**2)", {"x": [1.0] * 1000}, max_passes=2000)
    with pytest.raises(LimitError, match="jacobian would make 1,001 "):
        analysis.jacobian("x*ones(1000)", {"x": 1.0}, max_passes=1000)
    assert analysis.jacobian("x*ones(1000)", {"x": 1.0}, max_passes=1001).value.shape == (1000,)


# --------------------------------------------------------------------------------------
# optimize: a bounded, evenly thinned loss history
# --------------------------------------------------------------------------------------


def test_loss_history_keeps_every_loss_up_to_the_limit() -> None:
    h = LossHistory(10)
    for k in range(10):
        h.add(float(k))
    assert (h.kept, h.every) == ([float(k) for k in range(10)], 1)


@pytest.mark.parametrize("limit", [1, 2, 3, 10, 64, 1000])
def test_loss_history_stays_bounded_and_evenly_spaced(limit: int) -> None:
    h = LossHistory(limit)
    n = 200_003
    for k in range(n):
        h.add(float(k))  # the loss of step k is k: what is kept says which steps
        assert len(h.kept) <= limit
    assert h.kept == [float(i * h.every) for i in range(len(h.kept))]
    assert len(h.kept) > limit // 2  # thinned no more than it must be
    assert (len(h.kept) - 1) * h.every < n <= (len(h.kept) + 1) * h.every * 2


def test_optimize_thins_its_history_and_says_so() -> None:
    # sgd on x**2 from x = 1 with lr 0.01: x_k = 0.98**k, so the loss before step k is
    # 0.98**(2k) and the losses kept tell which steps they are of
    r = run("optimize", "x**2", "x=1", "--steps", "1000", "--max-history", "100", "--json")
    assert r.code == 0, r.stderr
    j = r.json
    assert j["steps"] == 1000 and j["loss_every"] == 16
    losses = j["losses"]
    assert len(losses) == 1000 // 16 + 1 + 1  # steps 0, 16, ..., 992, then the final loss
    expected = [0.98 ** (2 * 16 * i) for i in range(len(losses) - 1)] + [0.98**2000]
    assert losses == pytest.approx(expected, rel=1e-12)
    assert j["final"]["x"]["value"] == pytest.approx(0.98**1000, rel=1e-12)
    assert r.stderr == (  # a note: there is no caption to say it (docs/commands.md)
        "note: the loss history of 1,000 steps is thinned to one loss every 16 steps "
        "(63 losses and the final one; raise --max-history, now 100, to keep more)\n"
    )


def test_optimize_keeps_the_whole_history_up_to_the_limit() -> None:
    r = run("optimize", "x**2", "x=1", "--steps", "100", "--max-history", "100", "--json")
    assert (r.code, r.stderr) == (0, "")
    assert r.json["loss_every"] == 1
    assert r.json["losses"] == pytest.approx([0.98 ** (2 * k) for k in range(101)], rel=1e-12)


def test_optimize_table_with_a_thinned_history() -> None:
    r = run("optimize", "x**2", "x=1", "--steps", "1000", "--max-history", "50")
    assert r.code == 0
    assert "1000 steps" in r.stdout and "loss" in r.stdout
    assert "thinned to one loss every 32 steps" in r.text  # in the caption, once
    assert r.stderr == ""


def test_optimize_api_thins_the_same() -> None:
    o = analysis.optimize("x**2", {"x": 1.0}, steps=5000, lr=0.01, max_history=64)
    assert o.loss_every == 128 and len(o.losses) == 5000 // 128 + 1 + 1
    assert o.losses[:3] == pytest.approx([1.0, 0.98**256, 0.98**512], rel=1e-12)
    assert o.to_json()["loss_every"] == 128
    assert any("thinned" in n for n in o.notes) and not o.warnings
    with pytest.raises(Exception, match="max-history"):
        analysis.optimize("x**2", {"x": 1.0}, steps=5, max_history=0)


def test_strict_json_of_a_thinned_history() -> None:
    # lr 2 diverges: x_k = (-3)**k, and the loss 9**k overflows from step 323 on
    r = run("optimize", "x**2", "x=1", "--steps", "400", "--lr", "2", "--max-history", "4",
            "--json")  # fmt: skip
    assert r.code == 0
    doc = strict_loads(r.stdout)  # non-finite losses are strings, not NaN tokens
    assert doc["loss_every"] == 128
    assert doc["losses"][:3] == pytest.approx([1.0, 9.0**128, 9.0**256], rel=1e-9)
    assert doc["losses"][3:] == ["inf", "inf"]  # step 384, then the final loss
