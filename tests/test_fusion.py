"""Fused runs of a replayed plan (docs/engine.md, "Fused runs"): consecutive elementwise
steps on large arrays replayed a block at a time, a sum of everything they make added up
the tree NumPy's pairwise sum adds it, and the gradients' finiteness learnt as they are
written. A fused replay must give a fresh evaluation's bits, warnings and notes.

The thresholds are lowered here (blocks of 128 elements, fusion from one element), so that
arrays of a few thousand elements cross many blocks and the whole function table and the
random programs of the property tests go through runs; every test runs with the blocks
replayed in one thread and shared among three.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import programs
from test_compiled import CASES, _other, assert_same_bits

import gradcli
from gradcli.autograd import fusion, replay
from gradcli.autograd.fusion import Run, _combine, _tree
from gradcli.autograd.state import floating_errors
from gradcli.compiled import _Recorded


@pytest.fixture(autouse=True, params=[1, 3], ids=["1 thread", "3 threads"])
def small_blocks(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(replay, "POOL_MIN", 1)
    monkeypatch.setattr(fusion, "FUSE_MIN", 1)
    monkeypatch.setattr(fusion, "BLOCK", 128)
    # a run's blocks shared among threads (whatever this machine's processors), or not
    monkeypatch.setattr(fusion, "THREADS", request.param)


def _runs(f: gradcli.Compiled) -> list[Run]:
    (entry,) = f.plans._entries.values()
    assert isinstance(entry, _Recorded)
    plan = entry.plan
    return [s[0] for s in plan.forward_steps + plan.backward_steps if type(s[0]) is Run]


def _check(text: str, make: Any, calls: int = 3, **options: Any) -> gradcli.Compiled:
    f = gradcli.compile(text)
    for k in range(calls):
        inputs = make(k)
        assert_same_bits(f(inputs, **options), gradcli.evaluate(text, inputs, **options), text)
    return f


RNG = np.random.default_rng(20261206)
N = 5_000  # 40 blocks of 128


def _vectors(k: int) -> dict[str, Any]:
    return {"a": RNG.normal(size=N), "b": RNG.normal(size=N) + 3}


@pytest.mark.parametrize(
    "text",
    [
        "sum(a*b+b)",  # the W3c program
        "sum(a*b*a + b/a - b)",
        "h = a * b; sum(h * h - a)",  # a binding: its value and gradient kept whole
        "a * b - b / 3",  # the output is made by a run, no sum
        "sum(tanh(a) * exp(-b**2))",
        "mean((a - b) * (a + b))",  # not a sum: the run ends before the mean
        "sum(reshape(a * b + 1, 50, -1) * 2)",
        "sum(a * b) * a",  # backward reads the sum: forward's run and backward's stay apart
    ],
)
def test_a_fused_replay_gives_a_fresh_evaluations_bits(text: str) -> None:
    f = _check(text, _vectors)
    assert _runs(f), f"{text}: no fused run"


def test_forward_and_backward_are_one_run_when_backward_needs_no_forward_result() -> None:
    # sum(a*b+b): the sum's gradient is its seed broadcast, so each block of a and b is
    # read once, for the value, the sum and both gradients
    f = _check("sum(a*b+b)", _vectors)
    (run,) = _runs(f)
    assert run.total is not None and run.split < len(run.steps)
    assert set(run.reads) >= {0, 1} and not run.locals.keys() & {0, 1}
    # backward reading the forward's sum keeps them apart
    f = _check("sum(a * b) * a", _vectors)
    assert len(_runs(f)) == 2


def test_a_generalized_ufunc_is_never_cut_into_blocks() -> None:
    # matmul is a ufunc, but not an elementwise one: on (n, 1, 1) arrays its output has
    # its operands' shape, and a block would cut through its core dimensions (found by
    # the random programs below: `matmul(abs(y), y)` with y of shape (2, 1, 1))
    def stacked(k: int) -> dict[str, Any]:
        return {"y": RNG.normal(size=(N, 1, 1)), "z": RNG.normal(size=(N, 1, 1))}

    f = _check("sum(matmul(abs(y), z) * y)", stacked)
    for run in _runs(f):
        assert all(step[0] is not np.matmul for step in run.steps)


def test_the_sum_a_run_ends_in_is_numpys_pairwise_sum_to_the_bit() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 7, 8, 127, 128, 129, 1000, 4096, 4097, 16385, 99991, 1 << 20):
        # terms of wildly different sizes: any other order of additions shows in the bits
        a = rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 6)
        for block in (128, 1000, 1 << 14):
            tree = _tree(n, block)
            pieces = [node for node in tree if node is not None]
            assert pieces[0][0] == 0 and pieces[-1][1] == n
            assert all(p[1] == q[0] for p, q in itertools.pairwise(pieces))
            assert all(hi - lo <= block for lo, hi in pieces)
            total = _combine([np.add.reduce(a[lo:hi]) for lo, hi in pieces], tree)
            assert total == np.add.reduce(a), (n, block)
            # a matrix's sum of all elements adds its memory in the same order
            if n % 8 == 0 and n > 8:
                m = a.reshape(8, -1)
                assert np.sum(m) == total


def test_a_run_ends_in_a_sum_only_of_exact_arithmetic() -> None:
    f = _check("sum(a*b+b)", _vectors)
    assert any(run.total is not None for run in _runs(f))
    f = _check("sum(exp(a) * b)", _vectors)  # exp's own code path may differ in a tail
    assert all(run.total is None for run in _runs(f))


def test_each_steps_errors_are_counted_once_as_one_call_counts_them() -> None:
    # every block of the product overflows; a fresh evaluation counts one operation
    text = "sum(a * b * 1e300 - b)"

    def big(k: int) -> dict[str, Any]:
        return {"a": np.full(N, 1e10 + k), "b": np.full(N, 1e10)}

    f = gradcli.compile(text)
    for k in range(3):
        got, want = f(big(k)), gradcli.evaluate(text, big(k))
        assert_same_bits(got, want, text)
        assert want.warnings and "overflow encountered in 1 operation" in want.warnings[0]
    assert _runs(f)


def test_backward_errors_in_a_merged_run_are_not_counted() -> None:
    # the gradients overflow (b * 1e300 * a), the forward does not: no warning, as fresh
    text = "sum(a * b * 1e300)"

    def make(k: int) -> dict[str, Any]:
        return {"a": np.full(N, 1e-300), "b": np.full(N, 1e10 + k)}

    f = gradcli.compile(text)
    for k in range(3):
        got, want = f(make(k)), gradcli.evaluate(text, make(k))
        assert_same_bits(got, want, text)
    assert any(run.split < len(run.steps) for run in _runs(f))


def test_errors_of_adding_the_blocks_sums_are_the_sums_own() -> None:
    # each block's sum is finite, the pieces' total overflows (then inf - inf): a fresh
    # evaluation's np.sum warns once of each; so must the replay, and a plan recorded on
    # these values must not carry their warnings to values that raise none (found by a
    # review: the additions were counted under the last step's number, or not at all)
    text = "sum(a*b+b)"
    big = np.full(N, 1e305)
    big[2496:] = -1e305
    ones = np.ones(N)
    f = gradcli.compile(text)
    for inputs in ({"a": ones, "b": ones}, {"a": big, "b": ones}, {"a": ones, "b": ones}):
        assert_same_bits(f(inputs), gradcli.evaluate(text, inputs), "recorded on ones")
    g = gradcli.compile(text)
    for inputs in ({"a": big, "b": ones}, {"a": ones, "b": ones}, {"a": big, "b": ones}):
        assert_same_bits(g(inputs), gradcli.evaluate(text, inputs), "recorded on overflow")
    assert gradcli.evaluate(text, {"a": big, "b": ones}).warnings[:2] == [
        "invalid value encountered in 1 operation",
        "overflow encountered in 1 operation",
    ]


@pytest.mark.parametrize("text", ["sum(a*b+b)", "sum(a-b*a)", "sum(a*0)", "sum(a/a)"])
def test_a_sum_of_nans_of_both_signs_is_numpys_nan(text: str) -> None:
    # which nan a sum gives follows the order NumPy's loop adds in: a nan in one block and
    # -nan (or inf - inf's) in another gave the other sign when the blocks' sums were
    # added in Python (found by a review)
    def signed(k: int) -> dict[str, Any]:
        a = RNG.normal(size=N)
        a[3 + k] = np.nan
        a[N - 1 - k] = -np.nan
        a[N // 2] = np.inf
        return {"a": a, "b": RNG.normal(size=N)}

    _check(text, signed)


def test_a_nan_norm_clipped_into_every_gradient_is_reported() -> None:
    # clip_norm with a nan total norm scales every gradient to nan, also those the fused
    # run found finite as it wrote them (found by a review)
    text = "sum(a*b+b)"

    def one_nan(k: int) -> dict[str, Any]:
        a = np.ones(N)
        a[5 + k] = np.nan
        return {"a": a, "b": np.ones(N)}

    f = _check(text, one_nan, clip_norm=1.0)
    assert "non-finite gradient for a, b" in f(one_nan(0), clip_norm=1.0).warnings


def test_non_finite_gradients_are_still_reported() -> None:
    text = "sum(a * b + b)"

    def with_inf(k: int) -> dict[str, Any]:
        a = RNG.normal(size=N)
        b = RNG.normal(size=N)
        b[N - 1 - 300 * k] = np.inf
        return {"a": a, "b": b}

    f = _check(text, with_inf)
    got = f(with_inf(1))
    assert "non-finite gradient for a" in got.warnings  # a's gradient is b
    assert _runs(f)


def test_a_gradient_written_after_its_run_is_not_taken_as_finite() -> None:
    # b's gradient is made by a run, then added to by a step that is not fused (x[0]'s
    # scatter): the later term's inf must be seen
    text = "sum(a * b) + b[0] * c"

    def make(k: int) -> dict[str, Any]:
        return {"a": RNG.normal(size=N), "b": RNG.normal(size=N), "c": np.float64(np.inf)}

    f = _check(text, make)
    assert any("non-finite gradient" in w for w in f(make(0)).warnings)


def test_clipping_after_a_fused_replay() -> None:
    f = _check("sum(a*b+b)", _vectors, clip_norm=1.0)
    assert _runs(f)
    _check("sum(a*b+b)", _vectors, clip_value=0.5)


@pytest.mark.parametrize(("text", "inputs"), CASES, ids=[t for t, _ in CASES])
def test_the_function_table_through_runs(text: str, inputs: dict[str, Any]) -> None:
    f = gradcli.compile(text)
    assert_same_bits(f(inputs), gradcli.evaluate(text, inputs), f"{text}, recorded")
    for k in range(2):
        again = _other(inputs)
        assert_same_bits(f(again), gradcli.evaluate(text, again), f"{text}, replay {k}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_through_runs(p: Any) -> None:
    f = gradcli.compile(p.text)
    assert_same_bits(f(p.inputs), gradcli.evaluate(p.text, p.inputs), "recorded")
    shifted = {k: v * 0.75 + 0.125 for k, v in p.inputs.items()}
    assert_same_bits(f(shifted), gradcli.evaluate(p.text, shifted), "replayed")


def test_borrowed_inputs_are_read_where_they_are_and_never_written() -> None:
    a, b = RNG.normal(size=N), RNG.normal(size=N)
    before = a.copy(), b.copy()
    f = gradcli.compile("sum(a*b+b)", copy=False)
    for _ in range(3):
        r = f({"a": a, "b": b})
    assert_same_bits(r, gradcli.evaluate("sum(a*b+b)", {"a": a, "b": b}), "borrowed")
    assert np.shares_memory(r.inputs["a"], a) and not r.inputs["a"].flags.writeable
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])
    # what cannot be borrowed as it is (another dtype, a strided view) is copied
    r = f({"a": a[::2].copy(), "b": b[::2]})
    assert not np.shares_memory(r.inputs["b"], b)
    r = gradcli.compile("sum(a*b+b)")({"a": a, "b": b})  # the default copies
    assert not np.shares_memory(r.inputs["a"], a) and r.inputs["a"].flags.writeable


def test_arrays_laid_out_otherwise_than_planned_replay_step_by_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    f = gradcli.compile("sum(a*b+b)", copy=False)
    a, b = RNG.normal(size=N), RNG.normal(size=N)
    want = f({"a": a, "b": b})
    (entry,) = f.plans._entries.values()
    unfused = []
    monkeypatch.setattr(Run, "__call__", lambda *args: unfused.append(1) or None)
    strided = np.repeat(b, 2)[::2]  # b's numbers, not contiguous
    with floating_errors():
        value, ga, gb = entry.plan.run([a, strided])
    assert not unfused, "a run replayed fused on arrays it was not planned for"
    assert value.tobytes() == want.value.tobytes()
    assert ga.tobytes() == want.grads["a"].tobytes()
    assert gb.tobytes() == want.grads["b"].tobytes()
    with floating_errors():
        entry.plan.run([a, b])
    assert unfused, "the run was not used on the arrays it was planned for"


@pytest.mark.parametrize(("text", "inputs"), CASES, ids=[t for t, _ in CASES])
def test_borrowed_inputs_give_the_copies_bits_and_stay_as_they_were(
    text: str, inputs: dict[str, Any]
) -> None:
    arrays = {k: np.array(v, dtype=float) for k, v in inputs.items()}
    kept = {k: v.copy() for k, v in arrays.items()}
    want = gradcli.evaluate(text, arrays)
    assert_same_bits(gradcli.evaluate(text, arrays, copy=False), want, f"{text}, afresh")
    f = gradcli.compile(text, copy=False)
    for k in range(3):
        assert_same_bits(f(arrays), want, f"{text}, call {k}")
    for k, v in arrays.items():
        assert v.tobytes() == kept[k].tobytes(), f"{text}: {k} was written into"


def test_a_runs_blocks_are_shared_among_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    shared: list[int] = []
    real = fusion._in_threads

    def spy(fn: Any, shares: list[Any], *args: Any) -> list[Any]:
        shared.append(len(shares))
        return real(fn, shares, *args)

    monkeypatch.setattr(fusion, "_in_threads", spy)
    f = _check("sum(tanh(a) * exp(-b**2))", _vectors)  # 40 blocks: 4 or more a thread
    if fusion.THREADS == 1:
        assert shared == []
    else:
        assert shared and set(shared) == {fusion.THREADS}, shared
    assert _runs(f)


def test_a_forked_child_replays_with_threads_of_its_own() -> None:
    # the parent's pool has threads the child does not: the child starts its own
    import multiprocessing

    f = _check("sum(a*b+b)", _vectors)  # replayed: the pool is started (3 threads)
    assert fusion.THREADS == 1 or fusion._POOL is not None
    inputs = _vectors(0)
    want = gradcli.evaluate("sum(a*b+b)", inputs)

    def child() -> None:
        assert_same_bits(f(inputs), want, "in a forked child")

    p = multiprocessing.get_context("fork").Process(target=child)
    p.start()
    p.join(timeout=120)
    if p.exitcode is None:  # waiting for threads it does not have
        p.kill()
    assert p.exitcode == 0
