"""Compiled programs (issue 14; docs/api.md, "Compiled programs"): ``gradcli.compile`` records
a plan on the first call with given input shapes and replays it after. A replay must give a
fresh evaluation's bits: the value, every gradient and every binding, equal to the last bit
(nan included), with the same warnings and notes, on the whole function table and on random
programs from the property-test generators.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import programs

import gradcli
from gradcli.compiled import _UNPLANNED, _Recorded
from gradcli.language import FUNCTIONS

RNG = np.random.default_rng(20261203)


def _pos(*shape: int) -> np.ndarray:
    return RNG.uniform(0.2, 0.9, shape)


def _any(*shape: int) -> np.ndarray:
    return RNG.uniform(-2.0, 2.0, shape)


def _spd(n: int) -> np.ndarray:
    a = RNG.uniform(-1, 1, (n, n))
    return a @ a.T / n + np.eye(n)


X, Y, V, M = _any(3, 4), _any(3, 4), _any(4), _spd(4)
P = _pos(3, 4)  # inside every domain (log, arcsin, arccosh of 1 + p ...)

#: (program, inputs): every function of the language, the operators, indexing, bindings
ON_ANY = "abs sign square exp expm1 sin cos tan arctan sinh cosh tanh arcsinh sigmoid relu"
ON_ANY += " softplus silu floor ceil round"
ON_POSITIVE = "sqrt log log2 log10 log1p arcsin arccos arctanh"
REDUCTIONS = "sum mean prod max min logsumexp norm var std"
CASES: list[tuple[str, dict[str, Any]]] = [
    *[(f"sum({n}(x))", {"x": X}) for n in ON_ANY.split()],
    *[(f"sum({n}(p))", {"p": P}) for n in ON_POSITIVE.split()],
    ("sum(arccosh(1 + p))", {"p": P}),
    *[(f"sum({n}(x, y))", {"x": X, "y": Y}) for n in ("maximum", "minimum", "arctan2")],
    ("sum(pow(p, y))", {"p": P, "y": Y}),
    ("sum(p ** 2.5 + x ^ 2)", {"p": P, "x": X}),
    ("sum(clip(x, -0.5, y))", {"x": X, "y": Y}),
    ("sum(where(x > y, x * 2, y))", {"x": X, "y": Y}),
    (
        'sum(erf(x) + gelu(x) + gelu(y, approximate="tanh") + leaky_relu(x, 0.2) + softsign(y))',
        {"x": X, "y": Y},
    ),
    ("sum(elu(x, alpha=1.5) * y + logaddexp(x, y) + logaddexp(x, 1))", {"x": X, "y": Y}),
    ("sum(cumsum(x, axis=1) * cumprod(y, axis=0)) + sum(cumsum(x) + cumprod(y))", {"x": X, "y": Y}),
    ("sum(cumprod(z, axis=1) * y)", {"z": np.where(np.abs(X) < 0.8, 0.0, X), "y": Y}),
    ("sum(tril(x, k=1) * y + triu(x) ** 2)", {"x": X, "y": Y}),
    *[(f"{n}(x, axis=1)", {"x": X}) for n in REDUCTIONS.split()],
    ("sum(max(x) + min(x, axis=0, keepdims=true)) + norm(x, ord=inf)", {"x": X}),
    ("var(x, ddof=1) + std(x, axis=0, ddof=1)[1]", {"x": X}),
    ("sum(softmax(x) * y) + sum(log_softmax(x, axis=0))", {"x": X, "y": Y}),
    ("sum(reshape(x, 4, 3) @ v[:3])", {"x": X, "v": V}),
    ("sum(transpose(x) * flatten(y)[:3])", {"x": X, "y": Y}),
    ("sum(squeeze(expand_dims(x, 0)) * x.T.T)", {"x": X}),
    ("sum(concatenate([x, y], axis=1) ** 2) + sum(stack([x, y]) * 3)", {"x": X, "y": Y}),
    ("sum(flip(x, axis=1) * y)", {"x": X, "y": Y}),
    ("sum(matmul(x, v)) + dot(v, v) + sum(outer(v, v)) + sum(x @ M)", {"x": X, "v": V, "M": M}),
    ("trace(M) + sum(diag(M)) + sum(diag(v, k=1))", {"M": M, "v": V}),
    ("det(M) + sum(inv(M)) + sum(solve(M, v))", {"M": M, "v": V}),
    (
        'sum(einsum("ij,jk->ik", x, M) * y) + einsum("ii", M) + sum(einsum("ii->i", M) * v)'
        ' + sum(einsum("i,j->ij", v, v)) + sum(einsum("ij->j", x) * v) + einsum("i,i->", v, v)',
        {"x": X, "y": Y, "M": M, "v": V},
    ),
    (
        "sum(einsum('bij,bjk->bik', b, b) ** 2) + sum(einsum('...ij,...jk', b, M[:2, :2]))"
        " + sum(einsum('ij,j->i', x, v[:1]))",
        {"b": _any(2, 2, 2), "M": M, "x": X, "v": V},
    ),
    ("sum(slogdet(M)) + sum(cholesky(M) * M) + sum(pinv(x) ** 2)", {"M": M, "x": X}),
    ("sum(x * zeros(3, 4) + ones(3, 4) * y + full((3, 4), 2) + eye(3, 4))", {"x": X, "y": Y}),
    ("sum(v * arange(4) + linspace(0, 1, 4) * v)", {"v": V}),
    ("sum(x * rand(3, 4) + y * randn(3, 4))", {"x": X, "y": Y}),
    ("h = a*b; g = tanh(h) + b; sum(g * h)", {"a": V, "b": V[::-1].copy()}),
    ("x[1] * 2 + x[:, 2].T[0] + sum(x[[0, 2], 1:3])", {"x": X}),
    ("-x**2 / (1 + y*y) - (x != y) + (x <= y) * 3 + pi * e", {"x": X, "y": Y}),
    ("[x[0, :3], v[1:4] + 1, [1, 2, 3]] @ [1, 2, 3]", {"x": X, "v": V}),
    ("h = x; sum(h * y)", {"x": X, "y": Y}),
    ("2 * 3", {}),
    (
        "mse_loss(x, y) + l1_loss(x, v, reduction='sum') + sum(huber_loss(x, y, 'none', 0.5))",
        {"x": X, "y": Y, "v": V},
    ),
    (
        "binary_cross_entropy(p, sigmoid(y), weight=v) + binary_cross_entropy_with_logits("
        "x, p, reduction='sum', pos_weight=v * v)",
        {"x": X, "y": Y, "p": P, "v": V},
    ),
    (
        "cross_entropy(x, [0, 3, -100], weight=v * v, label_smoothing=0.1) + cross_entropy("
        "x, softmax(y), reduction='sum') + nll_loss(log_softmax(y, axis=1), [2, 0, 1])",
        {"x": X, "y": Y, "v": V},
    ),
]
NAMES_COVERED = {
    word
    for text, _ in CASES
    for word in text.replace("(", " ").replace(")", " ").replace(",", " ").split()
}


def test_the_cases_cover_every_function_of_the_language() -> None:
    missing = sorted({f.name for f in FUNCTIONS.values()} - NAMES_COVERED)
    assert not missing, f"no compiled-program case for {missing}"


def _bits(a: Any) -> tuple[str, tuple[int, ...], bytes]:
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def assert_same_bits(got: gradcli.Result, want: gradcli.Result, what: str) -> None:
    assert _bits(got.value) == _bits(want.value), f"{what}: value {got.value} != {want.value}"
    assert list(got.grads) == list(want.grads)
    for name, g in want.grads.items():
        if g is None:
            assert got.grads[name] is None, f"{what}: {name} has a gradient"
        else:
            assert _bits(got.grads[name]) == _bits(g), (
                f"{what}: gradient of {name}: {got.grads[name]} != {g}"
            )
    assert list(got.intermediates) == list(want.intermediates)
    for name, (v, g) in want.intermediates.items():
        gv, gg = got.intermediates[name]
        assert _bits(gv) == _bits(v), f"{what}: binding {name}"
        assert (gg is None) == (g is None) and (g is None or _bits(gg) == _bits(g)), (
            f"{what}: gradient of binding {name}"
        )
    assert got.reduction == want.reduction
    assert (got.clip is None) == (want.clip is None)
    if want.clip is not None:
        assert got.clip.keys() == want.clip.keys()
        assert all(_bits(got.clip[k]) == _bits(v) for k, v in want.clip.items()), what
    assert (got.warnings, got.notes) == (want.warnings, want.notes), what


def _other(inputs: dict[str, Any]) -> dict[str, Any]:
    """Other values of the same shapes (kept in the functions' domains)."""
    out = {}
    for name, v in inputs.items():
        v = np.asarray(v, dtype=float)
        if name == "M":
            out[name] = _spd(v.shape[0])
        elif name == "p":
            out[name] = _pos(*v.shape)
        else:
            out[name] = _any(*v.shape)
    return out


def _plan_of(f: gradcli.Compiled) -> Any:
    (entry,) = f.plans._entries.values()
    return entry


@pytest.mark.parametrize(("text", "inputs"), CASES, ids=[t for t, _ in CASES])
def test_a_replay_gives_a_fresh_evaluations_bits(text: str, inputs: dict[str, Any]) -> None:
    f = gradcli.compile(text)
    first = f(inputs)
    assert_same_bits(first, gradcli.evaluate(text, inputs), f"{text}, recorded")
    assert isinstance(_plan_of(f), _Recorded), f"{text} was not planned"
    for k in range(3):
        again = _other(inputs)
        assert_same_bits(f(again), gradcli.evaluate(text, again), f"{text}, replay {k}")


def test_a_replay_reads_no_tensor_and_makes_no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """After recording, a call runs the plan: no program tree is walked, no tensor made."""
    f = gradcli.compile("h = tanh(W @ x); sum(h ** 2)")
    inputs = {"W": M, "x": V}
    want = f(inputs)
    import importlib

    evaluate_module = importlib.import_module("gradcli.language.evaluate")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a replay walked the program or made a tensor")

    monkeypatch.setattr(evaluate_module.Program, "run", refuse)
    # every tensor is made by object.__new__(Tensor), as _new in these modules (setting
    # Tensor.__new__ itself would leave the class unable to take arguments afterwards)
    for name in ("tensor", "families", "backward"):
        monkeypatch.setattr(importlib.import_module(f"gradcli.autograd.{name}"), "_new", refuse)
    assert_same_bits(f(inputs), want, "replay")


def test_ties_and_zeros_are_data_and_replay_correctly() -> None:
    """Where a tie of max falls, or which element of a product is zero, is data: the rules
    run again on every replay."""
    f = gradcli.compile("max(x) + prod(y)")
    f({"x": [1.0, 2.0, 3.0], "y": [1.0, 2.0, 3.0]})
    for x, y in ([[3.0, 3.0, 1.0], [0.0, 2.0, 3.0]], [[2.0, 5.0, 5.0], [0.0, 0.0, 4.0]]):
        inputs = {"x": x, "y": y}
        assert_same_bits(f(inputs), gradcli.evaluate("max(x) + prod(y)", inputs), str(inputs))
    assert f({"x": [3.0, 3.0, 1.0], "y": [1.0, 1.0, 1.0]}).grads["x"].tolist() == [0.5, 0.5, 0]


@pytest.mark.parametrize(
    ("text", "inputs"),
    [
        ("x[i]", {"x": [1.0, 2.0, 3.0], "i": 1}),  # an index that depends on an input
        ("sum(x ** k)", {"x": [1.0, 2.0], "k": 2}),  # an exponent from an input
        ("sum(reshape(x, n, -1))", {"x": [1.0] * 8, "n": 4}),  # a shape from an input
        ("sum([k, k] * x)", {"x": [1.0, 2.0], "k": 3}),  # a literal of inputs, copied
    ],
    ids=["index", "exponent", "shape", "literal"],
)
def test_a_value_of_the_inputs_read_into_python_is_never_planned(
    text: str, inputs: dict[str, Any]
) -> None:
    f = gradcli.compile(text, wrt=["x"])
    assert_same_bits(f(inputs), gradcli.evaluate(text, inputs, wrt=["x"]), text)
    assert _plan_of(f) is _UNPLANNED
    changed = {**inputs, **{k: (0 if k == "i" else 1) for k in inputs if k != "x"}}
    if "n" in inputs:
        changed["n"] = 2
    assert_same_bits(f(changed), gradcli.evaluate(text, changed, wrt=["x"]), text)


def test_a_replay_that_fails_is_answered_as_a_fresh_evaluation() -> None:
    f = gradcli.compile("sum(inv(A))")
    f({"A": [[2.0, 0.0], [0.0, 4.0]]})
    singular = {"A": [[1.0, 2.0], [2.0, 4.0]]}
    with pytest.raises(gradcli.DomainError) as replayed:
        f(singular)
    with pytest.raises(gradcli.DomainError) as fresh:
        gradcli.evaluate("sum(inv(A))", singular)
    assert str(replayed.value) == str(fresh.value)


def test_options_and_warnings_as_evaluate() -> None:
    text = "h = log(x) * y; h / x"
    f = gradcli.compile(text, wrt=["x"], dtype="float32")
    for inputs in ({"x": [1.0, 2.0], "y": [3.0, 4.0]}, {"x": [0.0, -1.0], "y": [1.0, 2.0]}):
        for options in (
            {},
            {"grad_output": [1.0, -2.0]},
            {"clip_norm": 0.5},
            {"clip_value": 0.25, "id": 7},
        ):
            want = gradcli.evaluate(text, inputs, wrt=["x"], dtype="float32", **options)
            assert_same_bits(f(inputs, **options), want, f"{inputs} {options}")
    with pytest.raises(gradcli.ShapeError, match="grad_output has shape"):
        f({"x": [1.0, 2.0], "y": [3.0, 4.0]}, grad_output=[1.0, 2.0, 3.0])


def test_new_shapes_record_a_new_plan_and_results_are_the_callers() -> None:
    f = gradcli.compile("sum(x * x)")
    a = f({"x": [1.0, 2.0]})
    b = f({"x": [[1.0], [2.0]]})
    c = f({"x": [1.0, 2.0]})
    assert len(f.plans) == 2
    assert a.grads["x"].tolist() == c.grads["x"].tolist() == [2.0, 4.0]
    assert b.grads["x"].tolist() == [[2.0], [4.0]]
    c.grads["x"][:] = 0  # clipping writes into gradients: each result has arrays of its own
    assert f({"x": [1.0, 2.0]}).grads["x"].tolist() == [2.0, 4.0]


@pytest.mark.parametrize(
    "text",
    ["x + y", "h = x; g = h * y; g + x", "sum(x * y) + sum(y)", "h = x * 2; h", "x"],
)
def test_a_results_gradients_are_arrays_of_its_own(text: str) -> None:
    """A gradient may be handed out without a copy, never one that is another part of the
    result, an input, or something a later replay reuses: writing into every gradient of
    one result (as clipping does) changes no other result."""
    f = gradcli.compile(text)
    inputs = {"x": _any(3), "y": _any(3)}
    kept = {k: v.copy() for k, v in inputs.items()}
    first = f(inputs)
    second = f(inputs)
    arrays = [first.value, *first.inputs.values()]
    arrays += [v for v, _ in first.intermediates.values()]
    grads = [g for g in first.grads.values() if g is not None]
    grads += [g for _, g in first.intermediates.values() if g is not None]
    assert len({id(g) for g in grads}) == len(grads)
    assert not {id(g) for g in grads} & {id(a) for a in arrays}
    assert not any(np.shares_memory(g, a) for g in grads for a in [*arrays, *inputs.values()])
    for g in grads:
        g[...] = 7.0
    for k, v in kept.items():
        np.testing.assert_array_equal(inputs[k], v)
    assert_same_bits(f(inputs), gradcli.evaluate(text, inputs), "after writing")
    assert_same_bits(second, gradcli.evaluate(text, inputs), "the other result")


def test_a_compiled_program_from_eight_threads_gives_single_threaded_bits() -> None:
    text = "sum(tanh(W @ x) ** 2)"
    f = gradcli.compile(text)
    cases = [{"W": _spd(4) * k, "x": _any(4)} for k in range(8)]
    want = [gradcli.evaluate(text, c) for c in cases]

    def work(i: int) -> None:
        for _ in range(50):
            assert_same_bits(f(cases[i]), want[i], f"thread {i}")

    _in_threads(work, 8)


def _in_threads(work: Any, n: int) -> None:
    """``work(i)`` in n threads at once; every assertion error they met, reported."""
    bad: list[str] = []
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait(timeout=60)
        try:
            work(i)
        except AssertionError as e:
            bad.append(str(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:3]


def test_a_parse_error_is_raised_by_compile() -> None:
    with pytest.raises(gradcli.ParseError):
        gradcli.compile("a +* b")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_replay_to_the_last_bit(p: Any) -> None:
    f = gradcli.compile(p.text)
    first = f(p.inputs)
    assert_same_bits(first, gradcli.evaluate(p.text, p.inputs), "recorded")
    shifted = {k: v * 0.75 + 0.125 for k, v in p.inputs.items()}
    assert_same_bits(f(shifted), gradcli.evaluate(p.text, shifted), "replayed")


def test_batch_replays_plans_and_answers_as_evaluate_does() -> None:
    """A stream of a few programs in any order, with other shapes, options and errors
    between: every response is the one a fresh evaluation gives, byte for byte."""
    import io
    import json

    from gradcli.api import request_kwargs
    from gradcli.batch import run_batch
    from gradcli.io import dumps

    programs_ = ["sum(a*b+b)", "h = tanh(a) * b; h", "a @ b"]
    lines = []
    rng = np.random.default_rng(7)
    for i in range(60):
        expr = programs_[i % 3]
        n = 2 + (i // 20)  # three shapes per program
        request: dict[str, Any] = {
            "id": i, "expr": expr,
            "inputs": {"a": rng.normal(size=n).tolist(), "b": rng.normal(size=n).tolist()},
        }  # fmt: skip
        if i % 7 == 0:
            request["wrt"] = ["a"]
        if i % 11 == 0:
            request["clip_norm"] = 0.5
        if i % 13 == 0:
            request["inputs"]["b"] = [1.0] * (n + 1)  # a shape error
        lines.append(json.dumps(request))
    out: list[str] = []
    run_batch(io.BytesIO(("\n".join(lines) + "\n").encode()), out.append)
    for line, response in zip(lines, out, strict=True):
        request = json.loads(line)
        try:
            want = dumps(gradcli.evaluate(**request_kwargs(request)).to_json())
        except gradcli.GradcliError:
            assert '"error"' in response
            continue
        assert response == want, request


@pytest.mark.parametrize(
    ("command", "kwargs"),
    [
        ("optimize", {"optimizer": "adam", "steps": 40, "lr": 0.05, "wrt": ["W", "b"]}),
        ("optimize", {"optimizer": "momentum", "steps": 25, "zero_grad": False, "wrt": ["b"]}),
        ("optimize", {"optimizer": "sgd", "steps": 10, "clip_norm": 0.1}),
        ("check", {}),
        ("check", {"order": 2, "wrt": ["x"]}),
    ],
    ids=["adam", "momentum, grads accumulate", "sgd, clipped", "check", "check order 2"],
)
def test_optimize_and_check_replay_their_passes_to_the_same_bits(
    command: str, kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """optimize's steps and check's finite differences replay one plan (issue 14, item 3):
    the same result as evaluating afresh every pass."""
    from gradcli import analysis
    from gradcli.autograd.replay import Plan
    from gradcli.compiled import Plans

    text = "sum(tanh(W @ x + b) ** 2)"
    inputs = {"W": _any(3, 3) / 2, "x": _any(3), "b": _any(3)}
    replayed = []
    run = Plan.run

    def counting(self: Plan, *args: Any, **kw: Any) -> Any:
        replayed.append(True)  # a replay, through Plans.run or straight (check's passes)
        return run(self, *args, **kw)

    monkeypatch.setattr(Plan, "run", counting)
    planned = getattr(analysis, command)(text, inputs, **kwargs)
    assert sum(replayed) >= 5, "the passes were not replayed"
    monkeypatch.setattr(Plan, "run", run)
    monkeypatch.setattr(Plans, "run", lambda self, *args, **kw: None)  # afresh every time
    fresh = getattr(analysis, command)(text, inputs, **kwargs)
    assert planned.to_json() == fresh.to_json()


def test_a_stream_records_a_program_when_it_comes_again() -> None:
    """batch's plans (first=False): a program seen once costs no recording."""
    from gradcli.compiled import _SEEN, Plans

    plans = Plans(first=False)
    inputs = {"a": [1.0, 2.0], "b": [3.0, 4.0]}
    want = gradcli.evaluate("sum(a*b+b)", inputs)
    for k in range(3):
        assert_same_bits(gradcli.evaluate("sum(a*b+b)", inputs, plans=plans), want, str(k))
        (entry,) = plans._entries.values()
        assert (entry is _SEEN) == (k == 0)
        assert isinstance(entry, _Recorded) == (k > 0)


def _rows_by_grad(root: Any, leaves: list[Any], n: int) -> Any:
    """A Jacobian's rows the way they were made before plans: autograd.grad per seed."""
    from gradcli import autograd as E

    for i in range(n):
        seed = np.zeros(n, dtype=root.dtype)
        seed[i] = 1.0
        found = E.grad(
            root,
            leaves,
            grad_outputs=seed.reshape(root.shape),
            retain_graph=True,
            allow_unused=True,
        )
        yield [None if g is None else g.data for g in found]


def _same_arrays(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    ("text", "inputs"), [c for c in CASES if c[1]], ids=[t for t, i in CASES if i]
)
def test_jacobian_and_hessian_rows_replay_one_recorded_backward_to_the_last_bit(
    text: str, inputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """jacobian's rows and hessian's (issue 14, item 3): the first backward pass recorded,
    the others replayed with their seeds, the bits of one autograd.grad per row."""
    from gradcli import analysis
    from gradcli.analysis import derivatives

    jac = analysis.jacobian(text, inputs)
    scalar = jac.value.ndim == 0
    hess = analysis.hessian(text, inputs) if scalar else None
    monkeypatch.setattr(derivatives, "_rows", _rows_by_grad)
    want = analysis.jacobian(text, inputs)
    assert _same_arrays(jac.value, want.value)
    for name in want.jacobian:
        assert _same_arrays(jac.jacobian[name], want.jacobian[name]), name
    if hess is not None:
        want_h = analysis.hessian(text, inputs)
        assert _same_arrays(hess.hessian, want_h.hessian)


def test_jacobian_rows_of_a_tall_output_walk_the_graph_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nine rows, one walk of the graph (recorded): the other eight are replays."""
    from gradcli import analysis
    from gradcli.autograd import backward
    from gradcli.autograd.replay import Recorder

    walks = []
    record = Recorder.backward

    def counted(self: Recorder, *args: Any) -> Any:
        walks.append(1)
        return record(self, *args)

    def no_walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a row walked the graph")

    monkeypatch.setattr(Recorder, "backward", counted)
    monkeypatch.setattr(backward, "run", no_walk)
    x = np.array([0.3, -1.2, 2.0])
    got = analysis.jacobian("tanh(outer(x, x)) * 2", {"x": x})
    assert len(walks) == 1
    want = np.zeros((3, 3, 3))
    t = np.tanh(np.outer(x, x))
    for i in range(3):
        for j in range(3):
            want[i, j, i] += 2 * (1 - t[i, j] ** 2) * x[j]
            want[i, j, j] += 2 * (1 - t[i, j] ** 2) * x[i]
    np.testing.assert_allclose(got.jacobian["x"], want, rtol=1e-14, atol=0)


BIG = 1 << 15  # above replay.POOL_MIN: the plan keeps its large arrays between replays


@pytest.mark.parametrize(
    "text",
    [
        "sum(a*b+b)",
        "sum(tanh(a) * exp(-b**2))",
        "h = a * b; sum(h * h)",  # a binding: h is an output, never pooled
        "reshape(a * b + 1, 2, -1)",  # the output is a view of a pooled step's array
        "a * b - b / 3",  # the output itself made by a pooled step
    ],
)
def test_a_pooled_plan_gives_fresh_bits_and_never_writes_into_what_it_handed_out(
    text: str,
) -> None:
    from gradcli.compiled import _Recorded

    rng = np.random.default_rng(5)
    f = gradcli.compile(text)
    results, wants = [], []
    for _ in range(4):
        inputs = {"a": rng.normal(size=BIG), "b": rng.normal(size=BIG)}
        results.append(f(inputs))
        wants.append(gradcli.evaluate(text, inputs))
    for k, (got, want) in enumerate(zip(results, wants, strict=True)):
        assert_same_bits(got, want, f"call {k}, checked after the last call")
    (entry,) = f.plans._entries.values()
    assert isinstance(entry, _Recorded) and entry.plan.pooled


def test_a_pooled_plan_from_threads_gives_single_threaded_bits() -> None:
    text = "sum(tanh(a * b) * b)"
    rng = np.random.default_rng(6)
    inputs = [{"a": rng.normal(size=BIG), "b": rng.normal(size=BIG)} for _ in range(6)]
    wants = [gradcli.evaluate(text, i) for i in inputs]
    f = gradcli.compile(text)

    def work(t: int) -> None:
        for rep in range(5):
            for k, i in enumerate(inputs):
                assert_same_bits(f(i), wants[k], f"thread {t}, input {k}, pass {rep}")

    _in_threads(work, 3)


@pytest.mark.parametrize(
    ("command", "kwargs"),
    [
        ("optimize", {"optimizer": "adam", "steps": 6, "lr": 0.05}),
        ("optimize", {"optimizer": "momentum", "steps": 5, "zero_grad": False}),
        ("check", {}),
    ],
    ids=["adam", "momentum, grads accumulate", "check"],
)
def test_optimize_and_check_on_large_inputs_reuse_buffers_to_the_same_bits(
    command: str, kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool (buffers kept between passes) changes no number: the same result as
    evaluating afresh every pass, on inputs large enough to be pooled."""
    from gradcli import analysis
    from gradcli.compiled import Plans

    rng = np.random.default_rng(8)
    n = BIG if command == "optimize" else 3
    text = "sum(tanh(a * b) ** 2) + sum(b * b) / 100"
    inputs = {"a": rng.normal(size=n), "b": rng.normal(size=n)}
    if command == "check":  # finite differences per element: a small input, pooled below
        monkeypatch.setattr("gradcli.autograd.replay.POOL_MIN", 1)
    planned = getattr(analysis, command)(text, inputs, **kwargs)
    monkeypatch.setattr(Plans, "run", lambda self, *args, **kw: None)  # afresh every time
    fresh = getattr(analysis, command)(text, inputs, **kwargs)
    assert planned.to_json() == fresh.to_json()


@pytest.mark.parametrize(
    "text",
    [
        "sum(N * 2) + sum(transpose(M) * 2)",
        "sum(sum(transpose(M) * 2, 0) * sum(N * N, 0))",
        "sum(N * 3 + N) + sum(transpose(M) * 2)",
    ],
)
def test_a_pooled_buffer_keeps_the_memory_order_of_the_step_it_serves(text: str) -> None:
    """transpose(M) * 2 is F-ordered: written into a C-ordered buffer its elements would
    be equal but a later sum, which adds in memory order, would not (found by review)."""
    rng = np.random.default_rng(9)
    inputs = {"M": rng.normal(size=(128, 128)), "N": rng.normal(size=(128, 128))}
    want = gradcli.evaluate(text, inputs)
    f = gradcli.compile(text)
    for k in range(3):
        assert_same_bits(f(inputs), want, f"call {k}")


@pytest.mark.parametrize(
    "text",
    [
        "hid = cosh(-pow(abs(ones(2, 1)) + 0.5, 100.0)); y",  # found by the property test
        "hid = cosh(ones(2) * 1000); y * x",
        "exp(x * 1000) + cosh(ones(2) * 1000)",
        "sum(log(zeros(3)) * 0 + x)",
    ],
)
def test_a_replay_counts_the_errors_of_the_constants_it_does_not_compute_again(text: str) -> None:
    """A part of the program that depends on no input is computed once, when the plan is
    recorded; its floating-point errors are still each evaluation's, as in a fresh one."""
    f = gradcli.compile(text)
    for inputs in ({"x": [1.0], "y": 0.0}, {"x": [2.0], "y": 1.0}):
        want = gradcli.evaluate(text, inputs)
        assert want.warnings and any("encountered" in w for w in want.warnings)
        for _ in range(2):  # recorded, then replayed
            got = f(inputs)
            assert (got.warnings, got.notes) == (want.warnings, want.notes)


@pytest.mark.parametrize(
    "inputs",
    [{"a": [1e308, 1e308], "b": [1.0, 1.0]}, {"a": [1.0, -1.0], "b": [np.inf, np.inf]}],
    ids=["overflow", "invalid"],
)
def test_a_replayed_sum_counts_its_errors_once(inputs: dict[str, Any]) -> None:
    """A small sum is replayed by one NumPy call, checked against the recorded bits when
    the plan is made (replay._sum_all): the check's errors are not the evaluation's."""
    f = gradcli.compile("sum(a * b)")
    want = gradcli.evaluate("sum(a * b)", inputs)
    assert want.warnings and any("encountered in 1 operation" in w for w in want.warnings)
    for _ in range(3):  # recorded, then replayed
        assert f(inputs).warnings == want.warnings


def test_checks_direct_replays_count_errors_as_fresh_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """check replays each input's differences straight from the plan (no Result per pass):
    the floating-point errors it counts, the constants' included, are a fresh run's."""
    from gradcli import analysis
    from gradcli.compiled import Plans

    text = "sum(exp(x) * y) + sum(exp(800 * ones(3)))"  # x's passes and a constant overflow
    inputs = {"x": [700.0, 710.0, 1.0], "y": [1.0, 2.0, 3.0]}
    planned = analysis.check(text, inputs)
    monkeypatch.setattr(Plans, "run", lambda self, *args, **kw: None)  # afresh every time
    fresh = analysis.check(text, inputs)
    assert planned.to_json() == fresh.to_json()
    assert planned.warnings == fresh.warnings and planned.warnings
