"""Numeric edges of linear algebra and indexing (issue 12, items 9, 10 and part of 11).

- det, inv and solve of matrices with nan or infinite entries give PyTorch's answer (nan
  values and nan gradients, first and second order) and never a raw ``LinAlgError`` or an
  "internal error" (docs/conventions.md, "Linear algebra at non-finite entries").
- The second derivative of det at a singular or nearly singular matrix is finite and exact:
  the differentiable (``create_graph``) rule uses the cofactors (det of the minors) where
  ``det(A) A^-T`` cannot be differentiated accurately, as the first-order rule uses the
  adjugate.
- ``x[[0, 10**20]]`` names the index as given, not as int64 wrapped it round.

Reference numbers were computed once with PyTorch 2.13 (CPU, float64:
``torch.autograd.functional.hessian(torch.linalg.det, A)`` and ``torch.autograd.grad``) and
are hard-coded: the tests do not need torch. A comparison with torch itself runs when it is
installed. Every Hessian is also checked against central differences of the engine's
first-order gradient in float64, and against the exact second derivative of det
(a signed minor of size n - 2).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcli
from gradcli import analysis
from gradcli import autograd as E
from gradcli.errors import DomainError, GradcliError, LimitError, ShapeError

REPO = Path(__file__).resolve().parent.parent
nan, inf = float("nan"), float("inf")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gradcli ARGS`` at the repository root (this tree, not an installed copy)."""
    env = dict(os.environ, NO_COLOR="1", PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "gradcli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def same(a, b) -> bool:
    """Equal arrays, nan where nan (and the same shape)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def all_nan(a) -> bool:
    return bool(np.isnan(np.asarray(a, dtype=float)).all())


# --------------------------------------------------------------------------------------------
# references: the exact derivatives of det, and finite differences
# --------------------------------------------------------------------------------------------


def exact_cofactor(a: np.ndarray) -> np.ndarray:
    """d det / dA: ``(-1)**(i+j) det(A without row i, column j)``, minor by minor."""
    n = a.shape[-1]
    out = np.empty_like(a)
    for i, j in itertools.product(range(n), repeat=2):
        minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
        out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


def exact_det_hessian(a: np.ndarray) -> np.ndarray:
    """d^2 det / dA_ij dA_kl of one matrix, as an (n*n, n*n) matrix: the sign of the
    permutation that sends i to j and k to l, times the minor without rows i, k and
    columns j, l (zero when i == k or j == l)."""
    n = a.shape[-1]
    h = np.zeros((n, n, n, n))
    eye = np.eye(n)
    for i, j, k, m in itertools.product(range(n), repeat=4):
        if i == k or j == m:
            continue
        rows = [r for r in range(n) if r not in (i, k)]
        cols = [c for c in range(n) if c not in (j, m)]
        sign = np.linalg.det(eye[[i, k, *rows]]) * np.linalg.det(eye[:, [j, m, *cols]])
        minor = np.linalg.det(a[np.ix_(rows, cols)]) if rows else 1.0
        h[i, j, k, m] = sign * minor
    return h.reshape(n * n, n * n)


def exact_batch_hessian(a: np.ndarray) -> np.ndarray:
    """The Hessian of ``sum(det(A))`` over a batch: the blocks of each matrix on the diagonal."""
    if a.ndim == 2:
        return exact_det_hessian(a)
    mats = a.reshape(-1, *a.shape[-2:])
    k = mats[0].size
    h = np.zeros((a.size, a.size))
    for b, m in enumerate(mats):
        h[b * k : (b + 1) * k, b * k : (b + 1) * k] = exact_det_hessian(m)
    return h


def engine_gradient(expr: str, a: np.ndarray) -> np.ndarray:
    return gradcli.evaluate(expr, {"A": a}).grads["A"]


def fd_hessian(expr: str, a: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Central differences of the engine's first-order gradient (float64)."""
    rows = []
    for idx in np.ndindex(*a.shape):
        up, down = a.copy(), a.copy()
        up[idx] += eps
        down[idx] -= eps
        rows.append(((engine_gradient(expr, up) - engine_gradient(expr, down)) / (2 * eps)).ravel())
    return np.array(rows)


def hessian(expr: str, a: np.ndarray, **kw) -> np.ndarray:
    return analysis.hessian(expr, {"A": a}, **kw).hessian


# --------------------------------------------------------------------------------------------
# item 10: the Hessian of det at singular and nearly singular matrices
# --------------------------------------------------------------------------------------------

# torch.autograd.functional.hessian(torch.linalg.det, A) in float64, rounded to 12 decimals
# (torch's own values differ from these by at most 2e-14)
TORCH_HESSIAN_2x2 = [[0, 0, 0, 1], [0, 0, -1, 0], [0, -1, 0, 0], [1, 0, 0, 0]]
TORCH_HESSIAN_1_TO_9 = [
    [0, 0, 0, 0, 9, -8, 0, -6, 5],
    [0, 0, 0, -9, 0, 7, 6, 0, -4],
    [0, 0, 0, 8, -7, 0, -5, 4, 0],
    [0, -9, 8, 0, 0, 0, 0, 3, -2],
    [9, 0, -7, 0, 0, 0, -3, 0, 1],
    [-8, 7, 0, 0, 0, 0, 2, -1, 0],
    [0, 6, -5, 0, -3, 2, 0, 0, 0],
    [-6, 0, 4, 3, 0, -1, 0, 0, 0],
    [5, -4, 0, -2, 1, 0, 0, 0, 0],
]
TORCH_HESSIAN_RANK_1 = [
    [0, 0, 0, 0, 9, -6, 0, -6, 4],
    [0, 0, 0, -9, 0, 3, 6, 0, -2],
    [0, 0, 0, 6, -3, 0, -4, 2, 0],
    [0, -9, 6, 0, 0, 0, 0, 3, -2],
    [9, 0, -3, 0, 0, 0, -3, 0, 1],
    [-6, 3, 0, 0, 0, 0, 2, -1, 0],
    [0, 6, -4, 0, -3, 2, 0, 0, 0],
    [-6, 0, 2, 3, 0, -1, 0, 0, 0],
    [4, -2, 0, -2, 1, 0, 0, 0, 0],
]
# det 6.7e-18 in NumPy: inv() succeeds with entries of 1e16, and the derivative of
# det(A) A^-T was off by 0.15 before; torch's is within 1.3e-15 of these
TORCH_HESSIAN_TENTHS = (np.array(TORCH_HESSIAN_1_TO_9) / 10).tolist()
# the regular matrix [[2,1,0],[1,3,1],[0,1,4]] of the batch below
TORCH_HESSIAN_REGULAR = [
    [0, 0, 0, 0, 4, -1, 0, -1, 3],
    [0, 0, 0, -4, 0, 0, 1, 0, -1],
    [0, 0, 0, 1, 0, 0, -3, 1, 0],
    [0, -4, 1, 0, 0, 0, 0, 0, -1],
    [4, 0, 0, 0, 0, 0, 0, 0, 2],
    [-1, 0, 0, 0, 0, 0, 1, -2, 0],
    [0, 1, -3, 0, 0, 1, 0, 0, 0],
    [-1, 0, 1, 0, 0, -2, 0, 0, 0],
    [3, -1, 0, -1, 2, 0, 0, 0, 0],
]

ONE_TO_NINE = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
REGULAR = [[2, 1, 0], [1, 3, 1], [0, 1, 4]]

SINGULAR_WITH_TORCH = {
    "2x2 rank 1": ([[1, 2], [2, 4]], TORCH_HESSIAN_2x2),
    "3x3 rank 2 (1..9)": (ONE_TO_NINE, TORCH_HESSIAN_1_TO_9),
    "3x3 rank 1": ([[1, 2, 3], [2, 4, 6], [3, 6, 9]], TORCH_HESSIAN_RANK_1),
    "3x3 nearly singular (0.1..0.9)": (
        [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]],
        TORCH_HESSIAN_TENTHS,
    ),
}


@pytest.mark.parametrize("name", list(SINGULAR_WITH_TORCH))
def test_det_hessian_at_singular_matrix_is_torchs(name):
    a, expected = SINGULAR_WITH_TORCH[name]
    a = np.array(a, dtype=np.float64)
    h = hessian("det(A)", a)
    assert np.isfinite(h).all()
    np.testing.assert_allclose(h, expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h, exact_det_hessian(a), rtol=0, atol=1e-13)
    np.testing.assert_allclose(h, fd_hessian("det(A)", a), rtol=1e-6, atol=1e-8)


def test_det_hessian_of_batch_with_singular_and_regular_matrices():
    a = np.array([ONE_TO_NINE, REGULAR], dtype=np.float64)
    h = hessian("sum(det(A))", a)
    np.testing.assert_allclose(h[:9, :9], TORCH_HESSIAN_1_TO_9, rtol=0, atol=1e-13)
    np.testing.assert_allclose(h[9:, 9:], TORCH_HESSIAN_REGULAR, rtol=0, atol=1e-13)
    assert not h[:9, 9:].any() and not h[9:, :9].any()
    np.testing.assert_allclose(h, fd_hessian("sum(det(A))", a), rtol=1e-6, atol=1e-8)


# Where two or more singular values are equal (0 with 0 at rank n - 2 or less, 1 with 1),
# torch 2.13's double backward through the SVD gives nan for all of these; det is a
# polynomial and gradcli gives its exact (finite) second derivative, checked against the
# formula and finite differences.
RANK_DEFICIENT = {
    "2x2 zero": np.zeros((2, 2)),
    "3x3 zero": np.zeros((3, 3)),
    "4x4 rank 2": np.diag([1.0, 1.0, 0.0, 0.0]),
    "4x4 rank 3": np.array([[1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6.5], [1, 1, 1, 1]]),
    "batch 2x2x2 rank 1 and zero": np.array([[[1, 2], [2, 4]], [[0, 0], [0, 0]]], float),
    "batch 2x3x3 zero and rank 1": np.array(
        [np.zeros((3, 3)), [[1, 2, 3], [2, 4, 6], [3, 6, 9]]], float
    ),
}


@pytest.mark.parametrize("name", list(RANK_DEFICIENT))
def test_det_hessian_at_rank_deficient_matrix_is_exact(name):
    a = RANK_DEFICIENT[name]
    expr = "sum(det(A))"
    h = hessian(expr, a)
    assert np.isfinite(h).all()
    np.testing.assert_allclose(h, exact_batch_hessian(a), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h, fd_hessian(expr, a), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("rank_drop", [1, 2])
def test_det_hessian_at_random_rank_deficient_matrices(n, rank_drop):
    rng = np.random.default_rng(100 * n + rank_drop)
    for _ in range(3):
        # integer factors: the product is exactly rank-deficient in floating point
        a = rng.integers(-3, 4, (n, n - rank_drop)) @ rng.integers(-3, 4, (n - rank_drop, n))
        a = a.astype(np.float64)
        h = hessian("det(A)", a)
        np.testing.assert_allclose(h, exact_det_hessian(a), rtol=1e-12, atol=1e-10)
        scale = np.abs(h).max()  # up to thousands: differences err by about 1e-10 of it
        np.testing.assert_allclose(h, fd_hessian("det(A)", a), rtol=1e-6, atol=1e-8 * scale)


def test_det_hessian_through_the_cli_at_a_singular_matrix():
    r = cli("hessian", "det(A)", "A=[[1,2],[2,4]]", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    np.testing.assert_allclose(out["hessian"], TORCH_HESSIAN_2x2, rtol=0, atol=1e-15)
    assert "singular" not in r.stderr and "error" not in r.stderr


def test_det_hessian_in_float32_at_a_singular_matrix():
    h = hessian("det(A)", np.array([[1.0, 2.0], [2.0, 4.0]]), dtype="float32")
    np.testing.assert_allclose(h, TORCH_HESSIAN_2x2, rtol=0, atol=1e-6)


def test_det_third_derivative_at_a_singular_matrix():
    """The minors are det again, so the rule differentiates at any order: the third
    derivative of a 3x3 det is a constant +-1 (here d^3 det / dA00 dA11 dA22 = 1)."""
    a = E.from_numpy(np.array(ONE_TO_NINE, dtype=np.float64))
    a.requires_grad = True
    (g,) = E.grad(E.det(a), [a], create_graph=True)
    (g2,) = E.grad(g[0, 0], [a], create_graph=True)
    np.testing.assert_allclose(g2.data, [[0, 0, 0], [0, 9, -8], [0, -6, 5]], atol=1e-13)
    (g3,) = E.grad(g2[1, 1], [a])
    np.testing.assert_allclose(g3.data, [[0, 0, 0], [0, 0, 0], [0, 0, 1]], atol=1e-13)


def test_det_first_derivative_with_create_graph_is_the_adjugate():
    """The first derivative a create_graph pass gives is the one a plain pass gives."""
    for m in (ONE_TO_NINE, [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]], REGULAR):
        a = E.from_numpy(np.array(m, dtype=np.float64))
        a.requires_grad = True
        (g,) = E.grad(E.det(a), [a], create_graph=True)
        np.testing.assert_allclose(g.data, exact_cofactor(a.data), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g.data, engine_gradient("det(A)", a.data), atol=1e-14)


def test_minors_of_a_large_singular_matrix_respect_the_element_limit():
    """The differentiable rule at a singular n x n matrix holds n**2 minors of (n-1)**2
    numbers: over the element limit, that is a limit error, not a crash."""
    a = E.from_numpy(np.zeros((8, 8)))
    a.requires_grad = True
    with E.element_limit(3000), pytest.raises(LimitError, match="minors"):
        E.grad(E.det(a), [a], create_graph=True)  # 8 * 8 * 7 * 7 = 3136 numbers
    with E.element_limit(3136):
        (g,) = E.grad(E.det(a), [a], create_graph=True)
    np.testing.assert_array_equal(g.data, 0.0)


# --------------------------------------------------------------------------------------------
# item 9: det, inv and solve at nan and infinite entries
# --------------------------------------------------------------------------------------------


def test_det_of_a_nan_matrix_through_the_cli_json():
    r = cli("eval", "det(A)", "A=[[NaN,2],[2,4]]", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert "error" not in out
    assert out["output"]["value"] == "nan"
    assert out["inputs"]["A"]["grad"] == [["nan", "nan"], ["nan", "nan"]]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_det_of_a_nan_matrix_through_the_api():
    r = gradcli.evaluate("det(A)", {"A": np.array([[nan, 2.0], [2.0, 4.0]])})
    # NumPy's det gives 0.0 here (its LU finds a "zero pivot"); torch: nan, nan gradient
    assert np.isnan(r.value)
    assert all_nan(r.grads["A"])


def test_det_hessian_of_a_nan_matrix_is_nan():
    for expr in ("det(A)", "sum(det(A) * inv(A))"):
        h = hessian(expr, np.array([[nan, 2.0], [2.0, 4.0]]))
        assert all_nan(h), expr  # torch 2.13: all nan


def test_det_of_a_batch_with_one_nan_matrix():
    a = np.array([[[nan, 2.0], [2.0, 4.0]], [[2.0, 1.0], [1.0, 3.0]]])
    r = gradcli.evaluate("sum(det(A))", {"A": a})
    assert np.isnan(r.value)
    # torch 2.13: [[nan]*2]*2 for the first, [[3, -1], [-1, 2]] for the second
    assert all_nan(r.grads["A"][0])
    np.testing.assert_allclose(r.grads["A"][1], [[3, -1], [-1, 2]], rtol=1e-15)
    np.testing.assert_allclose(gradcli.evaluate("det(A)", {"A": a}).value, [nan, 5.0])
    h = hessian("sum(det(A))", a)
    # torch 2.13: nan where a row or a column is the nan matrix's, but for the derivatives
    # of the nan matrix's gradient with respect to the other matrix (0)
    assert all_nan(h[:4, :4]) and all_nan(h[4:, :4])
    np.testing.assert_array_equal(h[:4, 4:], 0.0)
    np.testing.assert_allclose(h[4:, 4:], TORCH_HESSIAN_2x2, atol=1e-15)


# det at non-finite entries, and torch 2.13's value for each
DET_VALUES = [
    ([[nan, 2], [2, 4]], nan),  # NumPy: 0.0
    ([[0, inf], [0, 0]], nan),  # NumPy: 0.0 (a zero pivot); 0 * inf - inf * 0 is nan
    ([[inf, 0], [0, 0]], nan),  # NumPy: 0.0
    ([[inf, 2], [2, 4]], inf),
    ([[1, 2], [3, -inf]], -inf),
    ([[nan]], nan),
    ([[-inf]], -inf),
]


def test_det_value_at_non_finite_entries_is_torchs():
    """A nan entry makes det nan, and an infinite one never leaves it finite (every entry
    is a factor of some term of det)."""
    for matrix, value in DET_VALUES:
        r = gradcli.evaluate("det(A)", {"A": np.array(matrix, dtype=float)})
        assert same(r.value, value), matrix


def test_det_gradient_of_a_non_finite_matrix_is_nan():
    """The convention: nan, first and second order. torch 2.13 gives nan for all of these
    but one entry of [[inf, 2], [2, 4]]'s gradient, which its LU leaves at inf."""
    for matrix in ([[inf, 2], [2, 4]], [[1, 2], [3, -inf]], [[inf, inf], [inf, inf]],
                   [[nan, 0], [0, 0]], [[0, inf], [0, 0]]):  # fmt: skip
        a = np.array(matrix, dtype=float)
        assert all_nan(gradcli.evaluate("det(A)", {"A": a}).grads["A"]), matrix
        assert all_nan(hessian("det(A)", a)), matrix


@pytest.mark.parametrize("value", [nan, inf, -inf])
def test_det_of_a_1x1_matrix_has_gradient_one(value):
    """det of a 1x1 matrix is its entry: gradient 1, second derivative 0 (as torch)."""
    a = np.array([[value]])
    r = gradcli.evaluate("det(A)", {"A": a})
    assert same(r.value, value)
    assert same(r.grads["A"], [[1.0]])
    assert same(hessian("det(A)", a), [[0.0]])


def test_inv_at_non_finite_entries_is_torchs():
    """NumPy's inv calls [[nan, 2], [2, 4]] singular and leaves [[nan, 0], [0, 1]] half
    finite; torch 2.13 gives nan, with a nan gradient. An infinite entry keeps LU's answer,
    which is torch's too."""
    for m in ([[nan, 2], [2, 4]], [[nan, 0], [0, 1]], [[1, 0], [0, nan]]):
        a = np.array(m, dtype=float)
        r = gradcli.evaluate("inv(A)", {"A": a})
        assert all_nan(r.value), m
        assert all_nan(r.grads["A"]), m
        assert all_nan(hessian("sum(inv(A))", a)), m
    a = np.array([[inf, 2.0], [2.0, 4.0]])
    r = gradcli.evaluate("sum(inv(A))", {"A": a})
    # torch 2.13: inverse [[0, -0], [0, 0.25]], gradient [[-0, -0], [-0, -0.0625]]
    np.testing.assert_array_equal(gradcli.evaluate("inv(A)", {"A": a}).value, [[0, 0], [0, 0.25]])
    np.testing.assert_array_equal(r.grads["A"], [[0, 0], [0, -0.0625]])


def test_inv_of_a_batch_with_one_nan_matrix():
    a = np.array([[[nan, 2.0], [2.0, 4.0]], [[2.0, 1.0], [1.0, 3.0]]])
    r = gradcli.evaluate("sum(inv(A))", {"A": a})
    inv = gradcli.evaluate("inv(A)", {"A": a}).value
    assert all_nan(inv[0]) and all_nan(r.grads["A"][0])
    np.testing.assert_allclose(inv[1], [[0.6, -0.2], [-0.2, 0.4]], rtol=1e-15)
    # torch 2.13
    np.testing.assert_allclose(r.grads["A"][1], [[-0.16, -0.08], [-0.08, -0.04]], rtol=1e-14)


def test_solve_at_non_finite_entries_is_torchs():
    a, b = np.array([[nan, 2.0], [2.0, 4.0]]), np.array([1.0, 2.0])
    r = gradcli.evaluate("sum(solve(A, b))", {"A": a, "b": b})
    assert np.isnan(r.value) and all_nan(r.grads["A"]) and all_nan(r.grads["b"])
    h = analysis.hessian("sum(solve(A, b))", {"A": a, "b": b}).hessian
    assert all_nan(h[:, :4]) and all_nan(h[:4, :])  # torch 2.13: these nan
    np.testing.assert_array_equal(h[4:, 4:], 0.0)  # and the b-b block 0 (solve is linear in b)

    # a nan in b: a nan column of the solution; the gradient of b, A^-T g, is finite
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    r = gradcli.evaluate("sum(solve(A, b))", {"A": a, "b": np.array([1.0, nan])})
    assert np.isnan(r.value) and all_nan(r.grads["A"])
    np.testing.assert_allclose(r.grads["b"], [0.4, 0.2], rtol=1e-15)  # torch 2.13
    x = gradcli.evaluate("solve(A, b)", {"A": a, "b": np.array([[1.0, nan], [2.0, 3.0]])}).value
    np.testing.assert_allclose(x[:, 0], [0.2, 0.6], rtol=1e-15)
    assert all_nan(x[:, 1])

    # LU solves A = [[-1e308, inf], [0, 0]] (to nan) but calls its transpose singular:
    # NumPy raised that LinAlgError from the backward pass; torch 2.13's gradients are nan
    a, b = np.array([[-1e308, inf], [0.0, 0.0]]), np.array([-1.0, 0.0])
    r = gradcli.evaluate("sum(solve(A, b))", {"A": a, "b": b})
    assert np.isnan(r.value) and all_nan(r.grads["A"]) and all_nan(r.grads["b"])
    h = analysis.hessian("sum(solve(A, b))", {"A": a, "b": b}).hessian
    assert all_nan(h[:4, :]) and all_nan(h[:, :4])  # (torch refuses this one as singular)


def test_solve_of_a_batch_with_one_nan_matrix():
    a = np.array([[[nan, 2.0], [2.0, 4.0]], [[2.0, 1.0], [1.0, 3.0]]])
    b = np.array([1.0, 2.0])
    x = gradcli.evaluate("solve(A, b)", {"A": a, "b": b}).value
    assert all_nan(x[0])
    np.testing.assert_allclose(x[1], [0.2, 0.6], rtol=1e-15)
    r = gradcli.evaluate("sum(solve(A, b))", {"A": a, "b": b})
    assert all_nan(r.grads["A"][0]) and all_nan(r.grads["b"])
    # torch 2.13
    np.testing.assert_allclose(r.grads["A"][1], [[-0.08, -0.24], [-0.04, -0.12]], rtol=1e-14)


LINALG_EXPRS = ["det(A)", "sum(inv(A))", "sum(solve(A, b))", "sum(det(A) * inv(A))", "det(A @ A)"]
NON_FINITE = [
    [[nan, 2], [2, 4]], [[inf, 2], [2, 4]], [[-inf, inf], [1, 2]], [[0, inf], [0, 0]],
    [[-1e308, inf], [0, 0]], [[1e308, 1e308], [1e308, 1e308]], [[nan, nan], [nan, nan]],
]  # fmt: skip


def test_linalg_raises_only_gradcli_errors():
    """det, inv and solve, first order, second order and ``check``, at non-finite entries
    and at singular matrices: a value (nan, inf) or a domain error, never a raw LinAlgError
    or an internal error; with a nan entry, always a value."""
    b = np.array([-1.0, 2.0])
    for expr, matrix in itertools.product(LINALG_EXPRS, NON_FINITE):
        inputs = {"A": np.array(matrix, dtype=float), "b": b}
        for run in (gradcli.evaluate, analysis.hessian, analysis.check):
            try:
                run(expr, inputs)
            except GradcliError as e:
                assert isinstance(e, DomainError), (expr, matrix, e)
                assert "internal error" not in e.message
                assert not np.isnan(matrix).any(), (expr, matrix, e)
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    for expr in ("sum(inv(A))", "sum(solve(A, b))"):
        with pytest.raises(DomainError, match="singular"):
            gradcli.evaluate(expr, {"A": a, "b": b})
        with pytest.raises(DomainError, match="singular"):
            analysis.hessian(expr, {"A": a, "b": b})


# --------------------------------------------------------------------------------------------
# item 11 (part): an index beyond int64
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "index", "axis", "size"),
    [
        ("x[[0, 10**20]]", "100000000000000000000", 0, 3),
        ("x[[0, -10**20]]", "-100000000000000000000", 0, 3),
        ("x[10**20]", "100000000000000000000", 0, 3),
        ("x[[[0], [10**20]]]", "100000000000000000000", 0, 3),
        ("x[[0, 2**63]]", "9223372036854775808", 0, 3),
        ("y[:, [1, 10**20]]", "100000000000000000000", 1, 2),
        ("y[..., [10**19]]", "10000000000000000000", 1, 2),
        ("y[1, [10**19]]", "10000000000000000000", 1, 2),
        ("x[[1e300]]", "1e+300", 0, 3),
    ],
)
def test_an_index_beyond_int64_is_reported_as_written(expr, index, axis, size):
    inputs = {"x": np.array([1.0, 2.0, 3.0]), "y": np.array([[1.0, 2.0], [3.0, 4.0]])}
    with pytest.raises(ShapeError) as info:
        gradcli.evaluate(expr, inputs)
    assert info.value.message == (
        f"index: index {index} is out of bounds for axis {axis} with size {size}"
    )
    assert "9223372036854775808" not in info.value.message or index == "9223372036854775808"


def test_an_index_beyond_int64_through_the_cli_is_a_shape_error_like_others():
    r = cli("eval", "x[[0, 10**20]]", "x=[1,2,3]", "--json")
    small = cli("eval", "x[[0, 5]]", "x=[1,2,3]", "--json")
    err, small_err = json.loads(r.stdout)["error"], json.loads(small.stdout)["error"]
    assert err["kind"] == small_err["kind"] == "shape"
    assert r.returncode == small.returncode == 1
    assert err["message"] == (
        "index: index 100000000000000000000 is out of bounds for axis 0 with size 3"
    )


@pytest.mark.parametrize(
    ("key", "index"),
    [
        ([0, 10**20], "100000000000000000000"),
        (10**20, "100000000000000000000"),
        (np.array([0, 2**64 - 1], dtype=np.uint64), "18446744073709551615"),
        (np.array([1, 2**70], dtype=object), "1180591620717411303424"),
        ((Ellipsis, [10**30]), "1000000000000000000000000000000"),
        (-1e20, "-100000000000000000000"),
    ],
)
def test_an_index_beyond_int64_from_python(key, index):
    x = E.from_numpy(np.arange(3.0))
    with pytest.raises(ShapeError) as info:
        E.getitem(x, key)
    assert info.value.message == f"index: index {index} is out of bounds for axis 0 with size 3"


def test_indices_within_int64_are_unchanged():
    x = E.from_numpy(np.arange(5.0))
    np.testing.assert_array_equal(E.getitem(x, [0, -1, 4.0]).data, [0, 4, 4])
    np.testing.assert_array_equal(E.getitem(x, np.array([1, 3], dtype=np.uint64)).data, [1, 3])
    with pytest.raises(ShapeError, match="index 9 is out of bounds for axis 0 with size 5"):
        E.getitem(x, [0, 9])
    with pytest.raises(GradcliError, match="rectangular"):
        E.getitem(x, [[0, 1], [2]])


# --------------------------------------------------------------------------------------------
# the same numbers from torch itself, when it is installed
# --------------------------------------------------------------------------------------------


def test_against_torch_when_installed():
    torch = pytest.importorskip("torch")

    def torch_hessian(a: np.ndarray) -> np.ndarray:
        h = torch.autograd.functional.hessian(
            lambda t: torch.linalg.det(t).sum(), torch.tensor(a, dtype=torch.float64)
        )
        return h.reshape(a.size, a.size).numpy()

    for a, _ in SINGULAR_WITH_TORCH.values():
        a = np.array(a, dtype=np.float64)
        np.testing.assert_allclose(hessian("det(A)", a), torch_hessian(a), rtol=0, atol=1e-13)
    for a in RANK_DEFICIENT.values():
        th = torch_hessian(a)
        if np.isfinite(th).all():  # else torch's nan, see RANK_DEFICIENT
            np.testing.assert_allclose(hessian("sum(det(A))", a), th, rtol=0, atol=1e-13)

    for m in ([[nan, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, nan]]):
        t = torch.tensor(m, dtype=torch.float64, requires_grad=True)
        for ours_expr, fn in (
            ("det(A)", torch.linalg.det),
            ("sum(inv(A))", lambda t: torch.linalg.inv(t).sum()),
        ):
            out = fn(t)
            (g,) = torch.autograd.grad(out, t)
            r = gradcli.evaluate(ours_expr, {"A": np.array(m)})
            assert same(r.value, out.item()) and same(r.grads["A"], g.numpy())


@pytest.mark.parametrize("backend", ["numpy", "dask"])
def test_derivatives_of_an_empty_input_are_empty(backend):
    """No rows to seed: an empty Jacobian and Hessian, a check with nothing to fail."""
    if backend == "dask":
        pytest.importorskip("dask")
    x = {"x": np.zeros(0)}
    jac = analysis.jacobian("x * 2", x, backend=backend)
    assert jac.jacobian["x"].shape == (0, 0) and jac.value.shape == (0,)
    hes = analysis.hessian("sum(x * x)", x, backend=backend)
    assert hes.hessian.shape == (0, 0) and float(hes.value) == 0.0
    for order in (1, 2):
        assert analysis.check("sum(x * x)", x, order=order, backend=backend).ok
