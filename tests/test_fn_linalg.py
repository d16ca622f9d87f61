"""The linear algebra of issue 17 (item 3): ``einsum``, ``slogdet``, ``cholesky`` and ``pinv``,
as torch.einsum and torch.linalg define them (docs/language.md, "Function calls";
docs/conventions.md).

* values against NumPy, first derivatives against central finite differences
  (``tests/gradcheck.py``) and second derivatives against finite differences of the first
  (``check_hessian``), on many subscripts and shapes: repeated subscripts, broadcasting,
  ``...``, implicit mode, batches;
* the awkward points (a singular matrix, nan and infinite entries, a matrix that is not
  positive definite, a rank-deficient matrix and the tolerances of ``pinv``) against PyTorch
  2.13's numbers, written here so the test needs no torch, and against torch itself when it
  is installed;
* the subscripts' and the options' validation with their one-line messages, the language's
  calls (strings, ``*operands``, the stacked pair of ``slogdet``), ``gradcli.linalg``, plans
  and the Dask backend (einsum lazy, the others refused by name).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from gradcheck import check_grads
from samplers import real, rng_for, well_conditioned
from test_higher_order import check_hessian

import gradcli
from gradcli import analysis, lazy, linalg
from gradcli import autograd as E
from gradcli.errors import DomainError, InputError, InvalidValueError, NamingError, ShapeError

inf, nan = math.inf, math.nan


def _leaf(value: Any) -> gradcli.Tensor:
    return gradcli.tensor(np.asarray(value, dtype=float), requires_grad=True)


def _grad(f: Any, value: Any) -> tuple[np.ndarray, np.ndarray]:
    """f's value and the gradient of its sum, at ``value``."""
    x = _leaf(value)
    out = f(x)
    gradcli.sum(out).backward()
    return out.detach().numpy(), x.grad.numpy()


# --------------------------------------------------------------------------------------------
# einsum: values and derivatives
# --------------------------------------------------------------------------------------------

#: (subscripts, operand shapes): every form the issue names, and the awkward ones
EINSUM_FORMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # matmul
    ("ii->", [(3, 3)]),  # trace
    ("ii->i", [(3, 3)]),  # diag
    ("i,j->ij", [(3,), (2,)]),  # outer
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),  # batched product
    ("ij->ji", [(2, 3)]),  # transpose
    ("i,i->", [(4,), (4,)]),  # dot
    ("ij->i", [(2, 3)]),  # a subscript found once: summed
    ("ij->", [(2, 3)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 2)]),  # '...' broadcast
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("i...->...i", [(2, 3, 4)]),
    ("...ij->ij", [(3, 2, 2)]),  # '...' not in the output: summed, as torch
    ("ij->...ij", [(2, 3)]),  # '...' of no dimension
    ("ij,j->i", [(2, 3), (1,)]),  # a length-1 dimension broadcast
    ("ij,ij->ij", [(1, 3), (2, 1)]),
    ("iij,jk->ik", [(3, 3, 2), (2, 2)]),  # a repeated subscript with another operand
    ("iji->ij", [(2, 3, 2)]),  # repeated, not adjacent
    ("iii->i", [(2, 2, 2)]),
    ("ijij->ij", [(2, 3, 2, 3)]),  # two repeated subscripts
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)]),  # three operands
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("i,->i", [(3,), ()]),  # a scalar operand
    ("->", [()]),
    ("ij", [(2, 3)]),  # implicit mode
    ("ji", [(2, 3)]),  # implicit: the output is "ij", a transpose
    ("ii", [(3, 3)]),  # implicit: the trace
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit: matmul
    ("Ab,bA", [(2, 3), (3, 2)]),  # upper case letters
    ("ba,Ab", [(2, 3), (3, 2)]),  # implicit: "A" sorts before "a"
    ("...ij,...jk", [(2, 2, 3), (3, 4)]),  # implicit with '...'
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),  # white space
]


@pytest.mark.parametrize(("subs", "shapes"), EINSUM_FORMS, ids=[s for s, _ in EINSUM_FORMS])
def test_einsum_values_and_gradients(subs: str, shapes: list[tuple[int, ...]]) -> None:
    rng = rng_for("einsum", subs, shapes)
    arrays = [real()(rng, s) for s in shapes]
    out = check_grads(lambda *ts: gradcli.einsum(subs, *ts), *arrays, name=f"einsum({subs!r})")
    try:
        want = np.einsum(subs.replace(" ", ""), *arrays)
    except ValueError:  # NumPy refuses '...' missing from the output; torch sums it
        assert subs == "...ij->ij"
        want = arrays[0].sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(
    ("subs", "shapes"),
    [f for f in EINSUM_FORMS if f[0] in ("ij,jk->ik", "ii->i", "ii", "bij,bjk->bik", "iji->ij",
                                         "ij,j->i", "...ij,...jk->...ik", "ij,jk,kl->il")],
    ids=str,
)  # fmt: skip
def test_einsum_second_derivatives(subs: str, shapes: list[tuple[int, ...]]) -> None:
    rng = rng_for("einsum2", subs, shapes)
    arrays = [real()(rng, s) for s in shapes]
    check_hessian(lambda *ts: gradcli.einsum(subs, *ts), *arrays, name=f"einsum({subs!r})")


def test_einsum_of_one_tensor_twice_adds_both_gradients() -> None:
    x = _leaf([[1.0, 2.0], [3.0, 4.0]])
    gradcli.einsum("ij,ij->", x, x).backward()  # sum(x²)
    np.testing.assert_array_equal(x.grad.numpy(), 2 * x.detach().numpy())


def test_einsum_repeated_subscript_puts_the_gradient_on_the_diagonal_exactly() -> None:
    x = _leaf(np.arange(9.0).reshape(3, 3))
    y = gradcli.einsum("ii->i", x)
    y.backward(gradcli.tensor([inf, -2.0, nan]))
    g = x.grad.numpy()
    np.testing.assert_array_equal(np.diag(g), [inf, -2.0, nan])
    off = ~np.eye(3, dtype=bool)
    assert (g[off] == 0).all()  # placed, never inf * 0 = nan off the diagonal


def test_einsum_trace_and_diag_are_traces_and_diags() -> None:
    a = np.arange(12.0).reshape(3, 4)[:, :3]
    v, g = _grad(lambda t: gradcli.einsum("ii->", t), a)
    assert v == np.trace(a)
    np.testing.assert_array_equal(g, np.eye(3))
    v, g = _grad(lambda t: gradcli.einsum("ii->i", t), a)
    np.testing.assert_array_equal(v, np.diag(a))
    np.testing.assert_array_equal(g, np.eye(3))


def test_einsum_keeps_float32() -> None:
    a = gradcli.tensor(np.ones((2, 3)), dtype="float32", requires_grad=True)
    out = gradcli.einsum("ij,jk->ik", a, [[1.0], [2.0], [3.0]])
    assert out.dtype == np.float32 and out.tolist() == [[6.0], [6.0]]
    out.sum().backward()
    assert a.grad.dtype == np.float32


def test_einsum_takes_torchs_list_of_operands_and_numbers() -> None:
    a, b = gradcli.tensor([1.0, 2.0]), gradcli.tensor([3.0, 4.0, 5.0])
    assert gradcli.einsum("i,j->ij", [a, b]).tolist() == np.outer([1, 2], [3, 4, 5]).tolist()
    assert gradcli.einsum("i,j->ij", (a, b)).tolist() == gradcli.einsum("i,j->ij", a, b).tolist()
    assert gradcli.einsum("i,->i", a, 3.0).tolist() == [3.0, 6.0]


def test_einsum_of_empty_dimensions() -> None:
    a = _leaf(np.zeros((0, 3)))
    out = gradcli.einsum("ij->", a)
    assert out.item() == 0.0
    out.backward()
    assert a.grad.shape == (0, 3)
    assert gradcli.einsum("ij,jk->ik", np.ones((2, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 2


def test_einsum_is_one_einsum_node_after_the_cleaning() -> None:
    a, b = _leaf(np.ones((2, 3))), _leaf(np.ones((3, 4)))
    node = gradcli.einsum("ij,jk->ik", a, b).grad_fn
    assert node.name() == "EinsumBackward0" and len(node.next_functions) == 2


# --------------------------------------------------------------------------------------------
# einsum: the subscripts checked, one line each
# --------------------------------------------------------------------------------------------

EINSUM_ERRORS = [
    ("ij,jk->ik", [(2, 3)], InvalidValueError, 'subscripts "ij,jk->ik" name 2 operands, got 1'),
    ("ij->ij", [(2, 3), (3,)], InvalidValueError, "name 1 operand, got 2"),
    ("i1->i", [(2,)], InvalidValueError, "invalid character '1' in the subscripts \"i1->i\""),
    ("i,j->ij ü", [(2,), (2,)], InvalidValueError, "invalid character 'ü'"),
    ("i->i->i", [(2,)], InvalidValueError, "more than one '->'"),
    ("i-i", [(2,)], InvalidValueError, "out of place"),
    ("i>i", [(2,)], InvalidValueError, "out of place"),
    ("i,j->i,j", [(2,), (2,)], InvalidValueError, "out of place"),
    ("i.j->i", [(2, 3)], InvalidValueError, "'.' in the subscripts of operand 1 is not part of"),
    ("......->", [(2,)], InvalidValueError, "'...' appears twice in the subscripts of operand 1"),
    ("i->....", [(2,)], InvalidValueError, "of the output is not part of '...'"),
    ("i->ii", [(2,)], InvalidValueError, "the output names subscript i twice"),
    ("i->j", [(2,)], InvalidValueError, "the output's subscript j is not a subscript of any"),
    ("ij->i", [(2,)], ShapeError, 'operand 1 has 1 dimension but its subscripts "ij" name 2'),
    ("i->i", [(2, 3)], ShapeError, 'operand 1 has 2 dimensions but its subscripts "i" name 1'),
    ("ij...->", [(2,)], ShapeError, "has 1 dimension but its subscripts"),
    ("i,i->i", [(2,), (3,)], ShapeError, "subscript i has size 2 in operand 1 and 3 in operand 2"),
    ("ii->i", [(2, 3)], ShapeError, "subscript i is repeated in operand 1 with sizes 2 and 3"),
    ("...i,...i->...", [(2, 3), (4, 3)], ShapeError, "the dimensions '...' stands for do not"),
]


@pytest.mark.parametrize(
    ("subs", "shapes", "kind", "message"), EINSUM_ERRORS, ids=[e[0] for e in EINSUM_ERRORS]
)
def test_einsum_refuses_bad_subscripts_in_one_line(
    subs: str, shapes: list[tuple[int, ...]], kind: type, message: str
) -> None:
    with pytest.raises(kind) as err:
        gradcli.einsum(subs, *[np.ones(s) for s in shapes])
    text = str(err.value)
    assert text.startswith("einsum: ") and "\n" not in text
    assert message in text


def test_einsum_refuses_torchs_sublist_form_and_too_many_dimensions() -> None:
    with pytest.raises(InvalidValueError, match="the subscripts come first, as a string"):
        gradcli.einsum(np.ones(2), [0])
    with pytest.raises(ShapeError, match="more than 52 distinct dimensions"):
        gradcli.einsum("...", np.ones((1,) * 53))


# --------------------------------------------------------------------------------------------
# einsum in the language
# --------------------------------------------------------------------------------------------


def test_einsum_in_a_program_with_either_quote_and_several_operands() -> None:
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[0.5, -1.0], [2.0, 1.0]]
    r = gradcli.evaluate("sum(einsum(\"ij,jk->ik\", A, B)) + einsum('ii', A)", {"A": a, "B": b})
    assert r.value == pytest.approx(np.sum(np.array(a) @ b) + 5.0)
    np.testing.assert_allclose(r.grads["A"], np.ones((2, 2)) @ np.array(b).T + np.eye(2))
    r = gradcli.evaluate('einsum("i,j,k->ijk", x, [1, 2], x)', {"x": [1.0, -1.0]})
    assert np.asarray(r.value).shape == (2, 2, 2)


def test_einsum_in_a_program_refuses_what_python_refuses() -> None:
    with pytest.raises(InvalidValueError, match="name 2 operands, got 1"):
        gradcli.evaluate('einsum("ij,jk->ik", A)', {"A": np.eye(2)})
    with pytest.raises(NamingError, match="missing the argument `operands`"):
        gradcli.evaluate('einsum("ij")', {})
    with pytest.raises(InvalidValueError, match="expected a string in quotes"):
        gradcli.evaluate("einsum(A, A)", {"A": np.eye(2)})
    with pytest.raises(InvalidValueError, match="is not a tensor"):
        gradcli.evaluate('einsum("i,i", x, "i")', {"x": [1.0]})


def test_einsum_signature_in_the_function_table() -> None:
    spec = E.FUNCTIONS["einsum"]
    assert spec.signature == "einsum(subscripts, *operands)"
    assert "g" in spec.derivative and spec.language
    assert not hasattr(gradcli.Tensor, "einsum")  # as torch: a function, not a method


def test_einsum_compiled_replays_and_graph() -> None:
    text = 'sum(einsum("ii->i", A) * einsum("ij->j", A))'
    f = gradcli.compile(text)
    for seed in range(3):
        a = np.random.default_rng(seed).normal(size=(3, 3))
        got, want = f({"A": a}), gradcli.evaluate(text, {"A": a})
        assert got.value == want.value
        np.testing.assert_array_equal(got.grads["A"], want.grads["A"])
    g = analysis.graph('sum(einsum("ii->i", A))', {"A": np.eye(2)})
    assert "einsum" in [n.op for n in g.nodes]


# --------------------------------------------------------------------------------------------
# slogdet
# --------------------------------------------------------------------------------------------


def test_slogdet_is_torchs_named_pair() -> None:
    a = _leaf([[2.0, 1.0], [1.0, -3.0]])
    r = gradcli.slogdet(a)
    assert type(r).__name__ == "SlogdetResult" and r._fields == ("sign", "logabsdet")
    sign, log = r
    assert sign.item() == -1.0 and log.item() == pytest.approx(math.log(7.0), rel=1e-15)
    assert r[0] is r.sign and r[1] is r.logabsdet
    assert not r.sign.requires_grad and r.logabsdet.requires_grad
    r.logabsdet.backward()
    np.testing.assert_allclose(a.grad.numpy(), np.linalg.inv(a.detach().numpy()).T, rtol=1e-15)
    assert linalg.slogdet is gradcli.slogdet
    assert a.slogdet().logabsdet.item() == log.item()


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (3, 2, 2), (2, 1, 3, 3)])
def test_slogdet_values_gradients_and_second_derivatives(shape: tuple[int, ...]) -> None:
    rng = rng_for("slogdet", shape)
    a = well_conditioned(rng, shape) * rng.choice([-1.0, 1.0], size=(*shape[:-1], 1))
    sign, log = np.linalg.slogdet(a)
    r = gradcli.slogdet(gradcli.tensor(a))
    np.testing.assert_array_equal(r.sign.numpy(), sign)
    np.testing.assert_allclose(r.logabsdet.numpy(), log, rtol=1e-14)
    check_grads(lambda t: gradcli.slogdet(t).logabsdet, a, name=f"slogdet {shape}")
    check_hessian(lambda t: gradcli.slogdet(t).logabsdet, a, name=f"slogdet {shape}")


def test_slogdet_of_a_huge_determinant_has_no_overflow() -> None:
    a = np.eye(400) * 10.0
    r = gradcli.slogdet(_leaf(a))
    assert r.sign.item() == 1.0 and r.logabsdet.item() == pytest.approx(400 * math.log(10.0))
    assert np.isinf(gradcli.evaluate("det(A)", {"A": a}).value)  # where det overflows


def test_slogdet_of_a_singular_matrix() -> None:
    # torch 2.13: sign -0., logabsdet -inf, gradient [[-inf, inf], [inf, -inf]] (A^-T through
    # its LU, whose zero pivot is -0.); gradcli: adj(A)^T / 0, the same infinities up to sign
    assert gradcli.slogdet(gradcli.tensor([[1.0, 2.0], [2.0, 4.0]])).sign.item() == 0.0
    log, g = _grad(lambda t: gradcli.slogdet(t).logabsdet, [[1.0, 2.0], [2.0, 4.0]])
    assert log == -inf
    adjugate_t = np.array([[4.0, -2.0], [-2.0, 1.0]])
    np.testing.assert_array_equal(np.abs(g), inf)
    np.testing.assert_array_equal(np.sign(g), np.sign(adjugate_t))
    _, g = _grad(lambda t: gradcli.slogdet(t).logabsdet, np.zeros((2, 2)))
    assert np.isnan(g).all()  # 0 / 0: the adjugate of the zero matrix is 0 (torch: nan, inf)
    # a batch keeps its regular matrices' gradients
    _, g = _grad(lambda t: gradcli.slogdet(t).logabsdet, [[[1.0, 2.0], [2.0, 4.0]], np.eye(2) * 2])
    np.testing.assert_allclose(g[1], np.eye(2) / 2, rtol=1e-14)


@pytest.mark.filterwarnings("ignore:invalid value encountered in slogdet")
def test_slogdet_at_nan_and_infinite_entries_is_torchs() -> None:
    # torch 2.13's numbers
    for m in ([[nan, 1.0], [1.0, 3.0]], [[1.0, 2.0], [3.0, nan]], [[inf, inf], [1.0, 3.0]]):
        x = _leaf(m)
        r = gradcli.slogdet(x)
        assert r.sign.item() == 0.0 and math.isnan(r.logabsdet.item())
        r.logabsdet.backward()
        assert np.isnan(x.grad.numpy()).all()
    x = _leaf([[inf, 1.0], [1.0, 3.0]])
    r = gradcli.slogdet(x)
    assert (r.sign.item(), r.logabsdet.item()) == (1.0, inf)
    r.logabsdet.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0], [0.0, 1.0 / 3.0]])
    # a nan in one matrix of a batch leaves the others
    x = _leaf([[[1.0, nan], [0.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]]])
    r = gradcli.slogdet(x)
    assert r.sign.tolist() == [0.0, 1.0] and r.logabsdet.tolist()[1] == pytest.approx(math.log(3))
    r.logabsdet.sum().backward()
    assert np.isnan(x.grad.numpy()[0]).all()
    np.testing.assert_allclose(x.grad.numpy()[1], np.linalg.inv([[2.0, 1.0], [1.0, 2.0]]))


def test_slogdet_in_a_program_is_the_stacked_pair() -> None:
    a = [[2.0, 1.0], [1.0, -3.0]]
    r = gradcli.evaluate("slogdet(A)", {"A": a})
    np.testing.assert_allclose(r.value, [-1.0, math.log(7.0)], rtol=1e-15)
    np.testing.assert_allclose(r.grads["A"], np.linalg.inv(a).T, rtol=1e-14)  # sign: none
    r = gradcli.evaluate("slogdet(A)[1]", {"A": a})
    assert r.value == pytest.approx(math.log(7.0), rel=1e-15)
    batch = np.stack([np.eye(2) * 2, -np.eye(2) * 3, [[0.0, 1.0], [1.0, 0.0]]])
    r = gradcli.evaluate("slogdet(A)", {"A": batch})
    np.testing.assert_allclose(r.value, [[1, 1, -1], [math.log(4), math.log(9), 0]], atol=1e-15)
    with pytest.raises(ShapeError, match=r"slogdet: needs a square matrix .* got shape \(2, 3\)"):
        gradcli.evaluate("slogdet(A)", {"A": np.ones((2, 3))})


# --------------------------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------------------------

S3 = np.array([[4.0, 2.0, 0.4], [2.0, 3.0, 0.5], [0.4, 0.5, 2.0]])
W3 = np.array([[1.0, -2.0, 3.0], [0.5, 2.0, -1.0], [1.0, 1.0, 1.0]])


def test_cholesky_value_and_torchs_gradient() -> None:
    x = _leaf(S3)
    L = gradcli.cholesky(x)
    np.testing.assert_allclose(L.detach().numpy(), np.linalg.cholesky(S3), rtol=1e-15)
    (L * gradcli.tensor(W3)).sum().backward()  # an upstream gradient with an upper part
    torch_grad = [  # torch 2.13, float64
        [0.3615996038879446, -0.23603729528273698, 0.06419043753423909],
        [-0.23603729528273695, 0.662203353049768, 0.29935618757852944],
        [0.06419043753423906, 0.29935618757852944, 0.3613146867649621],
    ]
    np.testing.assert_allclose(x.grad.numpy(), torch_grad, rtol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), x.grad.numpy().T, rtol=1e-14)  # symmetric


def test_cholesky_reads_the_lower_triangle_only() -> None:
    upper_nan = S3.copy()
    upper_nan[0, 2] = nan
    upper_nan[0, 1] = 1e300
    L = gradcli.cholesky(gradcli.tensor(upper_nan))
    np.testing.assert_allclose(L.numpy(), np.linalg.cholesky(S3), rtol=1e-15)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (2, 3, 3), (2, 1, 2, 2)])
def test_cholesky_derivatives_through_a_symmetric_input(shape: tuple[int, ...]) -> None:
    a = well_conditioned(rng_for("cholesky", shape), shape)

    def f(t: Any) -> Any:
        return gradcli.cholesky((t + gradcli.swapaxes(t, -1, -2)) * 0.5)

    out = check_grads(f, a, name=f"cholesky {shape}")
    np.testing.assert_allclose(
        out, np.linalg.cholesky((a + np.swapaxes(a, -1, -2)) / 2), rtol=1e-14, atol=1e-15
    )
    check_hessian(f, a, name=f"cholesky {shape}")


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (
            [[1.0, 2.0], [2.0, 1.0]],
            "the matrix is not positive definite (its leading minor of order 2",
        ),
        ([[0.0, 0.0], [0.0, 0.0]], "(its leading minor of order 1 is not)"),
        ([[1.0, 0, 0], [0, 1, 0], [0, 0, -1]], "(its leading minor of order 3 is not)"),
        ([[nan, 0.0], [0.0, 1.0]], "(its leading minor of order 1 is not)"),  # torch: an error
        ([[4.0, 1.0], [nan, 1.0]], "(its leading minor of order 2 is not)"),
        (
            [[[4.0, 0], [0, 1]], [[1.0, 2], [2, 1]]],
            "the matrix at batch index (1,) is not positive",
        ),
        (
            np.stack([np.eye(2), np.eye(2), -np.eye(2), np.eye(2)]).reshape(2, 2, 2, 2),
            "the matrix at batch index (1, 0) is not",
        ),
    ],
)
def test_cholesky_of_a_matrix_not_positive_definite_is_torchs_domain_error(
    matrix: Any, message: str
) -> None:
    with pytest.raises(DomainError) as err:
        gradcli.cholesky(gradcli.tensor(matrix))
    assert str(err.value).startswith("cholesky: ") and message in str(err.value)
    with pytest.raises(DomainError, match="not positive definite"):
        gradcli.evaluate("sum(cholesky(A))", {"A": matrix})


def test_cholesky_edges() -> None:
    assert gradcli.cholesky(np.zeros((0, 0))).shape == (0, 0)
    L = gradcli.cholesky(gradcli.tensor([[inf, 0.0], [0.0, 1.0]]))  # as torch
    assert L.tolist() == [[inf, 0.0], [0.0, 1.0]]
    with pytest.raises(ShapeError, match=r"cholesky: needs a square matrix .* \(2, 3\)"):
        gradcli.cholesky(np.ones((2, 3)))
    x = gradcli.tensor(S3)
    assert x.cholesky().tolist() == gradcli.linalg.cholesky(x).tolist()


# --------------------------------------------------------------------------------------------
# pinv
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (1, 3), (3, 1), (2, 3, 2), (2, 2, 3)])
def test_pinv_full_rank_values_and_derivatives(shape: tuple[int, ...]) -> None:
    rng = rng_for("pinv", shape)
    a = well_conditioned(rng, shape) if shape[-1] == shape[-2] else real()(rng, shape)
    out = check_grads(lambda t: gradcli.pinv(t), a, name=f"pinv {shape}")
    np.testing.assert_allclose(out, np.linalg.pinv(a), rtol=1e-12, atol=1e-14)
    check_hessian(lambda t: gradcli.pinv(t), a, name=f"pinv {shape}")


def test_pinv_of_a_rank_deficient_matrix_is_torchs() -> None:
    # torch 2.13, float64: the derivative at constant rank
    p, g = _grad(gradcli.pinv, [[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_allclose(p, [[0.04, 0.08], [0.08, 0.16]], rtol=1e-14)
    np.testing.assert_allclose(g, [[0.0048, -0.0144], [-0.0144, -0.0768]], rtol=1e-12)
    x = _leaf([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    (gradcli.pinv(x) * gradcli.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    torch_grad = [
        [-0.011020408163265303, -0.019183673469387773, -0.02734693877551023],
        [-0.03836734693877549, -0.07102040816326534, -0.10367346938775518],
    ]
    np.testing.assert_allclose(x.grad.numpy(), torch_grad, rtol=1e-12)
    p, g = _grad(gradcli.pinv, np.zeros((2, 3)))
    assert (p == 0).all() and p.shape == (3, 2) and (g == 0).all()


B0 = [[3.0, 1.0], [1.0, 1.0 / 3.0 + 1e-9]]  # singular values 3.33 and 9e-10
#: torch 2.13: pinv(B0, **options) and the gradient of its sum where the small singular value
#: is cut (default options keep it: entries of 1e9, gradients of 1e17)
CUT = (
    [[0.2699999999757, 0.0900000000189], [0.09000000001890002, 0.030000000015300007]],
    [[-0.17279999999805606, 0.014399999969327996], [0.014399999969327991, 0.028799999993736]],
)


@pytest.mark.parametrize(
    ("options", "cut"),
    [
        ({}, False),
        ({"atol": 1e-3}, True),
        ({"rtol": 1e-3}, True),
        ({"atol": 1e-3, "rtol": 0.0}, True),
        ({"atol": 1e-12, "rtol": 0.0}, False),
        ({"atol": 0.0}, False),
        ({"rtol": 1e-12}, False),
    ],
    ids=str,
)
def test_pinv_tolerances_are_torchs(options: dict[str, float], cut: bool) -> None:
    p, g = _grad(lambda t: gradcli.pinv(t, **options), B0)
    if cut:
        np.testing.assert_allclose(p, CUT[0], rtol=1e-12)
        np.testing.assert_allclose(g, CUT[1], rtol=1e-9)
    else:
        assert np.abs(p).max() > 1e8  # the small singular value kept
    text = ", ".join(f"{k}={v!r}" for k, v in options.items())
    r = gradcli.evaluate(f"sum(pinv(B{', ' + text if text else ''}))", {"B": B0})
    np.testing.assert_array_equal(r.grads["B"], g)


def test_pinv_refuses_bad_tolerances_and_non_finite_entries() -> None:
    with pytest.raises(InvalidValueError, match=r"pinv: atol must be a number >= 0, got -0\.5"):
        gradcli.pinv(np.eye(2), atol=-0.5)
    with pytest.raises(InvalidValueError, match="pinv: rtol must be a number >= 0, got nan"):
        gradcli.pinv(np.eye(2), rtol=nan)
    for bad in (nan, inf):
        with pytest.raises(DomainError, match="pinv: the matrix has a nan or infinite entry"):
            gradcli.pinv(np.array([[bad, 1.0], [2.0, 3.0]]))
    with pytest.raises(ShapeError, match=r"pinv: needs a matrix .* got shape \(2,\)"):
        gradcli.pinv(np.ones(2))
    assert gradcli.pinv(np.ones((0, 3))).shape == (3, 0)
    assert not hasattr(gradcli.Tensor, "pinv")  # torch's method is pinverse


# --------------------------------------------------------------------------------------------
# the language, namespaces, plans, Dask
# --------------------------------------------------------------------------------------------


def test_the_functions_are_in_torchs_namespaces() -> None:
    for name in ("slogdet", "cholesky", "pinv"):
        assert name in linalg.NAMES and getattr(linalg, name) is getattr(gradcli, name)
    assert "einsum" not in linalg.NAMES  # torch.einsum, not torch.linalg.einsum


def test_second_derivatives_through_the_language() -> None:
    a = [[3.2, 0.4, -0.5], [0.1, 2.7, 0.3], [-0.6, 0.2, 3.5]]
    for text in (
        "slogdet(A)[1] ** 2",
        "sum(cholesky(A @ A.T + eye(3)) ** 3)",
        "sum(pinv(A[:2]) ** 2)",
        'sum(einsum("ij,jk,ki->i", A, A, A) ** 2) + einsum("ii", A @ A)',
    ):
        result = analysis.check(text, {"A": a}, order=2)
        assert result.ok, text


def test_plans_replay_and_decide_again() -> None:
    f = gradcli.compile("sum(slogdet(A)) + sum(cholesky(A)) + sum(pinv(A))")
    good = np.array([[2.0, 0.5], [0.5, 1.0]])
    for a in (good, good * 3):
        got, want = (
            f({"A": a}),
            gradcli.evaluate("sum(slogdet(A)) + sum(cholesky(A)) + sum(pinv(A))", {"A": a}),
        )
        assert got.value == want.value
        np.testing.assert_array_equal(got.grads["A"], want.grads["A"])
    with pytest.raises(DomainError, match="cholesky: the matrix is not positive definite"):
        f({"A": -good})


EINSUM_ON_DASK = [
    ('sum(einsum("ij,jk->ik", X, Y))', {"X": (5, 4), "Y": (4, 6)}),
    ('einsum("ii->", M) + sum(einsum("ii->i", M) * v)', {"M": (5, 5), "v": (5,)}),
    ('sum(einsum("i,j->ij", v, w) ** 2) + einsum("i,i->", v, v)', {"v": (5,), "w": (3,)}),
    ('sum(einsum("bij,bjk->bik", B, C) ** 2)', {"B": (3, 2, 4), "C": (3, 4, 2)}),
    ('sum(einsum("...ij,jk->...ik", B, Y[:4, :2])) + sum(einsum("ij->ji", X) ** 3)',
     {"B": (3, 2, 4), "Y": (4, 6), "X": (5, 4)}),
    ('sum(einsum("iij,jk->ik", T, Y) * 2) + sum(einsum("ij,j->i", X, v[:1]))',
     {"T": (4, 4, 4), "Y": (4, 6), "X": (5, 4), "v": (5,)}),
]  # fmt: skip


@pytest.mark.parametrize(("text", "shapes"), EINSUM_ON_DASK, ids=[t for t, _ in EINSUM_ON_DASK])
def test_einsum_is_lazy_on_dask_with_numpys_numbers(text: str, shapes: dict[str, Any]) -> None:
    rng = rng_for("dask", text)
    inputs = {k: rng.normal(size=s) for k, s in shapes.items()}
    want = gradcli.evaluate(text, inputs)
    got = lazy.evaluate(text, inputs, chunks=16)  # two float64 elements a chunk
    np.testing.assert_allclose(got.value, want.value, rtol=1e-12)
    for k in inputs:
        np.testing.assert_allclose(got.grads[k], want.grads[k], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["slogdet", "cholesky", "pinv"])
def test_the_others_are_refused_by_name_on_dask(name: str) -> None:
    with pytest.raises(InputError, match=f"`{name}` is not available with the Dask backend"):
        lazy.evaluate(f"sum({name}(M))", {"M": np.eye(4) * 2}, chunks=16)


# --------------------------------------------------------------------------------------------
# against torch itself, when it is installed
# --------------------------------------------------------------------------------------------


def _torch() -> Any:
    torch = pytest.importorskip("torch")
    return torch


@pytest.mark.parametrize(("subs", "shapes"), EINSUM_FORMS, ids=[s for s, _ in EINSUM_FORMS])
def test_einsum_against_torch(subs: str, shapes: list[tuple[int, ...]]) -> None:
    torch = _torch()
    rng = rng_for("einsum-torch", subs, shapes)
    arrays = [rng.normal(size=s) for s in shapes]
    ours = [_leaf(a) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    o, t = gradcli.einsum(subs, *ours), torch.einsum(subs, *theirs)
    np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-13)
    w = rng.normal(size=tuple(t.shape))
    (o * gradcli.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_linear_algebra_against_torch_at_many_points() -> None:
    torch = _torch()
    rng = np.random.default_rng(17)
    for trial in range(20):
        n = int(rng.integers(1, 5))
        batch = [(), (2,), (2, 3)][trial % 3]
        x = rng.normal(size=(*batch, n, n))
        spd = x @ np.swapaxes(x, -1, -2) + np.eye(n)
        rect = rng.normal(size=(*batch, n, int(rng.integers(1, 5))))
        for name, a, fn, tfn in (
            ("slogdet", x, lambda t: gradcli.slogdet(t).logabsdet,
             lambda t: torch.linalg.slogdet(t).logabsdet),
            ("cholesky", spd, gradcli.cholesky, torch.linalg.cholesky),  # directly, not via x
            ("pinv", rect, gradcli.pinv, torch.linalg.pinv),
        ):  # fmt: skip
            ours, theirs = _leaf(a), torch.tensor(a, requires_grad=True)
            o, t = fn(ours), tfn(theirs)
            np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-9)
            w = rng.normal(size=tuple(t.shape))
            # first and second order: the gradient, and the gradient of its weighted sum
            (go,) = gradcli.autograd.grad((o * gradcli.tensor(w)).sum(), [ours], create_graph=True)
            (gt,) = torch.autograd.grad((t * torch.tensor(w)).sum(), [theirs], create_graph=True)
            scale = max(np.abs(gt.detach().numpy()).max(), 1.0)
            np.testing.assert_allclose(go.detach().numpy(), gt.detach().numpy(), rtol=1e-8,
                                       atol=1e-9 * scale, err_msg=name)  # fmt: skip
            v = rng.normal(size=a.shape)
            (ho,) = gradcli.autograd.grad((go * gradcli.tensor(v)).sum(), [ours])
            (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), [theirs])
            scale = max(np.abs(ht.numpy()).max(), 1.0)
            np.testing.assert_allclose(ho.numpy(), ht.numpy(), rtol=1e-7, atol=1e-8 * scale,
                                       err_msg=f"{name}: second order")  # fmt: skip


def test_awkward_points_against_torch() -> None:
    torch = _torch()
    t = torch.tensor([[inf, 1.0], [1.0, 3.0]], dtype=torch.float64, requires_grad=True)
    torch.linalg.slogdet(t).logabsdet.backward()
    _, g = _grad(lambda x: gradcli.slogdet(x).logabsdet, [[inf, 1.0], [1.0, 3.0]])
    np.testing.assert_array_equal(g, t.grad.numpy())
    for m in ([[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]], B0):
        t = torch.tensor(m, dtype=torch.float64, requires_grad=True)
        torch.linalg.pinv(t, atol=1e-3).sum().backward()
        _, g = _grad(lambda x: gradcli.pinv(x, atol=1e-3), m)
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=1e-15)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(torch.tensor([[nan, 0.0], [0.0, 1.0]], dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# awkward matrices: ill-conditioned, a negative determinant, rank-deficient with a cut
# --------------------------------------------------------------------------------------------

HILBERT4 = 1.0 / (np.arange(4)[:, None] + np.arange(4)[None, :] + 1.0)  # condition 1.6e4
NEGATIVE_DET = np.array([[1.0, 0.0, 3.0], [0.0, 2.0, 1.0], [4.0, 1.0, 0.0]])  # det -25
RANK1 = np.array([[1.0, 2.0], [2.0, 4.0]])
RANK1_WIDE = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])


def _sym(m: Any) -> Any:
    """The symmetric part, so that cholesky's derivative is a derivative in every entry."""
    return (m + m.T) * 0.5


#: (name, gradcli's function, torch's (of torch's namespace), matrix, finite differences too)
AWKWARD_MATRICES: list[tuple[str, Any, Any, np.ndarray, bool]] = [
    ("slogdet, negative determinant", lambda t: gradcli.slogdet(t).logabsdet,
     lambda t, torch: torch.linalg.slogdet(t).logabsdet, NEGATIVE_DET, True),
    ("slogdet, ill-conditioned", lambda t: gradcli.slogdet(t).logabsdet,
     lambda t, torch: torch.linalg.slogdet(t).logabsdet, HILBERT4, False),
    ("cholesky, ill-conditioned 3 x 3", lambda t: gradcli.cholesky(_sym(t)),
     lambda t, torch: torch.linalg.cholesky(_sym(t)), HILBERT4[:3, :3], True),
    ("cholesky, ill-conditioned 4 x 4", lambda t: gradcli.cholesky(_sym(t)),
     lambda t, torch: torch.linalg.cholesky(_sym(t)), HILBERT4, False),
    ("pinv, ill-conditioned", gradcli.pinv, lambda t, torch: torch.linalg.pinv(t), HILBERT4,
     False),
    ("pinv, rank 1 of 2, atol cut", lambda t: gradcli.pinv(t, atol=1e-3),
     lambda t, torch: torch.linalg.pinv(t, atol=1e-3), RANK1, True),
    ("pinv, rank 1 of 2 x 3, rtol cut", lambda t: gradcli.pinv(t, rtol=1e-3),
     lambda t, torch: torch.linalg.pinv(t, rtol=1e-3), RANK1_WIDE, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "f", "tf", "a", "differences"),
    AWKWARD_MATRICES,
    ids=[m[0] for m in AWKWARD_MATRICES],
)
def test_awkward_matrices_first_and_second_derivatives_as_torch(
    name: str, f: Any, tf: Any, a: np.ndarray, differences: bool
) -> None:
    """Central differences where they are accurate (an ill-conditioned matrix's curvature
    of 10⁹ puts them off by 1e-5: torch is the reference there), and torch 2.13's first and
    second derivatives in float64. At a rank-deficient matrix with a cut, the derivative is
    torch's at constant rank, correct for the cut pseudo-inverse (finite differences agree);
    its second derivative is that formula's derivative, torch's too, and is not symmetric."""
    if differences:
        check_grads(f, a, name=name)
        if not name.startswith("pinv"):
            check_hessian(f, a, name=name)
    torch = _torch()
    rng = rng_for("awkward-matrices", name)
    ours, theirs = _leaf(a), torch.tensor(a, requires_grad=True)
    o, t = f(ours), tf(theirs, torch)
    np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-15)
    w = rng.normal(size=tuple(t.shape))
    (go,) = gradcli.autograd.grad((o * gradcli.tensor(w)).sum(), [ours], create_graph=True)
    (gt,) = torch.autograd.grad((t * torch.tensor(w)).sum(), [theirs], create_graph=True)
    scale = np.abs(gt.detach().numpy()).max()
    # (to the rounding an ill-conditioned matrix allows: its condition number squared, 2.4e8,
    # times 1e-16; measured 4e-10 at most, and 1.1e-7 for the second derivatives)
    np.testing.assert_allclose(
        go.detach().numpy(), gt.detach().numpy(), rtol=1e-8, atol=1e-12 * scale, err_msg=name
    )
    v = rng.normal(size=a.shape)
    (ho,) = gradcli.autograd.grad((go * gradcli.tensor(v)).sum(), [ours])
    (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), [theirs])
    scale = np.abs(ht.numpy()).max()
    np.testing.assert_allclose(
        ho.numpy(), ht.numpy(), rtol=1e-6, atol=1e-10 * scale, err_msg=f"{name}: second order"
    )


def test_the_negative_determinant_is_negative() -> None:
    assert gradcli.slogdet(gradcli.tensor(NEGATIVE_DET)).sign.item() == -1.0
