"""Tests of the expression language (docs/language.md) through ``gradcli.evaluate`` and the parser.

Exact values and gradients, error kinds, messages and 1-based positions.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest

import gradcli
from gradcli import evaluate
from gradcli.errors import (
    DomainError,
    GradcliError,
    LimitError,
    NamingError,
    ParseError,
    ShapeError,
)
from gradcli.language import compile_program, parse

VEC = {"x": [1.0, 2.0, 3.0]}
MAT = {"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}


def value(expr: str, inputs: dict[str, Any] | None = None, **kw: Any) -> np.ndarray:
    return np.asarray(evaluate(expr, inputs or {}, **kw).value)


def grad(expr: str, inputs: dict[str, Any], name: str = "x", **kw: Any) -> np.ndarray:
    g = evaluate(expr, inputs, **kw).grads[name]
    assert g is not None
    return np.asarray(g)


def error(expr: str, inputs: dict[str, Any] | None = None, **kw: Any) -> GradcliError:
    with pytest.raises(GradcliError) as info:
        evaluate(expr, inputs or {}, **kw)
    return info.value


def assert_equal(actual: Any, expected: Any) -> None:
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (actual, expected)
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------
# Precedence and associativity
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "inputs", "expected"),
    [
        ("-x**2", {"x": 3}, -9.0),  # -(x**2), not (-x)**2
        ("-x^2", {"x": 3}, -9.0),
        ("2**-1", {}, 0.5),
        ("2**3**2", {}, 512.0),  # right-associative: 2**9, not 8**2
        ("2^3^2", {}, 512.0),
        ("2**-1**2", {}, 0.5),  # 2**(-(1**2))
        ("-2**2", {}, -4.0),
        ("a - b - c", {"a": 1, "b": 2, "c": 3}, -4.0),  # (1-2)-3, not 1-(2-3) = 2
        ("a / b / c", {"a": 8, "b": 4, "c": 2}, 1.0),  # (8/4)/2, not 8/(4/2) = 4
        ("1 + 2 * 3", {}, 7.0),
        ("(1 + 2) * 3", {}, 9.0),
        ("2 * 3 + 1", {}, 7.0),
        ("1 + 1 == 2", {}, 1.0),  # comparisons bind loosest
        ("2 == 1 + 1", {}, 1.0),
        ("1 + 1 != 2", {}, 0.0),
        ("3 > 1 + 1", {}, 1.0),
        ("x @ y + 1", {"x": [1, 2], "y": [3, 4]}, 12.0),  # (x@y)+1, not x@(y+1) = 14
        ("2 * x @ y", {"x": [1, 2], "y": [3, 4]}, 22.0),
        ("+x", {"x": 2}, 2.0),
        ("--x", {"x": 2}, 2.0),
        ("-+-x", {"x": 2}, 2.0),
        ("2--3", {}, 5.0),
        ("2 * -3", {}, -6.0),
    ],
)
def test_precedence_and_associativity(expr: str, inputs: dict[str, Any], expected: float) -> None:
    assert_equal(value(expr, inputs), expected)


def test_unary_minus_and_power_gradients() -> None:
    r = evaluate("-x**2", {"x": 3})
    assert_equal(r.grads["x"], -6.0)
    r = evaluate("--x", {"x": 2})
    assert_equal(r.grads["x"], 1.0)
    r = evaluate("+x", {"x": 2})
    assert_equal(r.grads["x"], 1.0)


def test_comparison_passes_no_gradient() -> None:
    r = evaluate("sum(x > 1) + sum(x)", VEC)
    assert_equal(r.value, 2.0 + 6.0)
    assert_equal(r.grads["x"], [1.0, 1.0, 1.0])
    r = evaluate("sum(x >= 2)", VEC)
    assert_equal(r.grads["x"], [0.0, 0.0, 0.0])


# --------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2", 2.0),
        ("2.", 2.0),
        ("2.0", 2.0),
        (".5", 0.5),
        ("1e-3", 0.001),
        ("1E3", 1000.0),
        ("25e-2", 0.25),
        ("1_000", 1000.0),
        ("1_000.5", 1000.5),
        ("2.e3", 2000.0),
    ],
)
def test_number_literals(text: str, expected: float) -> None:
    r = evaluate(text, {})
    assert r.value.shape == ()
    assert r.value.dtype == np.float64
    assert float(r.value) == expected


def test_integer_literals_are_floats() -> None:
    assert_equal(value("1 / 2"), 0.5)
    assert_equal(value("7 / 2 * 2"), 7.0)


@pytest.mark.parametrize("text", ["1__0", "1_", "1e", "0x10"])
def test_malformed_numbers_are_parse_errors(text: str) -> None:
    err = error(text)
    assert isinstance(err, ParseError)
    assert err.kind == "parse"
    assert err.line == 1


# --------------------------------------------------------------------------------------
# Names, bindings, comments, separators
# --------------------------------------------------------------------------------------


def test_unicode_input_names() -> None:
    r = evaluate("ক*খ", {"ক": 2, "খ": 3})
    assert_equal(r.value, 6.0)
    assert_equal(r.grads["ক"], 3.0)
    assert_equal(r.grads["খ"], 2.0)


def test_unicode_binding_name() -> None:
    r = evaluate("ক = [1, 2]; ক*2", {})
    assert_equal(r.value, [2.0, 4.0])
    assert list(r.intermediates) == ["ক"]
    v, g = r.intermediates["ক"]
    assert_equal(v, [1.0, 2.0])
    assert g is None


def test_non_identifier_name_is_a_parse_error() -> None:
    err = error("x² + 1", {"x": 1})
    assert err.kind == "parse"
    assert (err.line, err.column) == (1, 1)


def test_comments_separators_blank_lines_and_brackets() -> None:
    program = (
        "# a comment on its own line\n"
        "\n"
        "h = a*b   # a binding\n"
        ";\n"
        "g = sum([a,\n"
        "         b])   # a newline inside brackets is white space\n"
        "\n"
        "sum(h) + g * (1\n"
        "  + 1);\n"
    )
    r = evaluate(program, {"a": [1, 2], "b": [3, 4]})
    # sum(h) = 3 + 8 = 11; g = 1 + 2 + 3 + 4 = 10; 11 + 2*10
    assert_equal(r.value, 31.0)
    assert_equal(r.grads["a"], [3.0 + 2.0, 4.0 + 2.0])
    assert_equal(r.grads["b"], [1.0 + 2.0, 2.0 + 2.0])
    assert list(r.intermediates) == ["h", "g"]


@pytest.mark.parametrize("program", ["x;", "x;;", ";x", "x\n", "\n\nx\n\n", "x ; ", "x # c"])
def test_separators_around_the_output(program: str) -> None:
    assert_equal(value(program, {"x": 4}), 4.0)


def test_semicolons_and_newlines_are_equivalent() -> None:
    a = evaluate("h = x*2; k = h+1; k*h", {"x": 3})
    b = evaluate("h = x*2\nk = h+1\nk*h", {"x": 3})
    assert_equal(a.value, 42.0)
    assert_equal(b.value, 42.0)
    assert_equal(a.grads["x"], b.grads["x"])
    # d/dx (2x+1)(2x) = 8x + 2
    assert_equal(a.grads["x"], 26.0)


def test_bindings_are_intermediates_with_gradients() -> None:
    r = evaluate("h = a*b; sum(h)", {"a": [1, 2], "b": [3, 4]})
    assert_equal(r.value, 11.0)
    v, g = r.intermediates["h"]
    assert_equal(v, [3.0, 8.0])
    assert_equal(g, [1.0, 1.0])
    assert_equal(r.grads["a"], [3.0, 4.0])
    assert_equal(r.grads["b"], [1.0, 2.0])


def test_intermediate_gradient_through_a_chain() -> None:
    r = evaluate("h = x*2; k = h**2; sum(k)", {"x": [1.0, 3.0]})
    assert_equal(r.intermediates["h"][1], [4.0, 12.0])  # 2h
    assert_equal(r.intermediates["k"][1], [1.0, 1.0])
    assert_equal(r.grads["x"], [8.0, 24.0])


def test_output_may_be_a_binding() -> None:
    r = evaluate("h = x*2; h", VEC)
    assert r.reduction == "sum"
    assert_equal(r.intermediates["h"][1], [1.0, 1.0, 1.0])
    assert_equal(r.grads["x"], [2.0, 2.0, 2.0])


def test_binding_without_wrt_dependency_has_no_gradient() -> None:
    r = evaluate("c = 2*b; sum(a*c)", {"a": [1, 2], "b": [3, 4]}, wrt=["a"])
    assert r.intermediates["c"][1] is None
    assert_equal(r.intermediates["c"][0], [6.0, 8.0])
    assert r.grads["b"] is None
    assert_equal(r.grads["a"], [6.0, 8.0])
    r = evaluate("k = 3; k*a", {"a": 2})
    assert r.intermediates["k"][1] is None
    assert_equal(r.grads["a"], 3.0)


# --------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------


def test_constants() -> None:
    assert_equal(value("pi"), math.pi)
    assert_equal(value("e"), math.e)
    assert float(value("inf")) == math.inf
    assert float(value("-inf")) == -math.inf
    assert math.isnan(float(value("nan")))
    assert_equal(value("[pi, e]"), [math.pi, math.e])


def test_input_shadows_a_constant() -> None:
    r = evaluate("e*1", {"e": 2})
    assert_equal(r.value, 2.0)
    assert_equal(r.grads["e"], 1.0)
    assert_equal(value("pi + 1", {"pi": 3}), 4.0)


def test_binding_shadows_a_constant() -> None:
    r = evaluate("e = 3; e*1", {})
    assert_equal(r.value, 3.0)
    assert "e" in r.intermediates
    assert_equal(value("pi = x*2; pi + 1", {"x": 1}), 3.0)


# --------------------------------------------------------------------------------------
# Array literals
# --------------------------------------------------------------------------------------


def test_array_literal_of_expressions_is_differentiable() -> None:
    r = evaluate("sum([x, 2*x])", {"x": [1.0, 2.0]})
    assert_equal(r.value, 9.0)
    assert_equal(r.grads["x"], [3.0, 3.0])
    r = evaluate("[x, 2*x]", {"x": [1.0, 2.0]})
    assert_equal(r.value, [[1.0, 2.0], [2.0, 4.0]])


def test_array_literal_of_scalars_is_differentiable() -> None:
    r = evaluate("[a, b, a*b] @ [1, 10, 100]", {"a": 2, "b": 3})
    assert_equal(r.value, 2 + 30 + 600)
    assert_equal(r.grads["a"], 1 + 100 * 3)
    assert_equal(r.grads["b"], 10 + 100 * 2)


def test_nested_literals_make_matrices() -> None:
    v = value("[[1, 2], [3, 4]]")
    assert_equal(v, [[1.0, 2.0], [3.0, 4.0]])
    v = value("[[[1], [2]], [[3], [4]]]")
    assert v.shape == (2, 2, 1)


@pytest.mark.parametrize(
    ("expr", "inputs"),
    [("[[1, 2], [3]]", {}), ("[x, 1]", {"x": [1, 2]}), ("[[1, 2], 3]", {})],
)
def test_ragged_literal_is_a_shape_error(expr: str, inputs: dict[str, Any]) -> None:
    err = error(expr, inputs)
    assert isinstance(err, ShapeError)
    assert err.kind == "shape"
    assert err.exit_code == 1


# --------------------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected", "gradient"),
    [
        ("x[0]", 1.0, [1, 0, 0]),
        ("x[-1]", 3.0, [0, 0, 1]),
        ("x[1:3]", [2.0, 3.0], [0, 1, 1]),
        ("x[::2]", [1.0, 3.0], [1, 0, 1]),
        ("x[::-1]", [3.0, 2.0, 1.0], [1, 1, 1]),
        ("x[-1:]", [3.0], [0, 0, 1]),
        ("x[:-1]", [1.0, 2.0], [1, 1, 0]),
        ("x[[0, 2, 2]]", [1.0, 3.0, 3.0], [1, 0, 2]),
        ("x[..., None]", [[1.0], [2.0], [3.0]], [1, 1, 1]),
        ("x[None]", [[1.0, 2.0, 3.0]], [1, 1, 1]),
        ("x[...]", [1.0, 2.0, 3.0], [1, 1, 1]),
        ("x[1 + 0]", 2.0, [0, 1, 0]),
        ("x[[0, 2, 2]] * [1, 10, 100]", [1.0, 30.0, 300.0], [1, 0, 110]),
    ],
)
def test_vector_indexing(expr: str, expected: Any, gradient: Any) -> None:
    r = evaluate(expr, VEC)
    assert_equal(r.value, expected)
    assert_equal(r.grads["x"], gradient)


@pytest.mark.parametrize(
    ("expr", "expected", "gradient"),
    [
        ("x[:, 0]", [1.0, 4.0], [[1, 0, 0], [1, 0, 0]]),
        ("x[0, 1:]", [2.0, 3.0], [[0, 1, 1], [0, 0, 0]]),
        ("x[1]", [4.0, 5.0, 6.0], [[0, 0, 0], [1, 1, 1]]),
        ("x[-1, -1]", 6.0, [[0, 0, 0], [0, 0, 1]]),
        ("x[..., 1]", [2.0, 5.0], [[0, 1, 0], [0, 1, 0]]),
        ("x.T", [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], [[1, 1, 1], [1, 1, 1]]),
        ("x.T[0]", [1.0, 4.0], [[1, 0, 0], [1, 0, 0]]),
        ("x[::-1, ::2]", [[4.0, 6.0], [1.0, 3.0]], [[1, 0, 1], [1, 0, 1]]),
    ],
)
def test_matrix_indexing(expr: str, expected: Any, gradient: Any) -> None:
    r = evaluate(expr, MAT)
    assert_equal(r.value, expected)
    assert_equal(r.grads["x"], gradient)


def test_transpose_attribute_gradient_is_transposed() -> None:
    r = evaluate("sum(x.T * [[1, 2], [3, 4], [5, 6]])", MAT)
    assert_equal(r.grads["x"], [[1, 3, 5], [2, 4, 6]])


def test_empty_integer_list_index_follows_numpy() -> None:
    # NumPy: np.ones((2, 3))[[]] has shape (0, 3)
    r = evaluate("x[[]]", MAT)
    assert r.value.shape == (0, 3)
    assert_equal(r.grads["x"], [[0, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("expr", ["x[3]", "x[-4]", "x[[0, 5]]"])
def test_index_out_of_range_is_a_shape_error(expr: str) -> None:
    err = error(expr, VEC)
    assert err.kind == "shape"
    assert err.exit_code == 1


# --------------------------------------------------------------------------------------
# Calls: positional and keyword forms, aliases
# --------------------------------------------------------------------------------------

ONES23 = [[1, 1, 1], [1, 1, 1]]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("sum(x, 0)", [5.0, 7.0, 9.0]),
        ("sum(x, axis=0)", [5.0, 7.0, 9.0]),
        ("sum(x, 1)", [6.0, 15.0]),
        ("sum(x, axis=-1)", [6.0, 15.0]),
        ("sum(x, axis=(0, 1), keepdims=true)", [[21.0]]),
        ("sum(x, axis=[0,1])", 21.0),
        ("sum(x, axis=1, keepdims=True)", [[6.0], [15.0]]),
        ("sum(x, axis=0, keepdims=False)", [5.0, 7.0, 9.0]),
        ("sum(x, axis=none)", 21.0),
        ("sum(x, axis=None, keepdims=false)", 21.0),
        ("sum(x,)", 21.0),
        ("mean(x, 0)", [2.5, 3.5, 4.5]),
        ("var(x, axis=0, ddof=1)", [4.5, 4.5, 4.5]),
        ("var(x, axis=0)", [2.25, 2.25, 2.25]),
        ("squeeze(x[None], axis=0)", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        ("flip(x, axis=(0, 1))", [[6.0, 5.0, 4.0], [3.0, 2.0, 1.0]]),
        ("flip(x, axis=1)", [[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]]),
        ("transpose(x, (1, 0))", [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
        ("transpose(x)", [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
        ("reshape(x, 3, 2)", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        ("reshape(x, (3, -1))", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        ("reshape(x, [6])", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ("reshape(x, -1)", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ("concatenate(x)", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ("concatenate(x, axis=0)", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ("stack([x[0], x[1]], axis=1)", [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
        ("stack(x)", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        ("amax(x)", 6.0),
        ("amin(x, axis=1)", [1.0, 4.0]),
        ("max(x, 0)", [4.0, 5.0, 6.0]),
    ],
)
def test_call_forms_on_a_matrix(expr: str, expected: Any) -> None:
    r = evaluate(expr, MAT)
    assert_equal(r.value, expected)
    g = r.grads["x"]
    assert g is not None and g.shape == (2, 3)


def test_call_form_gradients() -> None:
    assert_equal(grad("sum(x, axis=0)", MAT), ONES23)
    assert_equal(grad("flip(x, axis=(0, 1)) * [[1, 2, 3], [4, 5, 6]]", MAT), [[6, 5, 4], [3, 2, 1]])
    assert_equal(
        grad("reshape(x, (3, -1)) * [[1, 2], [3, 4], [5, 6]]", MAT), [[1, 2, 3], [4, 5, 6]]
    )
    assert_equal(
        grad("transpose(x, (1, 0)) * [[1, 2], [3, 4], [5, 6]]", MAT), [[1, 3, 5], [2, 4, 6]]
    )
    # var with ddof=1 along axis 0: d/dx = 2 (x - mean) / (n - 1)
    assert_equal(grad("var(x, axis=0, ddof=1)", MAT), [[-3, -3, -3], [3, 3, 3]])
    assert_equal(grad("amax(x)", MAT), [[0, 0, 0], [0, 0, 1]])


def test_concatenate_pieces_of_different_lengths() -> None:
    inputs = {"a": [1.0, 2.0], "b": [3.0, 4.0, 5.0]}
    for fn in ("concatenate", "concat"):
        r = evaluate(f"{fn}([a, b]) * [1, 2, 3, 4, 5]", inputs)
        assert_equal(r.value, [1.0, 4.0, 9.0, 16.0, 25.0])
        assert_equal(r.grads["a"], [1.0, 2.0])
        assert_equal(r.grads["b"], [3.0, 4.0, 5.0])


def test_stack_along_axis_one() -> None:
    r = evaluate("stack([a, b], axis=1) * [[1, 2], [3, 4]]", {"a": [1, 2], "b": [3, 4]})
    assert_equal(r.value, [[1.0, 6.0], [6.0, 16.0]])
    assert_equal(r.grads["a"], [1.0, 3.0])
    assert_equal(r.grads["b"], [2.0, 4.0])


@pytest.mark.parametrize(
    ("alias", "name", "inputs"),
    [
        ("asin(x)", "arcsin(x)", {"x": 0.5}),
        ("acos(x)", "arccos(x)", {"x": 0.5}),
        ("atan(x)", "arctan(x)", {"x": 0.5}),
        ("asinh(x)", "arcsinh(x)", {"x": 0.5}),
        ("acosh(x)", "arccosh(x)", {"x": 1.5}),
        ("atanh(x)", "arctanh(x)", {"x": 0.5}),
        ("atan2(x, y)", "arctan2(x, y)", {"x": 1.0, "y": 2.0}),
        ("amax(x)", "max(x)", {"x": [1.0, 3.0, 2.0]}),
        ("amin(x)", "min(x)", {"x": [1.0, 3.0, 2.0]}),
        ("concat([x, x])", "concatenate([x, x])", {"x": [1.0, 3.0, 2.0]}),
    ],
)
def test_aliases(alias: str, name: str, inputs: dict[str, Any]) -> None:
    a = evaluate(alias, inputs)
    b = evaluate(name, inputs)
    assert_equal(a.value, b.value)
    for k in inputs:
        assert_equal(a.grads[k], b.grads[k])


def test_alias_values() -> None:
    r = evaluate("asin(x)", {"x": 0.5})
    assert_equal(r.value, math.asin(0.5))
    assert_equal(r.grads["x"], 1 / math.sqrt(1 - 0.25))
    r = evaluate("atan2(y, x)", {"y": 1.0, "x": 1.0})
    assert_equal(r.value, math.pi / 4)
    assert_equal(r.grads["y"], 0.5)
    assert_equal(r.grads["x"], -0.5)


# --------------------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("zeros(2, 3)", np.zeros((2, 3))),
        ("zeros((2, 3))", np.zeros((2, 3))),
        ("ones(3)", np.ones(3)),
        ("ones((2,))", np.ones(2)),
        ("full((2,2), 7)", np.full((2, 2), 7.0)),
        ("eye(3)", np.eye(3)),
        ("arange(5)", np.arange(5.0)),
        ("arange(1, 2, 0.25)", [1.0, 1.25, 1.5, 1.75]),
        ("linspace(0, pi, 5)", np.linspace(0, math.pi, 5)),
        ("linspace(0, 1, 3)", [0.0, 0.5, 1.0]),
    ],
)
def test_constructors(expr: str, expected: Any) -> None:
    r = evaluate(expr, {})
    assert r.value.dtype == np.float64
    assert_equal(r.value, expected)


def test_constructors_are_constants() -> None:
    r = evaluate("sum(zeros(3) + x * ones(3))", {"x": 2.0})
    assert_equal(r.value, 6.0)
    assert_equal(r.grads["x"], 3.0)


def test_randn_is_reproducible_with_the_seed() -> None:
    expected0 = np.random.default_rng(0).standard_normal((3, 4))
    r0 = evaluate("randn(3, 4)", {}, seed=0)
    np.testing.assert_array_equal(r0.value, expected0)
    np.testing.assert_array_equal(evaluate("randn(3, 4)", {}).value, expected0)  # default 0
    np.testing.assert_array_equal(evaluate("randn((3, 4))", {}).value, expected0)
    r1 = evaluate("randn(3, 4)", {}, seed=1)
    np.testing.assert_array_equal(r1.value, np.random.default_rng(1).standard_normal((3, 4)))
    assert not np.array_equal(r0.value, r1.value)


def test_rand_is_reproducible_with_the_seed() -> None:
    r = evaluate("rand(5)", {}, seed=7)
    np.testing.assert_array_equal(r.value, np.random.default_rng(7).random(5))


def test_one_generator_per_program_in_evaluation_order() -> None:
    rng = np.random.default_rng(0)
    first, second = rng.standard_normal(2), rng.standard_normal(2)
    r = evaluate("[randn(2), randn(2)]", {})
    np.testing.assert_array_equal(r.value, [first, second])
    assert not np.array_equal(r.value[0], r.value[1])
    r = evaluate("a = randn(2); b = randn(2); a - b", {})
    np.testing.assert_array_equal(r.intermediates["a"][0], first)
    np.testing.assert_array_equal(r.intermediates["b"][0], second)
    # and each program starts afresh
    np.testing.assert_array_equal(evaluate("randn(2)", {}).value, first)


# --------------------------------------------------------------------------------------
# dtype
# --------------------------------------------------------------------------------------


def test_float32() -> None:
    inputs = {"x": [0.5, 1.5, -2.0], "W": [[1.0, 2.0, 3.0], [0.1, 0.2, 0.3]]}
    expr = "h = tanh(W @ x); sum(h**2) + sum(sin(x) * x)"
    r32 = evaluate(expr, inputs, dtype="float32")
    r64 = evaluate(expr, inputs)
    assert r32.value.dtype == np.float32
    assert r64.value.dtype == np.float64
    for name in inputs:
        g32, g64 = r32.grads[name], r64.grads[name]
        assert g32 is not None and g64 is not None
        assert g32.dtype == np.float32
        np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=1e-6)
    assert r32.intermediates["h"][0].dtype == np.float32
    np.testing.assert_allclose(r32.value, r64.value, rtol=1e-6)


def test_float32_constructors_and_literals() -> None:
    for expr in ("zeros(2)", "randn(2)", "linspace(0, 1, 3)", "[1, 2]", "pi", "eye(2)"):
        assert evaluate(expr, {}, dtype="float32").value.dtype == np.float32, expr


# --------------------------------------------------------------------------------------
# The Python API's types (docs/api.md, "Result": value and grads are numpy.ndarray)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", ["x", "x + x", "x * 2", "-x", "sum(x)", "x @ x"])
def test_result_value_and_grads_are_ndarrays(expr: str) -> None:
    inputs = {"x": [1.0, 2.0]} if "@" in expr or "sum" in expr else {"x": 2.0}
    r = evaluate(expr, inputs)
    assert isinstance(r.value, np.ndarray), type(r.value)
    assert isinstance(r.grads["x"], np.ndarray), type(r.grads["x"])


def test_intermediate_values_and_grads_are_ndarrays() -> None:
    r = evaluate("h = x + x; h * 3", {"x": 2.0})
    v, g = r.intermediates["h"]
    assert isinstance(v, np.ndarray), type(v)
    assert isinstance(g, np.ndarray), type(g)
    assert_equal(g, 3.0)


# --------------------------------------------------------------------------------------
# Errors: kinds, messages and positions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "line", "column"),
    [
        ("a +", 1, 4),
        ("(1", 1, 3),
        ("2x", 1, 2),
        ("1 $ 2", 1, 3),
        ("1)", 1, 2),
        ("a + b)", 1, 6),
        ("[1, 2", 1, 6),
        ("x +\t$", 1, 5),
        ("a = 1\nb = 2 +\nc", 2, 8),
        ("a = 1\n  b = (a\n", 2, 9),
    ],
)
def test_parse_error_positions(expr: str, line: int, column: int) -> None:
    err = error(expr, {"a": 1, "b": 2, "x": 1})
    assert isinstance(err, ParseError)
    assert err.kind == "parse"
    assert err.exit_code == 2
    assert (err.line, err.column) == (line, column), err.message


def test_parse_error_messages() -> None:
    assert "operator is missing" in error("2x", {"x": 1}).message
    assert "'$'" in error("1 $ 2").message
    ctx = error("1 +* 2").context
    assert ctx is not None
    src, caret = ctx.splitlines()
    assert src.strip() == "1 +* 2"
    assert caret.index("^") == src.index("*")


@pytest.mark.parametrize(
    ("program", "line", "shown"),
    [
        ("x\x0c;\ny ?", 2, "y ?"),  # a form feed does not start a line
        ("x\r+\n1 +", 1, "x +"),  # nor does a lone carriage return
        ("(1,\r\n 2 $", 2, " 2 $"),  # CRLF: the \r is not shown
        ("a\u2028b $", 1, "a b $"),  # a line separator shows as a space
    ],
)
def test_the_caret_line_is_the_line_of_the_position(program: str, line: int, shown: str) -> None:
    err = error(program, {"x": 1, "y": 1, "a": 1, "b": 1})
    assert err.line == line and err.context is not None
    src, caret = err.context.splitlines()
    assert src == "  " + shown
    assert len(caret) == err.column + 2  # "  " + the column, then the caret


@pytest.mark.parametrize("program", ["", "   ", "# only a comment", "\n\n# c\n;\n"])
def test_empty_program_is_a_parse_error(program: str) -> None:
    err = error(program)
    assert isinstance(err, ParseError)
    assert (err.line, err.column) == (1, 1)
    assert "empty" in err.message


def test_parse_raises_parse_error_directly() -> None:
    with pytest.raises(ParseError):
        parse("a +")
    with pytest.raises(ParseError):
        compile_program("(1")
    assert compile_program("h = x; h*2").binding_names == ["h"]


def test_program_ending_with_binding_or_two_bare_expressions() -> None:
    err = error("h = 1")
    assert err.kind == "parse"
    err = error("1\n2")
    assert err.kind == "parse"
    assert err.line == 1


def test_nul_character_is_a_parse_error() -> None:
    err = error("x\x00 + 1", {"x": 1})
    assert err.kind == "parse"
    assert (err.line, err.column) == (1, 2)


def test_unknown_name_suggests_the_nearest() -> None:
    err = error("xx * 2", {"x": 1})
    assert isinstance(err, NamingError)
    assert err.kind == "name"
    assert err.exit_code == 2
    assert "`xx`" in err.message
    assert "did you mean `x`" in err.message
    assert (err.line, err.column) == (1, 1)


def test_unknown_name_position_on_a_later_line() -> None:
    err = error("h = x\nsum(h + yy)", {"x": 1})
    assert err.kind == "name"
    assert "yy" in err.message
    assert (err.line, err.column) == (2, 9)
    err = error("ক + yy", {"ক": 1})
    assert (err.line, err.column) == (1, 5)


def test_unknown_function_suggests_the_nearest() -> None:
    err = error("sinn(x)", {"x": 1})
    assert err.kind == "name"
    assert "sinn" in err.message
    assert "did you mean" in err.message and "`sin`" in err.message
    assert (err.line, err.column) == (1, 1)
    err = error("a = 1\n\n  b = tanhh(a)\nb")
    assert "`tanh`" in err.message
    assert (err.line, err.column) == (3, 7)


def test_bad_keyword_suggests_the_nearest() -> None:
    err = error("sum(x, axs=0)", {"x": [1, 2]})
    assert err.kind == "name"
    assert "axs" in err.message
    assert "did you mean `axis`" in err.message
    assert (err.line, err.column) == (1, 8)


@pytest.mark.parametrize(
    "expr", ["sin(x, x)", "sum(x, 0, false, 1)", "tanh()", "sum(x, axis=0, axis=1)", "zeros()"]
)
def test_wrong_arity_is_a_name_error(expr: str) -> None:
    err = error(expr, {"x": [1.0, 2.0]})
    assert err.kind == "name"
    assert err.exit_code == 2
    assert err.line == 1


def test_too_many_arguments_message() -> None:
    err = error("sin(x, x)", {"x": 1})
    assert "at most 1" in err.message
    assert "got 2" in err.message


def test_binding_twice() -> None:
    err = error("h = 1; h = 2; h")
    assert err.kind == "name"
    assert "h" in err.message
    assert (err.line, err.column) == (1, 8)


def test_binding_an_input_name() -> None:
    err = error("x = 1; x", {"x": 2})
    assert err.kind == "name"
    assert "x" in err.message
    assert (err.line, err.column) == (1, 1)


@pytest.mark.parametrize("program", ["sum = 1; 2", "tanh = x; tanh", "asin = 1; 2"])
def test_binding_a_function_name(program: str) -> None:
    err = error(program, {"x": 1})
    assert err.kind == "name"
    assert "function" in err.message


def test_a_function_name_used_as_a_value() -> None:
    err = error("sin + 1")
    assert err.kind == "name"
    assert "sin" in err.message


def test_attribute_other_than_T_is_refused() -> None:
    err = error("x.__class__", {"x": 1})
    assert err.kind == "name"
    assert "__class__" in err.message
    assert (err.line, err.column) == (1, 3)
    err = error("x.shape", {"x": [1, 2]})
    assert err.kind == "name"


def test_dunder_import_is_never_executed() -> None:
    # 'os' is a string literal now, but only the function table is ever called
    err = error("__import__('os')")
    assert err.kind == "name"
    assert "unknown function `__import__`" in err.message
    assert (err.line, err.column) == (1, 1)
    err = error("exec('import os')")
    assert err.kind == "name" and "unknown function `exec`" in err.message
    err = error("__import__(x)", {"x": 1})
    assert err.kind == "name"
    assert "__import__" in err.message


def test_shape_mismatch_names_both_shapes() -> None:
    err = error("[1,2] + [1,2,3]")
    assert isinstance(err, ShapeError)
    assert err.exit_code == 1
    assert "(2,)" in err.message and "(3,)" in err.message
    err = error("h = a * b; h", {"a": [[1, 2], [3, 4]], "b": [1, 2, 3]})
    assert "(2, 2)" in err.message and "(3,)" in err.message
    assert (err.line, err.column) == (1, 5)


def test_matmul_mismatch_names_both_shapes() -> None:
    err = error("A @ v", {"A": [[1, 2], [3, 4]], "v": [1, 2, 3]})
    assert err.kind == "shape"
    assert "(2, 2)" in err.message and "(3,)" in err.message
    assert "matmul" in err.message or "@" in err.message


def test_inverse_of_a_singular_matrix_is_a_domain_error() -> None:
    err = error("inv(A)", {"A": [[1, 2], [2, 4]]})
    assert isinstance(err, DomainError)
    assert err.kind == "domain"
    assert err.exit_code == 1
    assert "singular" in err.message


def test_huge_constructor_is_refused_before_allocating() -> None:
    start = time.perf_counter()
    err = error("zeros(10**12)")
    assert time.perf_counter() - start < 1.0
    assert isinstance(err, LimitError)
    assert err.kind == "limit"
    assert err.exit_code == 1
    for expr in ("ones(10**6, 10**6)", "randn(10**6, 10**6)", "eye(10**6)", "arange(1e12)"):
        assert error(expr).kind == "limit", expr


def test_max_elements_is_honoured() -> None:
    assert error("zeros(11)", max_elements=10).kind == "limit"
    assert_equal(value("sum(zeros(10))", max_elements=10), 0.0)


# --------------------------------------------------------------------------------------
# Deep and long programs
# --------------------------------------------------------------------------------------


def test_ten_thousand_nested_parentheses() -> None:
    n = 10_000
    r = evaluate("(" * n + "x" + ")" * n + " * 2", {"x": 3.0})
    assert_equal(r.value, 6.0)
    assert_equal(r.grads["x"], 2.0)


def test_nested_brackets_and_calls() -> None:
    n = 2_000
    r = evaluate("sum(" * n + "x" + ")" * n, {"x": [1.0, 2.0]})
    assert_equal(r.value, 3.0)
    assert_equal(r.grads["x"], [1.0, 1.0])


def test_sum_of_one_hundred_thousand_terms() -> None:
    n = 100_000
    r = evaluate(" + ".join(["x"] * n), {"x": 2.0})
    assert_equal(r.value, 2.0 * n)
    assert_equal(r.grads["x"], float(n))


def test_one_hundred_thousand_nested_unary_minus() -> None:
    n = 100_000  # even: the value is x
    try:
        r = evaluate("-" * n + "x", {"x": 2.0})
    except GradcliError as err:  # a clean refusal is allowed; RecursionError is not
        assert err.kind in ("limit", "parse", "value")
    else:
        assert_equal(r.value, 2.0)
        assert_equal(r.grads["x"], 1.0)


def test_huge_power_is_inf_with_a_warning() -> None:
    start = time.perf_counter()
    r = evaluate("9**9**9", {})
    assert time.perf_counter() - start < 2.0
    assert float(r.value) == math.inf
    assert r.warnings
    r = evaluate("1e400", {})
    assert float(r.value) == math.inf
    assert r.warnings


def test_package_exports() -> None:
    assert gradcli.evaluate is evaluate
    assert issubclass(gradcli.ParseError, gradcli.GradcliError)


def test_a_tuple_subscript_is_the_index_tuple_as_in_numpy() -> None:
    x = [[1.0, 2.0], [3.0, 4.0]]
    assert gradcli.evaluate("x[(0, 1)]", {"x": x}).value.tolist() == 2.0
    assert gradcli.evaluate("x[()]", {"x": x}).value.tolist() == x
    assert gradcli.evaluate("x[[0, 1]]", {"x": x}).value.tolist() == x  # a list stays a list


@pytest.mark.parametrize("terms", [32, 33, 1000])
def test_a_long_sum_is_one_node_with_the_chains_value(terms: int) -> None:
    # More than 32 terms of + and - are one n-input add (E.add_n), added left to right:
    # the value is the binary chain's to the last bit, the gradients are the chain's.
    from gradcli import analysis

    rng = np.random.default_rng(terms)
    values = {f"v{i}": float(rng.standard_normal() * 10.0 ** rng.integers(-8, 8)) for i in range(7)}
    picks = [f"v{i % 7}" for i in range(terms)]
    signs = ["+" if i % 4 else "-" for i in range(1, terms)]
    expr = picks[0] + "".join(f" {op} {name}" for op, name in zip(signs, picks[1:], strict=True))
    expected = values[picks[0]]
    grads = dict.fromkeys(values, 0.0)
    grads[picks[0]] = 1.0
    for op, name in zip(signs, picks[1:], strict=True):
        expected = expected + values[name] if op == "+" else expected - values[name]
        grads[name] += 1.0 if op == "+" else -1.0
    r = evaluate(expr, values)
    assert float(r.value) == expected  # exactly
    assert {k: float(g) for k, g in r.grads.items()} == grads
    g = analysis.graph(expr, values)
    adds = [n for n in g.nodes if n.op == "add"]
    if terms <= 32:
        assert len(adds) == len([s for s in signs if s == "+"])  # a chain of binary nodes
    else:
        assert len(adds) == 1 and len(adds[0].inputs) == terms


def test_a_long_sum_with_a_shape_error_points_at_the_sum() -> None:
    expr = " + ".join(["x"] * 40) + " - y"
    err = error(expr, {"x": [1, 2], "y": [1, 2, 3]})
    assert isinstance(err, ShapeError)
    assert "sub: shapes (2,) and (3,)" in err.message
    assert (err.line, err.column) == (1, 1)


def test_only_short_programs_are_kept_after_parsing() -> None:
    from gradcli.language import CACHED_PROGRAM_CHARS

    short, long = "x + 1", "x+" * (CACHED_PROGRAM_CHARS // 2) + "1"
    assert compile_program(short) is compile_program(short)
    assert compile_program(long) is not compile_program(long)  # parsed each time


def test_a_clip_bound_beyond_every_float_is_an_input_error() -> None:
    err = error("x", {"x": 1}, clip_value=10**400)
    assert err.kind == "input" and "finite" in err.message and len(err.message) < 120


@pytest.mark.parametrize(
    ("expr", "name"),
    [("a + b", "add"), ("a - b", "sub"), ("a * b", "mul"), ("a / b", "div"), ("a ** b", "pow"),
     ("maximum(a, b)", "maximum"), ("arctan2(a, b)", "arctan2")],
)  # fmt: skip
def test_a_broadcast_error_names_the_operation(expr, name):
    with pytest.raises(ShapeError) as err:
        evaluate(expr, {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0]})
    assert err.value.message.startswith(f"{name}: shapes (3,) and (2,) cannot be broadcast")


def test_tensor_has_no_where_method_with_other_meaning_than_torchs():
    # torch's x.where(cond, y) takes x as the values; gradcli.where(cond, a, b) is NumPy's
    assert not hasattr(gradcli.tensor([1.0]), "where")


# --- string literals (docs/language.md, "Strings") ---------------------------------------


@pytest.mark.parametrize("text", ['"ij,j->i"', "'ij,j->i'", '""', "'a \"b\"'"])
def test_a_string_literal_is_a_leaf_of_the_tree(text: str) -> None:
    tree = parse(text)
    assert tree.children[0].data == "string"
    assert str(tree.children[0].children[0]) == text


@pytest.mark.parametrize(
    "expr,where",
    [('"ab"', "the output"), ('"ab" + x', "+"), ('sum("ab")', "sum: argument `x`"),
     ('sum(x, axis="0")', "sum: argument `axis`"), ('x["0"]', "index"),
     ('["a", 1]', "array literal"), ('reshape(x, "2")', "reshape")],
)  # fmt: skip
def test_a_string_is_never_a_value(expr: str, where: str) -> None:
    err = error(expr, {"x": [1.0, 2.0]})
    assert err.kind == "value"
    assert where in err.message
    assert "is not a tensor; a string is only the argument of a function" in err.message


@pytest.mark.parametrize(
    "expr,line,column",
    [('x + "ab', 1, 5), ("x = 1\ny + 'a\nb'", 2, 5), ('"', 1, 1)],
)
def test_a_string_not_closed_on_its_line_is_a_parse_error_at_its_quote(
    expr: str, line: int, column: int
) -> None:
    err = error(expr)
    assert isinstance(err, ParseError)
    assert "is not closed" in err.message
    assert (err.line, err.column) == (line, column)


def test_a_string_beside_a_value_is_a_missing_operator() -> None:
    err = error('x "a"', {"x": 1})
    assert isinstance(err, ParseError)
    assert "an operator is missing" in err.message
    assert (err.line, err.column) == (1, 3)
