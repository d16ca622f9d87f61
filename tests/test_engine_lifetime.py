"""Engine v2's lifetime and isolation guarantees, with real numbers (float64).

* Lifetime: a node keeps only what its derivative rule reads, never the tensor it made, so
  an intermediate no rule saved dies as soon as forward no longer needs it, and a saved
  value lives exactly until the backward pass that used it (unless ``retain_graph``).
* Release: a second backward through freed values raises torch's error; ``retain_graph``
  and ``create_graph`` keep them.
* Isolation: grad mode, the element limit and floating-point counting belong to one
  thread; ``evaluate()`` is self-contained (correct inside ``no_grad()``, from any thread).

Threaded tests use a ``threading.Barrier`` so the threads really overlap, and compare every
result bit for bit with the single-threaded one. No timing is asserted.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gradcli
from gradcli import analysis
from gradcli.autograd.node import FREED_MESSAGE

SECOND_TIME = "Trying to backward through the graph a second time"
WAIT = 60.0  # seconds a barrier or event waits before the test fails instead of hanging

# The program of the thread and analysis tests: W @ x is used twice by the square.
PROG = "sum(tanh(W @ x) ** 2)"
W_VALS = [
    [0.5, -0.25, 0.75, 0.1],
    [-0.3, 0.2, 0.4, -0.6],
    [0.05, 0.9, -0.15, 0.35],
]
X_VALS = [0.6, -0.4, 0.8, 0.2]
INPUTS = {"W": W_VALS, "x": X_VALS}
W_NP = np.array(W_VALS)
X_NP = np.array(X_VALS)

# 100 elements made inside the computation: fails under max_elements=5, fine by default
ONES_PROG = "sum(ones(100) * x)"


def closed_form() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """f = sum(tanh(W x)^2): h = tanh(u), u = W x; df/du = 2h(1 - h^2) = phi;
    d phi/du = (2 - 6h^2)(1 - h^2). Returns (h, phi, dphi, u)."""
    u = W_NP @ X_NP
    h = np.tanh(u)
    phi = 2.0 * h * (1.0 - h**2)
    dphi = (2.0 - 6.0 * h**2) * (1.0 - h**2)
    return h, phi, dphi, u


def run_threads(workers: list[Callable[[], object]]) -> list[object]:
    """Run each worker in its own thread, all released together; their results in order
    (an exception in a worker is raised here)."""
    barrier = threading.Barrier(len(workers))

    def start(fn: Callable[[], object]) -> object:
        barrier.wait(timeout=WAIT)
        return fn()

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(start, fn) for fn in workers]
        return [f.result(timeout=WAIT) for f in futures]


# --------------------------------------------------------------------------------------
# 1. Lifetime: what a node keeps, and for how long
# --------------------------------------------------------------------------------------


def test_unsaved_intermediate_dies_while_the_graph_lives() -> None:
    # add's rule reads nothing and mul keeps only its inputs' arrays (a, b): nothing
    # refers to the tensor a * b or its array once forward has used it.
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    m = a * b
    r_t = weakref.ref(m)
    r_d = weakref.ref(m.data)
    s = m + b
    del m
    # no gc.collect(): the graph has no reference cycles, reference counting frees it
    assert r_t() is None
    assert r_d() is None
    # the graph itself is alive: s's node leads to mul's node, which leads to the leaves
    assert s.grad_fn.name() == "AddBackward0"
    mul_node = s.grad_fn.next_functions[0][0]
    assert mul_node.name() == "MulBackward0"
    assert [fn.name() for fn, _ in mul_node.next_functions] == ["AccumulateGrad"] * 2
    assert s.tolist() == [20.0, 30.0]

    s.sum().backward()
    assert a.grad.tolist() == [5.0, 6.0]  # b's values
    assert b.grad.tolist() == [4.0, 5.0]  # a + 1


def test_a_node_does_not_keep_the_tensor_it_made() -> None:
    # loss = sum(a * b + b): the tensors a * b and a * b + b both die; backward still works
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    s = a * b + b
    r_s = weakref.ref(s)
    r_sd = weakref.ref(s.data)
    loss = gradcli.sum(s)
    del s
    assert r_s() is None
    assert r_sd() is None  # sum's rule reads only the shape
    assert loss.item() == 50.0
    loss.backward()
    assert a.grad.tolist() == [5.0, 6.0]
    assert b.grad.tolist() == [4.0, 5.0]


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# op, input values, op and d op / dx on NumPy (the rule reads the op's output)
SAVES_OUTPUT = [
    ("exp", [0.0, 1.0, -2.0], np.exp, np.exp),
    ("tanh", [0.0, 0.5, -1.5], np.tanh, lambda x: 1.0 - np.tanh(x) ** 2),
    ("sigmoid", [0.0, 2.0, -1.0], np_sigmoid, lambda x: np_sigmoid(x) * (1.0 - np_sigmoid(x))),
    ("sqrt", [0.25, 1.0, 4.0], np.sqrt, lambda x: 0.5 / np.sqrt(x)),
]
NpFn = Callable[[np.ndarray], np.ndarray]


@pytest.mark.parametrize(
    ("op", "values", "fwd", "deriv"), SAVES_OUTPUT, ids=[c[0] for c in SAVES_OUTPUT]
)
def test_saved_output_lives_until_backward_then_is_released(
    op: str, values: list[float], fwd: NpFn, deriv: NpFn
) -> None:
    x = gradcli.tensor(values, requires_grad=True)
    e = getattr(gradcli, op)(x)
    r_t = weakref.ref(e)
    r_d = weakref.ref(e.data)
    loss = gradcli.sum(e + 1.0)  # add saves nothing: only op's node keeps e's array
    del e
    assert r_t() is None  # the tensor is gone ...
    kept = r_d()
    assert kept is not None  # ... its array is not: op's rule reads it
    np.testing.assert_allclose(kept, fwd(np.array(values)), rtol=1e-15)
    del kept

    loss.backward()  # no retain_graph: the saved array is released
    assert r_d() is None
    np.testing.assert_allclose(x.grad.data, deriv(np.array(values)), rtol=1e-14, atol=1e-15)


def test_saved_output_with_retain_graph_lives_until_the_graph_dies() -> None:
    x = gradcli.tensor([0.0, 1.0, -2.0], requires_grad=True)
    e = gradcli.exp(x)
    r_d = weakref.ref(e.data)
    loss = gradcli.sum(e + 1.0)
    del e
    loss.backward(retain_graph=True)
    assert r_d() is not None  # retained for the next backward
    loss.backward()
    np.testing.assert_array_equal(x.grad.data, 2.0 * np.exp([0.0, 1.0, -2.0]))
    assert r_d() is None  # the second backward did not retain: released
    assert loss.item() == pytest.approx(3.0 + np.exp([0.0, 1.0, -2.0]).sum(), rel=1e-15)


def test_retained_graph_frees_its_saved_values_when_dropped() -> None:
    x = gradcli.tensor([0.5, -1.0], requires_grad=True)
    t = gradcli.tanh(x)
    r_d = weakref.ref(t.data)
    loss = gradcli.sum(t + 2.0)
    del t
    loss.backward(retain_graph=True)
    assert r_d() is not None
    del loss  # the user's last reference to the graph
    assert r_d() is None
    np.testing.assert_allclose(x.grad.data, 1.0 - np.tanh([0.5, -1.0]) ** 2, rtol=1e-15)


def test_intermediate_saved_as_an_input_lives_until_backward() -> None:
    # (a * b) * c: the second mul reads its input a * b, so that array lives until backward
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    c = gradcli.tensor([2.0, -1.0], requires_grad=True)
    m = a * b
    r_t = weakref.ref(m)
    r_d = weakref.ref(m.data)
    loss = gradcli.sum(m * c)
    del m
    assert r_t() is None
    assert r_d() is not None
    assert r_d().tolist() == [15.0, 24.0]
    loss.backward()
    assert r_d() is None
    assert a.grad.tolist() == [10.0, -6.0]  # b * c
    assert b.grad.tolist() == [6.0, -4.0]  # a * c
    assert c.grad.tolist() == [15.0, 24.0]  # a * b


def test_named_binding_still_reports_value_and_gradient() -> None:
    # `h` is a binding: evaluate keeps it (and its gradient) for .intermediates even though
    # no rule needs the tensor itself after forward
    xs = np.array([0.5, -1.0, 2.0])
    r = gradcli.evaluate("h = tanh(x); sum(h * h)", {"x": xs.tolist()})
    h = np.tanh(xs)
    assert set(r.intermediates) == {"h"}
    h_value, h_grad = r.intermediates["h"]
    np.testing.assert_allclose(h_value, h, rtol=1e-15)
    np.testing.assert_allclose(h_grad, 2.0 * h, rtol=1e-15)
    np.testing.assert_allclose(r.value, np.sum(h * h), rtol=1e-15)
    np.testing.assert_allclose(r.grads["x"], 2.0 * h * (1.0 - h**2), rtol=1e-14)
    j = r.to_json()["intermediates"]["h"]
    assert j["shape"] == [3]
    np.testing.assert_allclose(j["grad"], 2.0 * h, rtol=1e-15)


# --------------------------------------------------------------------------------------
# 2. Release after backward, retain_graph, create_graph
# --------------------------------------------------------------------------------------


def xy() -> tuple[gradcli.Tensor, gradcli.Tensor]:
    return (
        gradcli.tensor([1.0, 2.0, 3.0], requires_grad=True),
        gradcli.tensor([4.0, 5.0, 6.0], requires_grad=True),
    )


def test_second_backward_raises_torchs_error_and_leaves_grads() -> None:
    x, y = xy()
    loss = (x * y).sum()
    loss.backward()
    assert x.grad.tolist() == [4.0, 5.0, 6.0]
    assert y.grad.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match=SECOND_TIME) as info:
        loss.backward()
    assert str(info.value) == FREED_MESSAGE
    assert "Specify retain_graph=True" in str(info.value)
    # the failed pass accumulated nothing
    assert x.grad.tolist() == [4.0, 5.0, 6.0]
    assert y.grad.tolist() == [1.0, 2.0, 3.0]


def test_retain_graph_allows_a_second_backward_and_grads_add_up() -> None:
    x, y = xy()
    loss = (x * y).sum()
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    assert x.grad.tolist() == [8.0, 10.0, 12.0]
    assert y.grad.tolist() == [2.0, 4.0, 6.0]
    loss.backward()  # the third one releases ...
    assert x.grad.tolist() == [12.0, 15.0, 18.0]
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        loss.backward()  # ... so the fourth one fails
    assert x.grad.tolist() == [12.0, 15.0, 18.0]


def test_graph_that_saved_nothing_can_be_walked_twice() -> None:
    # as in torch: add and sum read nothing, so nothing was freed
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    loss = (x + x).sum()
    loss.backward()
    loss.backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_autograd_grad_releases_too() -> None:
    x, y = xy()
    loss = (x * y).sum()
    (gx,) = gradcli.grad(loss, [x])
    assert gx.tolist() == [4.0, 5.0, 6.0]
    assert x.grad is None  # grad() writes no .grad
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        loss.backward()
    assert x.grad is None
    assert y.grad is None


def test_autograd_grad_with_retain_graph_then_backward() -> None:
    x, y = xy()
    loss = (x * y).sum()
    gx, gy = gradcli.grad(loss, [x, y], retain_graph=True)
    assert gx.tolist() == [4.0, 5.0, 6.0]
    assert gy.tolist() == [1.0, 2.0, 3.0]
    loss.backward()
    assert x.grad.tolist() == [4.0, 5.0, 6.0]
    assert y.grad.tolist() == [1.0, 2.0, 3.0]


def test_create_graph_implies_retain_graph() -> None:
    x, y = xy()
    loss = (x * y).sum()
    loss.backward(create_graph=True)
    assert x.grad.tolist() == [4.0, 5.0, 6.0]
    loss.backward()  # works: create_graph retained the saved values
    assert x.grad.tolist() == [8.0, 10.0, 12.0]
    assert y.grad.tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        loss.backward()


def test_create_graph_keeps_the_first_graph_for_later_passes() -> None:
    # d/dx sum(x^3) = 3x^2 as a graph; its own backward gives 6x. The graph of g reaches
    # the forward nodes too (its rules read their saved values), so the second pass
    # retains them here for the third.
    x = gradcli.tensor([1.0, -2.0, 0.5], requires_grad=True)
    loss = gradcli.sum(x * x * x)
    (g,) = gradcli.grad(loss, [x], create_graph=True)
    assert g.requires_grad
    assert g.tolist() == [3.0, 12.0, 0.75]
    (h,) = gradcli.grad(gradcli.sum(g), [x], retain_graph=True)
    assert h.tolist() == [6.0, -12.0, 3.0]
    (g2,) = gradcli.grad(loss, [x])  # the first graph was retained by create_graph
    assert g2.tolist() == [3.0, 12.0, 0.75]
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        gradcli.grad(loss, [x])


def test_analysis_jacobian_of_a_vector_output() -> None:
    # one backward per output element through the same graph: needs retain_graph inside
    h, phi, _, _ = closed_form()
    jac = analysis.jacobian("h = tanh(W @ x); h * h", INPUTS)
    np.testing.assert_allclose(jac.value, h * h, rtol=1e-15)
    assert jac.jacobian["x"].shape == (3, 4)
    assert jac.jacobian["W"].shape == (3, 3, 4)
    np.testing.assert_allclose(jac.jacobian["x"], phi[:, None] * W_NP, rtol=1e-13, atol=1e-15)
    expected_w = np.einsum("ij,i,k->ijk", np.eye(3), phi, X_NP)
    np.testing.assert_allclose(jac.jacobian["W"], expected_w, rtol=1e-13, atol=1e-15)


def test_analysis_hessian_against_closed_form_and_finite_differences() -> None:
    _, _, dphi, _ = closed_form()
    hx = analysis.hessian(PROG, INPUTS, wrt=["x"])
    assert hx.labels == ["x[0]", "x[1]", "x[2]", "x[3]"]
    # d2f/dx2 = W^T diag(dphi) W
    np.testing.assert_allclose(hx.hessian, W_NP.T @ (dphi[:, None] * W_NP), rtol=1e-12, atol=1e-14)

    full = analysis.hessian(PROG, INPUTS)
    n = W_NP.size + X_NP.size
    assert full.hessian.shape == (n, n)
    np.testing.assert_allclose(full.hessian, full.hessian.T, rtol=1e-12, atol=1e-14)
    # rows by central differences of the (evaluate) gradient, one input element at a time
    flat0 = np.concatenate([W_NP.ravel(), X_NP])
    eps = 1e-5

    def gradient(flat: np.ndarray) -> np.ndarray:
        w, x = flat[: W_NP.size].reshape(W_NP.shape), flat[W_NP.size :]
        r = gradcli.evaluate(PROG, {"W": w, "x": x})
        return np.concatenate([r.grads["W"].ravel(), r.grads["x"]])

    numeric = np.empty((n, n))
    for k in range(n):
        step = np.zeros(n)
        step[k] = eps
        numeric[k] = (gradient(flat0 + step) - gradient(flat0 - step)) / (2 * eps)
    np.testing.assert_allclose(full.hessian, numeric, rtol=1e-6, atol=1e-8)
    # the x block of the full Hessian is the wrt=["x"] one
    np.testing.assert_allclose(full.hessian[W_NP.size :, W_NP.size :], hx.hessian, rtol=1e-14)


@pytest.mark.parametrize("order", [1, 2])
def test_analysis_check_passes(order: int) -> None:
    c = analysis.check(PROG, INPUTS, order=order)
    assert c.ok, c.to_json()
    assert set(c.inputs) == {"W", "x"}
    assert all(ic.ok and ic.max_abs_error < 1e-6 for ic in c.inputs.values())


# --------------------------------------------------------------------------------------
# 3. Threads
# --------------------------------------------------------------------------------------


def same_result(r: gradcli.Result, ref: gradcli.Result) -> None:
    assert np.array_equal(r.value, ref.value)
    assert r.grads.keys() == ref.grads.keys()
    for name in ref.grads:
        assert np.array_equal(r.grads[name], ref.grads[name]), name
    assert r.warnings == ref.warnings


def test_reference_result_has_real_numbers() -> None:
    h, phi, _, _ = closed_form()
    ref = gradcli.evaluate(PROG, INPUTS)
    np.testing.assert_allclose(ref.value, np.sum(h**2), rtol=1e-15)
    np.testing.assert_allclose(ref.grads["x"], W_NP.T @ phi, rtol=1e-14)
    np.testing.assert_allclose(ref.grads["W"], np.outer(phi, X_NP), rtol=1e-14)
    assert ref.warnings == []


def test_evaluate_from_eight_threads_matches_single_threaded_bit_for_bit() -> None:
    ref = gradcli.evaluate(PROG, INPUTS)

    def worker() -> list[gradcli.Result]:
        return [gradcli.evaluate(PROG, INPUTS) for _ in range(50)]

    batches = run_threads([worker] * 8)
    results = [r for batch in batches for r in batch]  # type: ignore[union-attr]
    assert len(results) == 400
    for r in results:
        same_result(r, ref)


def test_evaluate_in_threads_beside_no_grad_and_limited_threads() -> None:
    ref = gradcli.evaluate(PROG, INPUTS)
    ones_ref = gradcli.evaluate(ONES_PROG, {"x": 1.0})
    assert ones_ref.value == 100.0
    assert ones_ref.grads["x"] == 100.0
    main_done = threading.Event()
    n_main = 8

    def main_worker() -> int:
        for _ in range(50):
            same_result(gradcli.evaluate(PROG, INPUTS), ref)
            # 100 elements made inside the computation: a leaked limit of 5 would refuse it
            same_result(gradcli.evaluate(ONES_PROG, {"x": 1.0}), ones_ref)
        return 50

    def no_grad_worker() -> int:
        n = 0
        with gradcli.no_grad():
            while n < 20 or not main_done.is_set():
                t = gradcli.tensor([1.0, 2.0], requires_grad=True)
                u = gradcli.tanh(t * 3.0) + t
                assert not gradcli.is_grad_enabled()
                assert u.requires_grad is False
                assert u.grad_fn is None
                np.testing.assert_array_equal(u.data, np.tanh([3.0, 6.0]) + np.array([1.0, 2.0]))
                if n % 5 == 0:  # an evaluation in here is self-contained ...
                    same_result(gradcli.evaluate(PROG, INPUTS), ref)
                    assert not gradcli.is_grad_enabled()  # ... and leaves no_grad on
                n += 1
        return n

    def limited_worker() -> int:
        n = 0
        while n < 20 or not main_done.is_set():
            with pytest.raises(gradcli.LimitError, match="over the limit of 5"):
                gradcli.evaluate(ONES_PROG, {"x": 1.0}, max_elements=5)
            n += 1
        return n

    def main_then_signal(counter: list[int], lock: threading.Lock) -> int:
        try:
            return main_worker()
        finally:
            with lock:
                counter[0] += 1
                if counter[0] == n_main:
                    main_done.set()

    counter = [0]
    lock = threading.Lock()
    workers: list[Callable[[], object]] = [lambda: main_then_signal(counter, lock)] * n_main
    workers += [no_grad_worker] * 2 + [limited_worker] * 2
    counts = run_threads(workers)
    assert counts[:n_main] == [50] * n_main
    assert all(isinstance(c, int) and c >= 20 for c in counts[n_main:])

    # nothing leaked into this thread: default limit, grad mode on
    assert gradcli.is_grad_enabled()
    after = gradcli.evaluate(ONES_PROG, {"x": 1.0})
    assert after.value == 100.0
    assert after.grads["x"] == 100.0
    big = gradcli.ones(1000)  # the tensor API outside evaluate is not limited either
    assert big.shape == (1000,)


X_T = [0.3, -1.2, 0.7, 2.0, -0.1]
Y_T = [1.5, 0.4, -0.8, 0.25, 3.0]


def chain_grad() -> np.ndarray:
    x = gradcli.tensor(X_T, requires_grad=True)
    y = gradcli.tensor(Y_T)
    loss = gradcli.sum(gradcli.exp(gradcli.tanh(x * y + 0.5)))
    loss.backward()
    return x.grad.data


def test_tensor_api_from_threads_each_on_its_own_tensors() -> None:
    ref = chain_grad()
    xs, ys = np.array(X_T), np.array(Y_T)
    t = np.tanh(xs * ys + 0.5)
    np.testing.assert_allclose(ref, np.exp(t) * (1.0 - t**2) * ys, rtol=1e-14)

    def worker() -> int:
        for _ in range(50):
            g = chain_grad()
            assert np.array_equal(g, ref)
            assert gradcli.is_grad_enabled()
        return 50

    def part_time_no_grad_worker() -> int:
        for i in range(50):
            if i % 2:
                with gradcli.no_grad():
                    x = gradcli.tensor(X_T, requires_grad=True)
                    y = gradcli.tensor(Y_T)
                    loss = gradcli.sum(gradcli.exp(gradcli.tanh(x * y + 0.5)))
                    assert loss.requires_grad is False
                    assert loss.grad_fn is None
                    with pytest.raises(RuntimeError, match="does not require grad"):
                        loss.backward()
                    assert x.grad is None
            else:
                assert np.array_equal(chain_grad(), ref)
        return 50

    counts = run_threads([worker] * 5 + [part_time_no_grad_worker])
    assert counts == [50] * 6


def test_no_grad_in_one_thread_does_not_stop_recording_in_another() -> None:
    entered = threading.Event()
    main_checked = threading.Event()
    seen: dict[str, object] = {}

    def sleeper() -> None:
        with gradcli.no_grad():
            entered.set()
            assert main_checked.wait(WAIT)
            # the main thread recorded meanwhile: this thread is still in no_grad
            seen["enabled"] = gradcli.is_grad_enabled()
            t = gradcli.tensor([1.0], requires_grad=True)
            seen["requires_grad"] = (t * 2.0).requires_grad
        seen["after"] = gradcli.is_grad_enabled()

    thread = threading.Thread(target=sleeper)
    thread.start()
    try:
        assert entered.wait(WAIT)
        assert gradcli.is_grad_enabled()
        x = gradcli.tensor([2.0, -3.0], requires_grad=True)
        y = x * x * x
        assert y.requires_grad
        assert y.grad_fn is not None and y.grad_fn.name() == "MulBackward0"
        y.sum().backward()
        assert x.grad.tolist() == [12.0, 27.0]
    finally:
        main_checked.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert seen == {"enabled": False, "requires_grad": False, "after": True}


def test_threads_switching_grad_mode_see_their_own_mode_and_leave_no_count() -> None:
    """The hot path trusts GRAD while no thread is off it (state.OFF_DEFAULT): threads
    entering and leaving no_grad, backward and tracing at once must each see their own
    mode every time, and leave the count empty."""
    from gradcli.autograd import state

    def work(seed: int) -> list[str]:
        wrong = []
        x = gradcli.tensor([1.0 + seed, 2.0], requires_grad=True)
        for i in range(300):
            with gradcli.no_grad():
                if (x * 2.0).requires_grad:
                    wrong.append(f"recorded in no_grad at {i}")
                with gradcli.enable_grad():
                    if not (x * 2.0).requires_grad:
                        wrong.append(f"not recorded in enable_grad at {i}")
            y = (x * x).sum()
            if not y.requires_grad:
                wrong.append(f"not recorded at {i}")
            y.backward()
        if x.grad.tolist() != [600.0 * (1.0 + seed), 1200.0]:
            wrong.append(f"gradient {x.grad.tolist()}")
        return wrong

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(16)))
    assert results == [[]] * 16
    assert state.OFF_DEFAULT == []
    assert gradcli.is_grad_enabled()


# --------------------------------------------------------------------------------------
# 4. no_grad and evaluate()
# --------------------------------------------------------------------------------------


def test_evaluate_inside_no_grad_is_self_contained() -> None:
    outside = gradcli.evaluate("a*b+b", {"a": [3, 4], "b": [5, 6]})
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    with gradcli.no_grad():
        inside = gradcli.evaluate("a*b+b", {"a": [3, 4], "b": [5, 6]})
        # still no grad mode in this block after evaluate() returned
        assert not gradcli.is_grad_enabled()
        z = x * 2.0
        assert z.requires_grad is False
        assert z.grad_fn is None
    assert gradcli.is_grad_enabled()
    assert (x * 2.0).requires_grad  # on again after the block

    same_result(inside, outside)
    assert inside.value.tolist() == [20.0, 30.0]
    assert inside.grads["a"].tolist() == [5.0, 6.0]
    assert inside.grads["b"].tolist() == [4.0, 5.0]
    j = inside.to_json()["inputs"]
    assert j["a"] == {"shape": [2], "value": [3.0, 4.0], "requires_grad": True, "grad": [5.0, 6.0]}
    assert j["b"] == {"shape": [2], "value": [5.0, 6.0], "requires_grad": True, "grad": [4.0, 5.0]}


def test_evaluate_bindings_inside_no_grad() -> None:
    xs = np.array([0.5, -1.0, 2.0])
    outside = gradcli.evaluate("h = tanh(x); sum(h * h)", {"x": xs.tolist()})
    with gradcli.no_grad():
        inside = gradcli.evaluate("h = tanh(x); sum(h * h)", {"x": xs.tolist()})
    same_result(inside, outside)
    assert np.array_equal(inside.intermediates["h"][1], outside.intermediates["h"][1])
    np.testing.assert_allclose(inside.intermediates["h"][1], 2.0 * np.tanh(xs), rtol=1e-15)


def test_analysis_inside_no_grad() -> None:
    _, phi, dphi, _ = closed_form()
    with gradcli.no_grad():
        jac = analysis.jacobian(PROG, INPUTS, wrt=["x"])
        hx = analysis.hessian(PROG, INPUTS, wrt=["x"])
        assert not gradcli.is_grad_enabled()
    np.testing.assert_allclose(jac.jacobian["x"], W_NP.T @ phi, rtol=1e-14)
    np.testing.assert_allclose(hx.hessian, W_NP.T @ (dphi[:, None] * W_NP), rtol=1e-12, atol=1e-14)


def test_no_grad_as_a_decorator_and_enable_grad_inside() -> None:
    @gradcli.no_grad()
    def scaled(t: gradcli.Tensor) -> tuple[gradcli.Tensor, bool]:
        return t * 3.0, gradcli.is_grad_enabled()

    @gradcli.enable_grad()
    def recorded(t: gradcli.Tensor) -> gradcli.Tensor:
        return t * 3.0

    x = gradcli.tensor([1.0, -2.0], requires_grad=True)
    y, enabled = scaled(x)
    assert enabled is False
    assert y.requires_grad is False
    assert y.tolist() == [3.0, -6.0]
    assert gradcli.is_grad_enabled()  # restored after the call
    with gradcli.no_grad():
        z = recorded(x)  # enable_grad inside no_grad records
        assert not gradcli.is_grad_enabled()
    assert z.requires_grad
    z.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# --------------------------------------------------------------------------------------
# 5. Floating-point warning counts, per thread
# --------------------------------------------------------------------------------------


def test_floating_point_warnings_are_counted_per_thread() -> None:
    bad = gradcli.evaluate("sum(log(x))", {"x": [0.0, 1.0]})
    assert bad.value == -np.inf
    assert bad.grads["x"].tolist() == [np.inf, 1.0]
    # forward's log(0) is counted once; backward's 1/0 is expected and not counted
    expected = [
        "divide by zero encountered in 1 operation",
        "the output has non-finite values (nan or inf)",
        "non-finite gradient for x",
    ]
    assert bad.warnings == expected

    # Large arrays, so each evaluation spends its time in NumPy loops that release the GIL:
    # the threads' counting windows really overlap.
    clean_x = np.linspace(1.0, 2.0, 100_000)
    bad_x = clean_x.copy()
    bad_x[0] = 0.0
    clean_ref = gradcli.evaluate("sum(log(x))", {"x": clean_x})
    assert clean_ref.warnings == []
    np.testing.assert_allclose(clean_ref.value, np.sum(np.log(clean_x)), rtol=1e-12)
    np.testing.assert_array_equal(clean_ref.grads["x"], 1.0 / clean_x)
    assert gradcli.evaluate("sum(log(x))", {"x": bad_x}).warnings == expected

    def bad_worker() -> int:
        for _ in range(30):
            r = gradcli.evaluate("sum(log(x))", {"x": bad_x})
            assert r.warnings == expected
        return 30

    def clean_worker() -> int:
        for _ in range(30):
            r = gradcli.evaluate("sum(log(x))", {"x": clean_x})
            assert r.warnings == []
            same_result(r, clean_ref)
        return 30

    assert run_threads([bad_worker, clean_worker] * 3) == [30] * 6


# --------------------------------------------------------------------------------------------
# Found in review: autograd.grad runs only what leads to its inputs; output-only saves
# --------------------------------------------------------------------------------------------


def test_grad_visits_and_releases_only_the_part_of_the_graph_it_needs():
    # torch 2.13: grad(y, [a]) never runs b's branch, so a later backward through it works
    a = gradcli.tensor([1.0, 2.0], requires_grad=True)
    b = gradcli.tensor([0.5, -0.5], requires_grad=True)
    eb = b * b
    y = (a * a).sum() + eb.sum()
    (ga,) = gradcli.autograd.grad(y, [a])
    assert ga.tolist() == [2.0, 4.0]
    eb.sum().backward()
    assert b.grad.tolist() == [1.0, -1.0]
    # a target's own rule is not run (nor its values released) when no other target needs it
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    (gh,) = gradcli.autograd.grad(gradcli.sin(h).sum(), [h])
    np.testing.assert_allclose(gh.data, np.cos([1.0, 4.0]))
    h.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("fn", ["exp", "tanh", "sigmoid", "sqrt", "softmax", "inv"])
def test_a_node_that_saved_only_its_output_raises_torchs_error_when_walked_again(fn):
    x = gradcli.tensor([[1.0, 0.5], [0.25, 2.0]], requires_grad=True)
    y = getattr(gradcli, fn)(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_set_grad_enabled_called_alone_sets_the_mode_as_torch():
    x = gradcli.tensor([1.0], requires_grad=True)
    try:
        gradcli.set_grad_enabled(False)
        assert not (x * 2.0).requires_grad
        with gradcli.set_grad_enabled(True):
            assert (x * 2.0).requires_grad
        assert not (x * 2.0).requires_grad
    finally:
        gradcli.set_grad_enabled(True)
    assert (x * 2.0).requires_grad


def test_grad_with_create_graph_of_a_scalar_leaf_is_writable():
    x = gradcli.tensor(3.0, requires_grad=True)
    (g,) = gradcli.autograd.grad(x.sum(), [x], create_graph=True)
    g.zero_()
    assert g.item() == 0.0


# --------------------------------------------------------------------------------------
# Peak memory of a backward pass, counted by tracemalloc (NumPy reports its buffers there):
# deterministic, unlike the resident size the benchmarks measure (W3a, W3b).
# --------------------------------------------------------------------------------------

_N = 10**6


def _peak_in_arrays(fn: Callable[[], object]) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / (8 * _N)


def test_backward_peak_memory_is_numpy_by_hands() -> None:
    """W3a and W3b at 10**6 elements hold no more arrays at their peak than NumPy by hand
    (the order in which backward visits the inputs of a product decides W3b's peak)."""
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal(_N), rng.standard_normal(_N)

    def w3a_hand() -> object:
        return float(np.sum(a0 * b0 + b0)), b0.copy(), a0 + 1.0

    def w3a() -> object:
        a = gradcli.from_numpy(a0, requires_grad=True)
        b = gradcli.from_numpy(b0, requires_grad=True)
        out = gradcli.sum(a * b + b)
        out.backward()
        return out.item(), a.grad, b.grad

    def w3b_hand() -> object:
        ta = np.tanh(a0)
        eb = np.exp(-(b0 * b0))
        out = float(np.sum(ta * eb))
        return out, (1.0 - ta * ta) * eb, -2.0 * b0 * ta * eb

    def w3b() -> object:
        a = gradcli.from_numpy(a0, requires_grad=True)
        b = gradcli.from_numpy(b0, requires_grad=True)
        out = gradcli.sum(gradcli.tanh(a) * gradcli.exp(-(b**2)))
        out.backward()
        return out.item(), a.grad, b.grad

    assert _peak_in_arrays(w3a) <= _peak_in_arrays(w3a_hand) + 0.25
    assert _peak_in_arrays(w3b) <= _peak_in_arrays(w3b_hand) + 0.25


# --------------------------------------------------------------------------------------
# The per-operation fast paths (issue 11): what they skip is still done where it matters
# --------------------------------------------------------------------------------------


def test_backward_is_quiet_and_gives_numpys_error_state_back() -> None:
    # sqrt's rule divides by zero at 0; with errors raised outside, backward still runs
    # quietly, and the state is the caller's again afterwards, also when backward raises
    x = gradcli.tensor([0.0, 4.0], requires_grad=True)
    y = gradcli.sqrt(x).sum()
    with np.errstate(all="raise"):
        y.backward()
        assert np.geterr()["divide"] == "raise"
        with pytest.raises(RuntimeError, match=SECOND_TIME):
            y.backward()
        assert np.geterr() == {
            "divide": "raise",
            "over": "raise",
            "under": "raise",
            "invalid": "raise",
        }
    assert x.grad.tolist() == [np.inf, 0.25]


@pytest.mark.parametrize("out_ellipsis", [True, False])
def test_sum_is_an_array_of_the_inputs_dtype_with_or_without_numpys_out_ellipsis(
    monkeypatch: pytest.MonkeyPatch, out_ellipsis: bool
) -> None:
    from gradcli.autograd import backend

    if out_ellipsis and not backend._OUT_ARRAY:
        pytest.skip("this NumPy takes no out=...")
    monkeypatch.setattr(backend, "_OUT_ARRAY", out_ellipsis)
    v = np.array([[0.1, 0.2, 0.3], [1e16, 1.0, -1e16]])
    for data in (v, v.astype(np.float32)):
        x = gradcli.tensor(data, requires_grad=True)
        for axis, keepdims in ((None, False), (1, False), (0, True), ((0, 1), True)):
            s = gradcli.sum(x, axis, keepdims)
            want = np.sum(data, axis=axis, keepdims=keepdims)
            assert type(s.data) is np.ndarray and s.data.dtype == data.dtype
            assert s.data.shape == np.shape(want)
            np.testing.assert_array_equal(s.data, want)


def test_a_full_sums_gradient_viewed_from_the_shared_seed_is_never_handed_out() -> None:
    # backward's seed and its broadcasts are shared, read-only values: every gradient a
    # caller receives is its own, and writing into one changes no later backward pass
    for _ in range(3):
        x = gradcli.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 2.0
        h.retain_grad()
        h.sum().backward()
        (gx,) = gradcli.autograd.grad((x * 1.0).sum(), [x])
        for got in (x.grad, h.grad, gx):
            assert got.tolist() == ([2.0] * 3 if got is x.grad else [1.0] * 3)
            assert got.data.flags.writeable and got.data.base is None
            got.zero_()
        y = gradcli.tensor([5.0, 6.0, 7.0], requires_grad=True)
        y.sum().backward()
        assert y.grad.tolist() == [1.0, 1.0, 1.0]
