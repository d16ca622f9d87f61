"""Registering a primitive (docs/engine.md, "Adding a primitive"): rules written as the
saved value they are (``factor="ans"``, ``divisor="x"``, ``"g * y"``) are read by the
first-order walk without a call, and give the same bits as the rule made from the text,
which the other walks call."""

from __future__ import annotations

import numpy as np
import pytest

import gradcli
from gradcli.autograd.node import ANS
from gradcli.autograd.registry import OPS, product_rules, value_rule


def test_text_rules_say_where_backward_finds_the_value() -> None:
    assert OPS["exp"].direct == ANS
    assert OPS["log"].direct == 0
    assert OPS["mul"].direct == (1, 0)
    assert OPS["dot"].direct == (1, 0)
    # a rule written as a function is called
    assert OPS["tanh"].direct is None
    assert OPS["div"].direct is None


def test_rules_made_from_text_compute_what_the_text_says() -> None:
    x, y, g = np.array([2.0, -3.0]), np.array([5.0, 7.0]), np.array([0.5, 4.0])
    factor, where = value_rule("exp", "ans", ("ans",))
    assert where == ANS and factor(np, x, None) is x
    divisor, where = value_rule("log", "x", ("x",))
    assert where == 0 and divisor(np, None, None, y) is y
    rules, direct = product_rules("mul", ("g * y", "g * x"), ("x", "y"), ("x", "y"))
    assert direct == (1, 0)
    np.testing.assert_array_equal(rules[0](np, g, None, None, x, y), [2.5, 28.0])
    np.testing.assert_array_equal(rules[1](np, g, None, None, x, y), [1.0, -12.0])


def test_a_mixture_of_text_and_functions_is_called_rule_by_rule() -> None:
    def dy(xp, g, ans, ctx, x, y):
        return -g

    rules, direct = product_rules("f", ("g * y", dy), ("x", "y"), ("y",))
    assert direct is None and rules[1] is dy


@pytest.mark.parametrize(
    ("given", "saves"),
    [("y", ("x",)), ("x", ("ans",)), ("ans", ("x",)), ("2 * x", ("x",))],
)
def test_a_named_factor_must_be_a_saved_value(given: str, saves: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="saved"):
        value_rule("f", given, saves)


@pytest.mark.parametrize("text", ["g / y", "g * z", "y * g", "g * x"])
def test_a_vjp_as_text_is_g_times_a_saved_input(text: str) -> None:
    with pytest.raises(ValueError, match="g \\* NAME"):
        product_rules("f", (text, None), ("x", "y"), ("y",))


@pytest.mark.parametrize(
    ("xs", "ys"), [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (4,)), ((), ())]
)
def test_mul_backward_reads_the_saved_inputs_as_its_rules_compute(xs, ys) -> None:
    """backward() (the walk that reads the values) and autograd.grad (the walk that calls
    the rules) give the same bits, and the closed form, broadcasting undone."""
    rng = np.random.default_rng(len(xs) * 10 + len(ys))
    x0, y0 = rng.standard_normal(xs), rng.standard_normal(ys)
    x = gradcli.tensor(x0, requires_grad=True)
    y = gradcli.tensor(y0, requires_grad=True)
    out = gradcli.sum(gradcli.exp(x * y) * y)
    gx, gy = gradcli.autograd.grad(out, [x, y], retain_graph=True)
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), gx.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), gy.numpy())
    e = np.exp(x0 * y0)
    want_x = np.broadcast_to(e * y0 * y0, np.broadcast_shapes(xs, ys))
    want_y = np.broadcast_to(e * (1.0 + x0 * y0), np.broadcast_shapes(xs, ys))
    np.testing.assert_allclose(x.grad.numpy(), want_x.sum(axis=_axes(want_x.shape, xs)).reshape(xs))
    np.testing.assert_allclose(y.grad.numpy(), want_y.sum(axis=_axes(want_y.shape, ys)).reshape(ys))


def test_log_and_dot_backward_read_their_saved_values() -> None:
    x0, y0 = np.array([0.5, 2.0, 4.0]), np.array([1.0, -1.0, 3.0])
    x = gradcli.tensor(x0, requires_grad=True)
    y = gradcli.tensor(y0, requires_grad=True)
    gradcli.dot(gradcli.log(x), y).backward()
    np.testing.assert_array_equal(x.grad.numpy(), y0 / x0)
    np.testing.assert_array_equal(y.grad.numpy(), np.log(x0))


def _axes(big: tuple[int, ...], small: tuple[int, ...]) -> tuple[int, ...]:
    """The axes of ``big`` that broadcasting added or stretched from ``small``."""
    lead = len(big) - len(small)
    return tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(small) if n == 1 and big[lead + i] != 1
    )
