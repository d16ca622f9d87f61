"""The tensor API against PyTorch's semantics (docs/api.md, "Tensors"; issue 3), with hard
numbers.

Every expected number here was computed by hand (the tutorial's values) or printed by
PyTorch 2 for the same code in float64; messages are PyTorch's own. The default run needs
no torch: tests/test_vs_torch.py is the optional live comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradcli
from gradcli.nn import utils as nn_utils

SQRT102 = math.sqrt(102.0)  # the tutorial's gradients [5, 6] and [4, 5] as one vector


def close(actual: object, expected: object, tol: float = 1e-12) -> None:
    """Elementwise equality to a relative and absolute tolerance (exact for small ints)."""
    a = actual.tolist() if isinstance(actual, gradcli.Tensor) else actual
    np.testing.assert_allclose(np.asarray(a, dtype=float), expected, rtol=tol, atol=tol)


def tutorial() -> tuple[gradcli.Tensor, gradcli.Tensor]:
    """The tutorial's ``c = a * b + b; c.sum().backward()``: a.grad [5, 6], b.grad [4, 5]."""
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    (a * b + b).sum().backward()
    return a, b


# --------------------------------------------------------------------------------------
# The tutorial's snippets
# --------------------------------------------------------------------------------------


def test_tutorial_x_plus_y() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = gradcli.tensor([5.0, 6.0], requires_grad=True)
    z = x + y
    z.sum().backward()
    assert repr(x.grad) == "tensor([1., 1.])"
    assert str(y.grad) == "tensor([1., 1.])"


def test_tutorial_a_times_b_plus_b() -> None:
    a, b = tutorial()
    assert a.grad.tolist() == [5.0, 6.0]
    assert b.grad.tolist() == [4.0, 5.0]
    assert str(a.grad) == "tensor([5., 6.])"


def test_grads_of_two_inputs_are_separate_buffers() -> None:
    # z = x + y sends the same upstream gradient to both: zeroing one must not zero the other.
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = gradcli.tensor([5.0, 6.0], requires_grad=True)
    (x + y).sum().backward()
    x.grad.zero_()
    assert x.grad.tolist() == [0.0, 0.0]
    assert y.grad.tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------------------
# .grad, leaves and non-leaves
# --------------------------------------------------------------------------------------


def test_grad_is_none_until_the_first_backward() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    assert x.grad is None
    y = x * x
    assert x.grad is None  # building the graph computes no gradient
    y.sum().backward()
    assert isinstance(x.grad, gradcli.Tensor)
    assert x.grad.tolist() == [4.0, 6.0]
    assert x.grad.requires_grad is False
    assert x.grad.shape == x.shape


def test_leaves_and_the_tensors_made_from_them() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    c = gradcli.tensor([1.0, 1.0])
    y = x * c
    assert x.is_leaf and c.is_leaf and not y.is_leaf
    assert y.requires_grad  # carries the graph
    assert not c.requires_grad
    assert x.grad_fn is None
    assert repr(y.grad_fn) == "<MulBackward0>"
    assert not (c * c).requires_grad  # nothing to differentiate: no graph
    assert (c * c).grad_fn is None


def test_non_leaf_has_no_grad_unless_retain_grad() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = x * x
    y.sum().backward()
    assert y.grad is None
    assert x.grad.tolist() == [4.0, 6.0]

    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    y.sum().backward()
    assert y.grad.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [4.0, 6.0]


def test_constant_input_gets_no_grad() -> None:
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0])  # --wrt a
    (a * b + b).sum().backward()
    assert a.grad.tolist() == [5.0, 6.0]
    assert b.grad is None


@pytest.mark.parametrize("value", [3.0, [3.0], [[3.0]]], ids=["0-d", "1-element", "1x1"])
def test_every_path_adds_to_the_gradient(value: object) -> None:
    # A tensor used several times gets the sum of the gradients along every use:
    # d(x*x + 2x + x)/dx at 3 = 2*3 + 2 + 1 = 9 (0-d tensors included).
    x = gradcli.tensor(value, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.shape == x.shape
    assert x.grad.item() == 6.0
    x.grad = None
    (x * x + 2 * x + x).sum().backward()
    assert x.grad.item() == 9.0
    x.grad = None
    ((x * x).exp() * 0 + x * x * x).sum().backward()  # 3 x² = 27
    assert x.grad.item() == 27.0


def test_broadcast_gradient_is_summed_to_the_input_shape() -> None:
    x = gradcli.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    s = gradcli.tensor(2.0, requires_grad=True)
    r = gradcli.tensor([1.0, 10.0, 100.0], requires_grad=True)
    (x * s + r).sum().backward()
    assert s.grad.shape == ()
    assert s.grad.item() == 21.0
    assert r.grad.tolist() == [2.0, 2.0, 2.0]
    assert x.grad.tolist() == [[2.0] * 3, [2.0] * 3]


# --------------------------------------------------------------------------------------
# backward()'s errors
# --------------------------------------------------------------------------------------


def test_backward_on_a_non_scalar_needs_a_gradient() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(
        RuntimeError, match="grad can be implicitly created only for scalar outputs"
    ):
        (x * 2).backward()
    assert x.grad is None


def test_backward_with_gradient_is_a_vector_jacobian_product() -> None:
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    (a * b + b).backward(gradient=gradcli.tensor([1.0, 2.0]))
    assert a.grad.tolist() == [5.0, 12.0]
    assert b.grad.tolist() == [4.0, 10.0]


def test_backward_gradient_of_the_wrong_shape_names_both_shapes() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(Exception, match=r"\(3,\)") as info:
        (x * 2).backward(gradcli.tensor([1.0, 1.0, 1.0]))
    assert "(2,)" in str(info.value)
    assert x.grad is None


def test_backward_with_nothing_requiring_grad_says_so() -> None:
    c = gradcli.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (c * 2).sum().backward()


def test_one_element_non_scalar_output_backward_implicitly() -> None:
    # torch accepts a 1-element output without `gradient` (it is "scalar" by numel).
    x = gradcli.tensor([3.0], requires_grad=True)
    (x * x).backward()
    assert x.grad.tolist() == [6.0]


# --------------------------------------------------------------------------------------
# Accumulation, zeroing, a second backward
# --------------------------------------------------------------------------------------


def test_gradients_accumulate_over_two_backwards() -> None:
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    for _ in range(2):
        (a * b + b).sum().backward()
    assert a.grad.tolist() == [10.0, 12.0]
    assert b.grad.tolist() == [8.0, 10.0]


def test_second_backward_needs_retain_graph_and_accumulates() -> None:
    # torch 2.13: backward() frees what the graph saved; retain_graph=True keeps it
    a = gradcli.tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.tensor([5.0, 6.0], requires_grad=True)
    c = a * b + b
    c.retain_grad()
    loss = c.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert a.grad.tolist() == [10.0, 12.0]
    assert b.grad.tolist() == [8.0, 10.0]
    assert c.grad.tolist() == [2.0, 2.0]  # retained grads accumulate too, as in torch
    with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second "
                       r"time .* Specify retain_graph=True"):  # fmt: skip
        loss.backward()
    assert a.grad.tolist() == [10.0, 12.0], "a refused backward adds nothing"


def test_a_graph_that_saved_nothing_can_be_walked_again() -> None:
    # torch raises only when a freed saved value is needed: add and sum save none
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    loss = (x + x).sum()
    loss.backward()
    loss.backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_zero_grad_in_place_then_backward_starts_from_zero() -> None:
    a, b = tutorial()
    g = a.grad
    assert a.grad.zero_() is g  # in place, returns itself
    assert a.grad.tolist() == [0.0, 0.0]
    assert str(a.grad) == "tensor([0., 0.])"
    (a * b + b).sum().backward()
    assert a.grad.tolist() == [5.0, 6.0]
    assert a.grad is g  # accumulated into the same tensor
    assert b.grad.tolist() == [8.0, 10.0]  # b was not zeroed


def test_setting_grad_to_none() -> None:
    a, b = tutorial()
    a.grad = None
    assert a.grad is None
    (a * b + b).sum().backward()
    assert a.grad.tolist() == [5.0, 6.0]
    assert b.grad.tolist() == [8.0, 10.0]


def test_grad_is_not_shared_with_a_later_backward() -> None:
    # Holding on to an old grad tensor and then setting .grad = None: the old one is untouched.
    a, b = tutorial()
    old = a.grad
    a.grad = None
    (a * b + b).sum().backward()
    assert old.tolist() == [5.0, 6.0]
    assert a.grad is not old


# --------------------------------------------------------------------------------------
# requires_grad_, detach, no_grad, in-place updates
# --------------------------------------------------------------------------------------


def test_requires_grad_in_place() -> None:
    x = gradcli.tensor([2.0, 3.0])
    assert x.requires_grad is False
    assert x.requires_grad_() is x
    assert x.requires_grad is True
    (x * x).sum().backward()
    assert x.grad.tolist() == [4.0, 6.0]
    x.requires_grad_(False)
    assert x.requires_grad is False
    assert not (x * x).requires_grad


def test_requires_grad_false_on_a_non_leaf_is_refused() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)
    assert y.requires_grad


def test_requires_grad_true_on_a_non_leaf_is_a_no_op() -> None:
    # torch: requires_grad_() on a non-leaf that already requires grad is allowed (a no-op);
    # only turning it off is refused.
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = x * 2
    assert y.requires_grad_() is y
    assert y.requires_grad and not y.is_leaf


def test_detach() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = x * x
    d = y.detach()
    assert d.requires_grad is False
    assert d.grad_fn is None
    assert d.is_leaf
    assert d.tolist() == [4.0, 9.0]
    # A detached tensor is a constant: the gradient stops there.
    (d * x).sum().backward()
    assert x.grad.tolist() == [4.0, 9.0]
    # It shares memory with the original, as torch's detach does.
    x.detach().numpy()[0] = 7.0
    assert x.tolist() == [7.0, 3.0]


def test_no_grad_context_manager_records_no_graph() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with gradcli.no_grad():
        y = x * x + 1
    assert y.requires_grad is False
    assert y.grad_fn is None
    assert y.tolist() == [5.0, 10.0]
    z = x * x  # recording is back on afterwards
    assert z.requires_grad


def test_no_grad_restores_recording_after_an_exception() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(ZeroDivisionError), gradcli.no_grad():
        _ = 1 / 0
    assert (x * x).requires_grad


def test_no_grad_nested() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with gradcli.no_grad():
        with gradcli.no_grad():
            pass
        assert not (x * x).requires_grad
    assert (x * x).requires_grad


def test_no_grad_as_a_decorator() -> None:
    @gradcli.no_grad()
    def double(t: gradcli.Tensor) -> gradcli.Tensor:
        return t * 2

    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    y = double(x)
    assert y.requires_grad is False
    assert y.grad_fn is None
    assert y.tolist() == [4.0, 6.0]
    assert (x * 2).requires_grad


def test_manual_sgd_step_in_place_under_no_grad() -> None:
    # The tutorial's hand-written update: `with torch.no_grad(): w -= lr * w.grad`.
    w = gradcli.tensor([1.0, -2.0], requires_grad=True)
    ((w - 3.0) ** 2).sum().backward()
    with gradcli.no_grad():
        w -= 0.1 * w.grad
    assert w.is_leaf and w.requires_grad
    close(w, [1.4, -1.0])


def test_in_place_on_a_leaf_that_requires_grad_is_refused() -> None:
    w = gradcli.tensor([1.0, -2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w += 1.0
    assert w.tolist() == [1.0, -2.0]


# --------------------------------------------------------------------------------------
# Conversions and attributes
# --------------------------------------------------------------------------------------


def test_item() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    s = (x * x).sum()
    v = s.item()
    assert type(v) is float
    assert v == 13.0
    assert gradcli.tensor([7.5]).item() == 7.5  # one element of any shape
    with pytest.raises(
        RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"
    ):
        x.item()


def test_numpy() -> None:
    c = gradcli.tensor([[1.0, 2.0], [3.0, 4.0]])
    arr = c.numpy()
    assert isinstance(arr, np.ndarray)
    assert arr.dtype == np.float64
    assert arr.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_numpy_refused_while_requiring_grad() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"Can't call numpy\(\) on Tensor that requires grad\. "
        r"Use tensor\.detach\(\)\.numpy\(\) instead\.",
    ):
        x.numpy()
    assert x.detach().numpy().tolist() == [2.0, 3.0]


def test_tolist() -> None:
    assert gradcli.tensor([[1.0, 2.0], [3.0, 4.0]]).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert gradcli.tensor(3.0).tolist() == 3.0
    assert gradcli.tensor([2, 3]).tolist() == [2.0, 3.0]  # floating point, like the language


def test_shape_and_T() -> None:
    m = gradcli.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    assert m.shape == (2, 3)
    assert tuple(m.shape) == (2, 3)
    assert gradcli.tensor(1.0).shape == ()
    t = m.T
    assert t.shape == (3, 2)
    assert t.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    (t * gradcli.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    assert m.grad.tolist() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]


def test_tensor_copies_its_data() -> None:
    arr = np.array([1.0, 2.0])
    t = gradcli.tensor(arr)
    arr[0] = 9.0
    assert t.tolist() == [1.0, 2.0]


# --------------------------------------------------------------------------------------
# Methods and gradcli.<function>s (values and gradients printed by torch in float64)
# --------------------------------------------------------------------------------------

X0 = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
V0 = [1.0, -2.0, 0.5]


def leaves() -> tuple[gradcli.Tensor, gradcli.Tensor]:
    return gradcli.tensor(X0, requires_grad=True), gradcli.tensor(V0, requires_grad=True)


ONES = [[1.0] * 3, [1.0] * 3]


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.sum(dim=0),
        lambda x: x.sum(0),
        lambda x: x.sum(axis=0),
        lambda x: gradcli.sum(x, axis=0),
        lambda x: gradcli.sum(x, 0),
        lambda x: gradcli.sum(x, dim=0),
    ],
    ids=["method-dim", "method-positional", "method-axis", "fn-axis", "fn-positional", "fn-dim"],
)
def test_sum_over_an_axis(make: object) -> None:
    x, _ = leaves()
    s = make(x)  # type: ignore[operator]
    assert s.shape == (3,)
    close(s, [2.0, -0.75, 1.25])
    s.sum().backward()
    assert x.grad.tolist() == ONES


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.sum(dim=1, keepdim=True),
        lambda x: x.sum(1, True),
        lambda x: x.sum(axis=1, keepdims=True),
        lambda x: gradcli.sum(x, axis=1, keepdims=True),
        lambda x: gradcli.sum(x, dim=1, keepdim=True),
    ],
    ids=["method-dim-keepdim", "method-positional", "method-numpy", "fn-numpy", "fn-torch"],
)
def test_sum_keepdim(make: object) -> None:
    x, _ = leaves()
    s = make(x)  # type: ignore[operator]
    assert s.shape == (2, 1)
    close(s, [[1.5], [1.0]])
    s.sum().backward()
    assert x.grad.tolist() == ONES


def test_sum_all_and_sum_of_tuple_axes() -> None:
    x, _ = leaves()
    assert x.sum().shape == ()
    close(x.sum(), 2.5)
    close(gradcli.sum(x, axis=(0, 1)), 2.5)
    close(x.sum(dim=(0, 1), keepdim=True), [[2.5]])


def test_mean() -> None:
    x, _ = leaves()
    m = x.mean()
    close(m, 0.4166666666666667)
    m.backward()
    close(x.grad, [[1 / 6] * 3] * 2)
    x.grad = None
    m1 = gradcli.mean(x, axis=1)
    close(m1, [0.5, 0.3333333333333333])
    m1.sum().backward()
    close(x.grad, [[1 / 3] * 3] * 2)
    close(x.mean(dim=1), [0.5, 0.3333333333333333])


TANH = [
    [0.46211715726000974, -0.7615941559557649, 0.9640275800758169],
    [0.9051482536448664, 0.24491866240370913, -0.6351489523872873],
]
DTANH = [
    [0.7864477329659274, 0.41997434161402614, 0.07065082485316443],
    [0.1807066389236486, 0.940014848806378, 0.5965858082813315],
]
EXP = [
    [1.6487212707001282, 0.36787944117144233, 7.38905609893065],
    [4.4816890703380645, 1.2840254166877414, 0.4723665527410147],
]


@pytest.mark.parametrize("form", ["method", "function"])
def test_tanh_and_exp(form: str) -> None:
    x, _ = leaves()
    t = x.tanh() if form == "method" else gradcli.tanh(x)
    close(t, TANH)
    t.sum().backward()
    close(x.grad, DTANH)
    x.grad = None
    e = x.exp() if form == "method" else gradcli.exp(x)
    close(e, EXP)
    e.sum().backward()
    close(x.grad, EXP)


W32 = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.reshape(3, 2),
        lambda x: x.reshape((3, 2)),
        lambda x: x.reshape(-1, 2),
        lambda x: gradcli.reshape(x, (3, 2)),
        lambda x: gradcli.reshape(x, (3, -1)),
    ],
    ids=["varargs", "tuple", "minus-one", "fn", "fn-minus-one"],
)
def test_reshape(make: object) -> None:
    x, _ = leaves()
    r = make(x)  # type: ignore[operator]
    assert r.shape == (3, 2)
    y = r * gradcli.tensor(W32)
    close(y, [[0.5, -2.0], [6.0, 6.0], [1.25, -4.5]])
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert x.reshape(-1).shape == (6,)


@pytest.mark.parametrize("form", ["@", "matmul-fn", "matmul-method"])
def test_matmul(form: str) -> None:
    x, v = leaves()
    if form == "@":
        y = x @ v
    elif form == "matmul-fn":
        y = gradcli.matmul(x, v)
    else:
        y = x.matmul(v)
    assert y.shape == (2,)
    q = y**2
    close(q, [12.25, 0.390625])
    q.sum().backward()
    close(x.grad, [[7.0, -14.0, 3.5], [1.25, -2.5, 0.625]])
    close(v.grad, [5.375, -6.6875, 13.0625])


def test_transpose_method_swaps_the_two_dims_given() -> None:
    # torch's x.transpose(dim0, dim1) swaps two dimensions: (0, 1) and (1, 0) are both the
    # matrix transpose (NumPy's transpose(axes) would read (0, 1) as "no change").
    m = gradcli.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    for dims in ((0, 1), (1, 0), (-1, -2)):
        t = m.transpose(*dims)
        assert t.shape == (3, 2), dims
        assert t.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], dims
    (m.transpose(0, 1) * gradcli.tensor(W32)).sum().backward()
    assert m.grad.tolist() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]


def test_a_composition_of_methods() -> None:
    x, v = leaves()
    out = (x.tanh() * v).sum(dim=-1).exp().mean()
    close(out, 6.446734259461071)
    out.backward()
    close(
        x.grad,
        [
            [4.6364225408429665, -4.95183194613981, 0.2082573724530984],
            [0.09963008817075962, -1.036528185419606, 0.16445963754991424],
        ],
    )
    close(v.grad, [3.223405533268586, -4.354868315083104, 5.33314592250908])


def test_reflected_operators_with_python_numbers() -> None:
    x = gradcli.tensor([2.0, 4.0], requires_grad=True)
    y = 1 - 8 / x + 2 * x**2 + 3**x
    close(y, [14.0, 112.0])
    y.sum().backward()
    close(x.grad, [2.0 + 8 + 9 * math.log(3), 0.5 + 16 + 81 * math.log(3)])


def test_every_language_function_is_a_gradcli_function() -> None:
    from gradcli.language import FUNCTIONS

    missing = sorted(name for name in FUNCTIONS if not callable(getattr(gradcli, name, None)))
    assert missing == []


# --------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------


def test_printing_like_torch() -> None:
    x = gradcli.tensor([2.0, 3.0], requires_grad=True)
    assert repr(gradcli.tensor([1.0, 1.0])) == "tensor([1., 1.])"
    assert repr(gradcli.tensor(SQRT102)) == "tensor(10.0995)"
    assert repr(x) == "tensor([2., 3.], requires_grad=True)"
    assert repr((x * x).sum()) == "tensor(13., grad_fn=<SumBackward0>)"
    assert repr(x * x) == "tensor([4., 9.], grad_fn=<MulBackward0>)"
    assert repr(x + x) == "tensor([4., 6.], grad_fn=<AddBackward0>)"
    assert repr(-x) == "tensor([-2., -3.], grad_fn=<NegBackward0>)"
    assert repr(x.tanh()) == "tensor([0.9640, 0.9951], grad_fn=<TanhBackward0>)"
    assert repr(x.exp()) == "tensor([ 7.3891, 20.0855], grad_fn=<ExpBackward0>)"
    assert repr(x.mean()) == "tensor(2.5000, grad_fn=<MeanBackward0>)"
    assert repr(gradcli.tensor(49.0, requires_grad=True).sum()) == (
        "tensor(49., grad_fn=<SumBackward0>)"
    )
    assert str(x) == repr(x)


def test_printing_a_matrix() -> None:
    m = gradcli.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert repr(m.T) == "tensor([[1., 3.],\n        [2., 4.]])"


def test_printing_float32_shows_the_dtype() -> None:
    t = gradcli.tensor([1.5, 2.0], dtype=gradcli.float32)
    assert t.dtype == np.float32
    assert repr(t) == "tensor([1.5000, 2.0000], dtype=float32)"
    r = gradcli.tensor([1.5, 2.0], dtype=gradcli.float32, requires_grad=True)
    assert repr(r) == "tensor([1.5000, 2.0000], dtype=float32, requires_grad=True)"
    assert "dtype" not in repr(gradcli.tensor([1.5, 2.0]))  # float64, our default: no suffix


def test_float32_gradients_stay_float32() -> None:
    x = gradcli.tensor([2.0, 3.0], dtype=gradcli.float32, requires_grad=True)
    (x * x * 0.5).sum().backward()
    assert x.grad.dtype == np.float32
    assert x.grad.tolist() == [2.0, 3.0]


# --------------------------------------------------------------------------------------
# Higher order: backward(create_graph=True), autograd.grad
# --------------------------------------------------------------------------------------


def test_create_graph_gives_a_differentiable_grad() -> None:
    x = gradcli.tensor(2.0, requires_grad=True)
    (x**3).backward(create_graph=True)
    assert x.grad.item() == 12.0  # 3 x² at 2
    assert x.grad.requires_grad
    assert x.grad.grad_fn is not None
    g = x.grad
    x.grad = None
    g.backward()
    assert x.grad.item() == 12.0  # 6 x at 2


def test_create_graph_on_a_vector() -> None:
    # f = sum(x² y): df/dx = 2 x y, and d/dy of sum(df/dx) = 2 sum(x)... per element 2 x.
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    y = gradcli.tensor([3.0, 5.0], requires_grad=True)
    (x * x * y).sum().backward(create_graph=True)
    gx = x.grad
    assert gx.tolist() == [6.0, 20.0]
    x.grad = None
    y.grad = None
    gx.sum().backward()
    assert x.grad.tolist() == [6.0, 10.0]  # d/dx sum(2 x y) = 2 y
    assert y.grad.tolist() == [2.0, 4.0]  # d/dy sum(2 x y) = 2 x


def test_autograd_grad_third_derivative() -> None:
    x = gradcli.tensor(2.0, requires_grad=True)
    (g1,) = gradcli.autograd.grad(x**3, x, create_graph=True)
    (g2,) = gradcli.autograd.grad(g1, x, create_graph=True)
    (g3,) = gradcli.autograd.grad(g2, x)
    assert (g1.item(), g2.item(), g3.item()) == (12.0, 12.0, 6.0)
    assert x.grad is None  # autograd.grad does not touch .grad


# --------------------------------------------------------------------------------------
# clip_grad_norm_ and clip_grad_value_ (numbers printed by torch.nn.utils in float64)
# --------------------------------------------------------------------------------------


def test_clip_grad_norm_tutorial() -> None:
    a, b = tutorial()
    total = gradcli.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert isinstance(total, gradcli.Tensor)
    close(total.item(), SQRT102)  # the norm *before* clipping
    assert repr(total) == "tensor(10.0995)"
    scale = 1.0 / (SQRT102 + 1e-6)
    close(scale, 0.09901474449374685)
    close(a.grad, [5 * scale, 6 * scale])
    close(b.grad, [4 * scale, 5 * scale])
    close(a.grad, [0.49507372246873427, 0.5940884669624811])
    close(b.grad, [0.3960589779749874, 0.49507372246873427])
    assert repr(a.grad) == "tensor([0.4951, 0.5941])"
    # After clipping, the total norm is max_norm (up to the 1e-6 guard).
    close(math.hypot(*a.grad.tolist(), *b.grad.tolist()), 1.0, tol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "total", "a_grad", "b_grad"),
    [
        (
            {"max_norm": 1.0, "norm_type": math.inf},
            6.0,
            [0.8333331944444676, 0.9999998333333611],
            [0.6666665555555741, 0.8333331944444676],
        ),
        (
            {"max_norm": 1.0, "norm_type": "inf"},
            6.0,
            [0.8333331944444676, 0.9999998333333611],
            [0.6666665555555741, 0.8333331944444676],
        ),
        (
            {"max_norm": 1.0, "norm_type": 1},
            20.0,
            [0.2499999875000006, 0.29999998500000075],
            [0.1999999900000005, 0.2499999875000006],
        ),
        (
            {"max_norm": 2.0, "norm_type": 3},
            8.092672334566455,
            [1.2356856117355843, 1.4828227340827014],
            [0.9885484893884675, 1.2356856117355843],
        ),
        (
            {"max_norm": 1.0, "norm_type": 0.5},
            79.5954050913377,
            [0.06281769571302113, 0.07538123485562537],
            [0.05025415657041691, 0.06281769571302113],
        ),
        ({"max_norm": 100.0}, SQRT102, [5.0, 6.0], [4.0, 5.0]),  # under max_norm: unchanged
    ],
    ids=["inf", "inf-string", "1", "3", "0.5", "no-clip"],
)
def test_clip_grad_norm_norm_types(
    kwargs: dict[str, object], total: float, a_grad: list[float], b_grad: list[float]
) -> None:
    a, b = tutorial()
    got = nn_utils.clip_grad_norm_([a, b], **kwargs)  # type: ignore[arg-type]
    close(got.item(), total)
    close(a.grad, a_grad)
    close(b.grad, b_grad)


def test_clip_grad_norm_positional_arguments() -> None:
    a, b = tutorial()
    got = nn_utils.clip_grad_norm_([a, b], 1.0, 1.0)
    close(got.item(), 20.0)
    close(a.grad, [0.2499999875000006, 0.29999998500000075])


def test_clip_grad_norm_of_a_single_tensor() -> None:
    a, b = tutorial()
    total = nn_utils.clip_grad_norm_(a, 1.0)
    close(total.item(), math.sqrt(61.0))
    close(a.grad, [0.6401843176972772, 0.7682211812367328])
    assert b.grad.tolist() == [4.0, 5.0]  # not in the parameters: untouched


def test_clip_grad_norm_of_a_generator() -> None:
    a, b = tutorial()
    total = nn_utils.clip_grad_norm_((p for p in (a, b)), max_norm=1.0)
    close(total.item(), SQRT102)
    close(a.grad, [0.49507372246873427, 0.5940884669624811])


def test_clip_grad_norm_skips_params_whose_grad_is_none() -> None:
    a, b = tutorial()
    c = gradcli.tensor([1.0, 1.0], requires_grad=True)  # never used: grad None
    total = nn_utils.clip_grad_norm_([a, c, b], max_norm=1.0)
    close(total.item(), SQRT102)
    assert c.grad is None
    close(a.grad, [0.49507372246873427, 0.5940884669624811])


def test_clip_grad_norm_of_nothing() -> None:
    total = nn_utils.clip_grad_norm_([], max_norm=1.0)
    assert total.item() == 0.0
    assert repr(total) == "tensor(0.)"


def test_clip_grad_norm_error_if_nonfinite() -> None:
    a, b = tutorial()
    a.grad.numpy()[0] = math.inf  # a grad does not require grad: numpy() is allowed
    with pytest.raises(
        RuntimeError,
        match=r"The total norm of order 2\.0 for gradients from `parameters` is non-finite",
    ):
        nn_utils.clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
    assert b.grad.tolist() == [4.0, 5.0]  # nothing was changed
    assert a.grad.tolist() == [math.inf, 6.0]
    # Without the flag, torch scales by max_norm / (inf + 1e-6) = 0 (inf * 0 is nan).
    total = nn_utils.clip_grad_norm_([a, b], 1.0)
    assert total.item() == math.inf
    assert math.isnan(a.grad.tolist()[0])
    assert a.grad.tolist()[1] == 0.0
    assert b.grad.tolist() == [0.0, 0.0]


def test_clip_grad_norm_with_nan() -> None:
    a, b = tutorial()
    a.grad.numpy()[0] = math.nan
    total = nn_utils.clip_grad_norm_([a, b], 1.0)
    assert math.isnan(total.item())
    assert all(math.isnan(v) for v in a.grad.tolist() + b.grad.tolist())


def test_clip_grad_value() -> None:
    a, b = tutorial()
    assert gradcli.nn.utils.clip_grad_value_([a, b], clip_value=4.5) is None
    assert a.grad.tolist() == [4.5, 4.5]
    assert b.grad.tolist() == [4.0, 4.5]
    a, b = tutorial()
    nn_utils.clip_grad_value_(a, 0.5)  # a single tensor
    assert a.grad.tolist() == [0.5, 0.5]
    assert b.grad.tolist() == [4.0, 5.0]


def test_clip_grad_value_is_symmetric() -> None:
    x = gradcli.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x * gradcli.tensor([-3.0, 0.5, 10.0])).sum().backward()
    nn_utils.clip_grad_value_((t for t in [x]), clip_value=1.0)
    assert x.grad.tolist() == [-1.0, 0.5, 1.0]


# --------------------------------------------------------------------------------------
# Optimisers: trajectories printed by torch.optim in float64
# Minimise sum(w⁴ - 3 w) from w = [1, -2, 0.5]; w after each of 4 steps.
# --------------------------------------------------------------------------------------

TRAJECTORIES = {
    "sgd": (
        lambda p: gradcli.optim.SGD(p, lr=0.01),
        [
            [0.99, -1.65, 0.525],
            [0.98118804, -1.440315, 0.549211875],
            [0.9734032747137749, -1.2907972407726698, 0.5725854429617745],
            [0.9665107480184352, -1.1747703797582518, 0.5950764637994364],
        ],
    ),
    "momentum": (
        lambda p: gradcli.optim.SGD(p, lr=0.01, momentum=0.9),
        [
            [0.99, -1.65, 0.525],
            [0.97218804, -1.1253149999999998, 0.571711875],
            [0.9494027510934523, -0.5660975209783746, 0.6362778992695375],
            [0.9246656324781469, -0.025545180401266628, 0.7140834478800697],
        ],
    ),
    "nesterov": (
        lambda p: gradcli.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True),
        [
            [0.981, -1.335, 0.5475],
            [0.958150213284, -0.8136754515, 0.6122771424375],
            [0.9347201479162985, -0.3591952630145143, 0.6890402982071995],
            [0.9132331610160895, 0.06396553909312092, 0.7715276550738963],
        ],
    ),
    "dampening-weight-decay": (
        lambda p: gradcli.optim.SGD(p, lr=0.01, momentum=0.9, dampening=0.5, weight_decay=0.1),
        [
            [0.989, -1.648, 0.5245],
            [0.97425826662, -1.22585980416, 0.5584019483775],
            [0.9570086643856616, -0.7934779165363068, 0.6001521641573733],
            [0.9384756920621169, -0.3789458904669027, 0.6481039946977694],
        ],
    ),
    "adam": (
        lambda p: gradcli.optim.Adam(p, lr=0.1),
        [
            [0.900000001, -1.9000000000285715, 0.5999999996000001],
            [0.8394614702562205, -1.8006051035271775, 0.6992850811066967],
            [0.8340398401045934, -1.7022392690489228, 0.7964394804670889],
            [0.8590794380984623, -1.6053242694745131, 0.8883214161719772],
        ],
    ),
    "adam-betas-eps-weight-decay": (
        lambda p: gradcli.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01),
        [
            [0.9500000495049015, -1.9500000014277554, 0.5499999799599279],
            [0.9054420357670131, -1.9002132218027146, 0.5997879215723466],
            [0.87386365409279, -1.8507830202462479, 0.6491310226093492],
            [0.8602472419094979, -1.801849987544612, 0.6976981276602625],
        ],
    ),
}


@pytest.mark.parametrize("name", list(TRAJECTORIES))
def test_optimizer_trajectory_matches_torch(name: str) -> None:
    make, expected = TRAJECTORIES[name]
    w = gradcli.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = make([w])
    for want in expected:
        opt.zero_grad()
        loss = (w**4 - 3 * w).sum()
        loss.backward()
        opt.step()
        close(w, want)
        assert w.is_leaf and w.requires_grad and w.grad_fn is None


def test_zero_grad_sets_grads_to_none() -> None:
    a, b = tutorial()
    opt = gradcli.optim.SGD([a, b], lr=0.1)
    opt.zero_grad()
    assert a.grad is None
    assert b.grad is None
    opt.step()  # no grads: nothing moves
    assert a.tolist() == [3.0, 4.0]


def test_step_without_zero_grad_uses_accumulated_grads() -> None:
    a, b = tutorial()
    (a * b + b).sum().backward()  # a.grad [10, 12]
    opt = gradcli.optim.SGD([a], lr=0.1)
    opt.step()
    close(a, [2.0, 2.8])
    assert b.tolist() == [5.0, 6.0]  # not a parameter of this optimiser


def test_optimizer_accepts_a_generator() -> None:
    w = gradcli.tensor([1.0, -2.0], requires_grad=True)
    opt = gradcli.optim.SGD((p for p in [w]), lr=0.1)
    ((w - 3.0) ** 2).sum().backward()
    opt.step()
    close(w, [1.4, -1.0])


def test_no_grad_and_enable_grad_decorate_with_or_without_parentheses() -> None:
    # torch 2: @torch.no_grad and @torch.no_grad() both work
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)

    @gradcli.no_grad
    def bare(t):
        return t * 2.0

    @gradcli.no_grad()
    def called(t):
        return t * 2.0

    @gradcli.enable_grad
    def recording(t):
        return t * 2.0

    assert not bare(x).requires_grad and not called(x).requires_grad
    assert bare.__name__ == "bare"
    with gradcli.no_grad():
        assert recording(x).requires_grad
        assert not (x * 2.0).requires_grad
    assert (x * 2.0).requires_grad


def test_a_float32_leaf_used_with_float64_keeps_a_float32_grad() -> None:
    # torch 2.13: x (float32) * y (float64) promotes to float64; x.grad is float32 again
    x = gradcli.tensor([1.0, 2.0], dtype="float32", requires_grad=True)
    y = gradcli.tensor([3.0, 4.0], requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.dtype == np.float32 and y.grad.dtype == np.float64
    assert x.grad.tolist() == [3.0, 4.0] and y.grad.tolist() == [1.0, 2.0]


def test_grad_of_an_unused_input_raises_unless_allowed_as_torch() -> None:
    x = gradcli.tensor([1.0, 2.0], requires_grad=True)
    y = gradcli.tensor([3.0], requires_grad=True)
    out = (x * x).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        gradcli.autograd.grad(out, [x, y], retain_graph=True)
    gx, gy = gradcli.autograd.grad(out, [x, y], retain_graph=True, allow_unused=True)
    assert gy is None
    np.testing.assert_array_equal(gx.numpy(), [2.0, 4.0])
    gx, gy = gradcli.autograd.grad(out, [x, y], retain_graph=True, materialize_grads=True)
    np.testing.assert_array_equal(gy.numpy(), [0.0])
    with pytest.raises(ValueError, match="allow_unused to be True or not passed"):
        gradcli.autograd.grad(out, [x, y], allow_unused=False, materialize_grads=True)


def test_the_class_makes_a_leaf_as_torchs_legacy_constructor_does() -> None:
    # torch.Tensor([1., 2.]): a leaf holding the data; gradcli's are float64
    a = gradcli.Tensor([3.0, 4.0], requires_grad=True)
    b = gradcli.Tensor([5, 6])  # integers become float64
    assert a.is_leaf and a.requires_grad and a.grad is None and a.grad_fn is None
    assert b.dtype == np.float64 and not b.requires_grad
    b.requires_grad_()
    out = (a * b + b).sum()
    out.backward()
    assert out.item() == 50.0
    assert a.grad.tolist() == [5.0, 6.0] and b.grad.tolist() == [4.0, 5.0]
    assert gradcli.Tensor(a).data is a.data  # as np.asarray: the same array
