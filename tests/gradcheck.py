"""Finite-difference gradient checking for the ``gradcli.autograd`` engine.

In the spirit of HIPS autograd's ``check_grads``: the analytic vector-Jacobian product that the
engine's ``backward`` computes is compared with central finite differences of the engine's own
forward pass, perturbing one input element at a time, all in float64.

The engine is imported lazily (inside the functions), so importing this helper never fails
even while the engine is being rebuilt: the tests that use it fail instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["check_grads", "numeric_grad", "to_numpy"]


def _engine():
    from gradcli import autograd as engine

    return engine


def to_numpy(value) -> np.ndarray:
    """The ndarray behind a Tensor (``.data``), or ``value`` itself as an ndarray."""
    data = getattr(value, "data", value)
    return np.asarray(data)


def numeric_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central finite-difference gradient of the scalar function ``f`` at ``x``.

    ``f`` takes an ndarray shaped like ``x`` and returns a float. One element is perturbed at
    a time by ``±eps``; ``x`` itself is not modified.
    """
    x = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        orig = x[idx]
        x[idx] = orig + eps
        f_plus = float(f(x.copy()))
        x[idx] = orig - eps
        f_minus = float(f(x.copy()))
        x[idx] = orig
        grad[idx] = (f_plus - f_minus) / (2.0 * eps)
    return grad


def _describe(fun, name: str | None) -> str:
    if name:
        return name
    return getattr(fun, "__name__", repr(fun))


def check_grads(
    fun: Callable[..., object],
    *arrays,
    wrt: Sequence[int] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    seed: int = 0,
    name: str | None = None,
) -> np.ndarray:
    """Check the engine's gradients of ``fun`` at ``arrays`` against finite differences.

    ``fun`` takes one Tensor per array and returns a Tensor. The inputs listed in ``wrt``
    (indices into ``arrays``; default: all) become leaves with ``requires_grad=True``, the
    others are constants. The output is backpropagated with a fixed random upstream gradient
    ``v`` of its shape (``backward()`` with no argument for a 0-d output, i.e. ``v = 1``), and
    every checked input's ``.grad`` is compared with the central finite differences of
    ``sum(v * fun(inputs))``, computed from the engine's forward values in float64.

    Returns the forward value (an ndarray) so callers can also check it.
    """
    E = _engine()
    label = _describe(fun, name)
    arrays = [np.array(a, dtype=np.float64, copy=True) for a in arrays]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)

    # --- analytic: one forward + backward -------------------------------------------------
    leaves = [E.tensor(a.copy(), requires_grad=(i in wrt)) for i, a in enumerate(arrays)]
    out = fun(*leaves)
    out_data = to_numpy(out)
    assert out_data.dtype == np.float64, (
        f"{label}: forward value has dtype {out_data.dtype}, expected float64 for float64 inputs"
    )
    rng = np.random.default_rng(seed)
    if out_data.shape == ():
        v = np.array(1.0)
        out.backward()
    else:
        v = rng.standard_normal(out_data.shape)
        out.backward(E.tensor(v.copy()))

    # --- the same through autograd.grad: the walk of autograd.grad / create_graph and the
    # leaner one of backward() must give the same bits -------------------------------------
    if wrt:
        again = [E.tensor(a.copy(), requires_grad=(i in wrt)) for i, a in enumerate(arrays)]
        out2 = fun(*again)
        grads = E.grad(out2, [again[i] for i in wrt], None if out_data.shape == () else v.copy())
        for i, g2 in zip(wrt, grads, strict=True):
            g1 = leaves[i].grad
            if g1 is None or g2 is None:
                assert g1 is None and (g2 is None or not np.any(to_numpy(g2))), (
                    f"{label}: input {i}: backward() gave {g1}, autograd.grad gave {g2}"
                )
                continue
            np.testing.assert_array_equal(
                to_numpy(g2),
                to_numpy(g1),
                err_msg=f"{label}: input {i}: autograd.grad and backward() differ",
            )

    # --- numeric: forward only, perturbing one element of one input at a time ----------------
    def objective(i: int) -> Callable[[np.ndarray], float]:
        def f(xi: np.ndarray) -> float:
            args = [
                E.tensor(xi if j == i else arrays[j].copy(), requires_grad=False)
                for j in range(len(arrays))
            ]
            return float(np.sum(v * to_numpy(fun(*args))))

        return f

    for i in wrt:
        x = arrays[i]
        grad = leaves[i].grad
        numeric = numeric_grad(objective(i), x, eps=eps)
        if grad is None:
            assert np.all(numeric == 0), (
                f"{label}: input {i} (shape {x.shape}) has .grad None after backward, "
                f"but the finite-difference gradient is nonzero:\n{numeric}"
            )
            continue
        analytic = to_numpy(grad)
        assert analytic.shape == x.shape, (
            f"{label}: gradient of input {i} has shape {analytic.shape}, "
            f"expected the input's shape {x.shape}"
        )
        assert analytic.dtype == np.float64, (
            f"{label}: gradient of input {i} has dtype {analytic.dtype}, expected float64"
        )
        err = np.abs(analytic - numeric)
        bound = atol + rtol * np.abs(numeric)
        bad = ~(err <= bound)  # also catches nan
        if np.any(bad):
            excess = np.where(np.isnan(err), np.inf, err - bound)
            worst = np.unravel_index(int(np.argmax(excess)), x.shape) if x.shape else ()
            raise AssertionError(
                f"{label}: gradient of input {i} (shape {x.shape}) disagrees with finite "
                f"differences at {int(bad.sum())} of {x.size} element(s); worst at index "
                f"{tuple(int(k) for k in worst)}: analytic={analytic[worst]!r}, "
                f"numeric={numeric[worst]!r}, abs err={err[worst]!r} "
                f"(rtol={rtol}, atol={atol}, eps={eps})\n"
                f"input value:\n{x}\nanalytic:\n{analytic}\nnumeric:\n{numeric}"
            )
    return out_data
