"""Tests of gradcli.present: the result table, errors and warnings as rich renders them."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from gradcli.api import Result
from gradcli.errors import ParseError, ShapeError
from gradcli.layout import _narrowest, format_array
from gradcli.present import (
    make_console,
    print_error,
    print_result,
    print_warnings,
    result_table,
)


def _console(width: int = 100) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None)


def render(result: Result, width: int = 100, **kwargs: object) -> str:
    console = _console(width)
    print_result(result, console, **kwargs)  # type: ignore[arg-type]
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def words(out: str) -> str:
    """The output with every run of whitespace made one space (captions wrap to the table)."""
    return " ".join(out.split())


def row(out: str, name: str) -> str:
    """The first table line whose first cell is exactly ``name``."""
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)]
        if len(cells) > 2 and cells[1] == name:
            return line
    raise AssertionError(f"no row {name!r} in\n{out}")


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", line)][1:-1]


def a(*values: float) -> np.ndarray:
    return np.array(values, dtype=float)


def tutorial(**kwargs: object) -> Result:
    defaults: dict[str, object] = {
        "expr": "a*b+b",
        "value": a(20, 30),
        "inputs": {"a": a(3, 4), "b": a(5, 6)},
        "grads": {"a": a(5, 6), "b": a(4, 5)},
        "reduction": "sum",
    }
    defaults.update(kwargs)
    return Result(**defaults)  # type: ignore[arg-type]


# --- format_array -------------------------------------------------------------------------


def test_format_array_like_numpy() -> None:
    assert format_array(a(20, 30)) == "[20. 30.]"
    assert format_array(a(3.14159265, 1)) == "[3.1416 1.    ]"
    assert format_array(a(3.14159265), precision=2) == "[3.14]"
    assert format_array(np.array([[1.0, 2.0], [3.0, 4.0]])) == "[[1. 2.]\n [3. 4.]]"


def test_format_array_scalars_and_none() -> None:
    assert format_array(np.array(20.0)) == "20.0"
    assert format_array(np.array(-3.0)) == "-3.0"
    assert format_array(np.array(0.5)) == "0.5"
    assert format_array(np.array(1e20)) == "1.0e+20"
    assert format_array(np.array(123456.789)) == "123456.789"
    assert format_array(None) == "—"


def test_format_array_nonfinite() -> None:
    assert format_array(a(np.nan, np.inf, -np.inf)) == "[ nan  inf -inf]"
    assert format_array(np.array(np.nan)) == "nan"


def test_format_array_summary_and_full() -> None:
    x = np.arange(1000.0, 3000.0)
    short = format_array(x)
    assert "..." in short
    assert "1000." in short and "2999." in short and "1500." not in short
    long = format_array(x, full=True)
    assert "..." not in long
    assert set(re.findall(r"\d+(?=\.)", long)) == {str(n) for n in range(1000, 3000)}


def test_format_array_linewidth_wraps_between_elements() -> None:
    text = format_array(a(123456.789, 234567.891), linewidth=1)
    assert text.splitlines() == ["[123456.789", " 234567.891]"]


@pytest.mark.parametrize(
    "array",
    [
        a(-1, 0.25),
        a(123456.789, 234567.891),
        a(1e-5, 1, -np.inf),
        np.array([[0.5, -100.0], [np.nan, 0.1234]]),
        np.arange(2000.0).reshape(20, 100) - 1000,
        np.array([True, True]),
        np.array([3, -12, 7]),
        np.full((2, 3, 4), 1.5, dtype=np.float32),
    ],
)
def test_narrowest_matches_numpy_one_element_a_line(array: np.ndarray) -> None:
    narrow = max(len(line) for line in format_array(array, linewidth=1).splitlines())
    for linewidth in (40, 1000):
        assert narrow <= _narrowest(array, format_array(array, linewidth=linewidth)) <= narrow + 2


# --- the table ----------------------------------------------------------------------------


def test_tutorial_table() -> None:
    out = render(tutorial())
    assert "a*b+b" in out.splitlines()[0]
    assert cells(row(out, "name")) == ["name", "shape", "value", "gradient"]
    assert cells(row(out, "a")) == ["a", "(2,)", "[3. 4.]", "[5. 6.]"]
    assert cells(row(out, "b")) == ["b", "(2,)", "[5. 6.]", "[4. 5.]"]
    assert cells(row(out, "output"))[:3] == ["output", "(2,)", "[20. 30.]"]
    caption = "output reduced with sum() before backward, as z.sum().backward()"
    assert caption in words(out)
    # the 2-norm of [5, 6, 4, 5]
    assert f"total gradient norm {np.sqrt(25 + 36 + 16 + 25):.6g}" in words(out)
    assert "clip" not in out
    # rows in order: inputs, then the output, each group in its own section
    lines = out.splitlines()
    ia, ib, io_ = (lines.index(row(out, n)) for n in ("a", "b", "output"))
    assert ia < ib < io_
    assert any(set(lines[i]) & set("├┼┤") for i in range(ib + 1, io_))


def test_result_table_is_a_table() -> None:
    table = result_table(tutorial())
    assert [c.header for c in table.columns] == ["name", "shape", "value", "gradient"]
    assert table.row_count == 3


def test_constant_input_has_no_gradient() -> None:
    out = render(tutorial(grads={"a": a(5, 6), "b": None}))
    assert cells(row(out, "a"))[3] == "[5. 6.]"
    assert cells(row(out, "b"))[3] == "— (constant)"


def test_no_input_requires_grad() -> None:
    out = render(tutorial(grads={"a": None, "b": None}))
    assert "no input requires grad" in words(out)
    assert "total gradient norm" not in out


def test_intermediates_between_inputs_and_output() -> None:
    result = Result(
        expr="h = tanh(W @ x)\nc = 2 * k\nsum(h ** 2) + c",
        value=np.array(1.25),
        inputs={"W": np.eye(2), "x": a(0.5, -1), "k": np.array(3.0)},
        grads={"W": np.zeros((2, 2)), "x": a(1, 2), "k": None},
        intermediates={"h": (a(0.25, -0.5), a(0.5, -1)), "c": (np.array(6.0), None)},
    )
    out = render(result)
    lines = out.splitlines()
    assert cells(row(out, "h")) == ["h", "(2,)", "[ 0.25 -0.5 ]", "[ 0.5 -1. ]"]
    assert cells(row(out, "c")) == ["c", "()", "6.0", "—"]
    assert cells(row(out, "W"))[:2] == ["W", "(2, 2)"]
    assert cells(row(out, "k"))[3] == "— (constant)"
    order = [lines.index(row(out, n)) for n in ("W", "x", "k", "h", "c", "output")]
    assert order == sorted(order)
    # a scalar output: bare number, no reduction stated
    assert cells(row(out, "output"))[:3] == ["output", "()", "1.25"]
    assert "reduced" not in out
    # three sections: two separators between the header rule and the bottom
    separators = [line for line in lines if line.startswith("├")]
    assert len(separators) == 2


def test_clip_norm_caption() -> None:
    clip = {"max_norm": 1.0, "norm_type": 2.0, "total_norm": 10.0995049, "scale": 0.0990147}
    out = render(tutorial(clip=clip), width=200)
    text = "gradients clipped: total 2-norm 10.0995 > max_norm 1, scaled by 0.0990147"
    assert text in words(out)
    assert "(after clipping)" in words(out)


def test_clip_norm_caption_when_nothing_was_clipped() -> None:
    clip = {"max_norm": 100.0, "norm_type": float("inf"), "total_norm": 6.0, "scale": 1.0}
    out = render(tutorial(clip=clip), width=200)
    assert "gradients not clipped: total inf-norm 6 <= max_norm 100" in words(out)
    assert "after clipping" not in out


def test_clip_value_caption() -> None:
    out = render(tutorial(clip={"clip_value": 0.5}), width=200)
    assert "gradients clamped to [-0.5, 0.5]" in words(out)


def test_user_text_is_literal() -> None:
    result = Result(
        expr="[red]x * 2 + [/]",
        value=a(2, 4),
        inputs={"[bold]x": a(1, 2)},
        grads={"[bold]x": a(2, 2)},
        reduction="sum",
    )
    out = render(result)
    assert "[red]x * 2 + [/]" in out
    assert cells(row(out, "[bold]x"))[:2] == ["[bold]x", "(2,)"]


def test_styles_do_not_leak_markup_with_colour() -> None:
    console = Console(file=io.StringIO(), width=100, color_system="truecolor", force_terminal=True)
    print_result(tutorial(inputs={"[bold]a": a(3, 4), "b": a(5, 6)}), console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold]a" in out


def test_large_value_summarised_or_full() -> None:
    x = np.arange(1000.0, 3000.0)
    result = Result(expr="x", value=x, inputs={"x": x}, grads={"x": np.ones(2000)})
    out = render(result, width=80)
    assert "..." in out
    assert "1000." in out and "2999." in out
    assert "1500." not in out and "2222." not in out
    full = render(result, width=80, full=True)
    assert "..." not in full
    for n in (1000, 1001, 1500, 2222, 2998, 2999):
        assert f"{n}." in full
    assert set(re.findall(r"\b(\d{4})\.", full)) == {str(n) for n in range(1000, 3000)}
    assert all(len(line) <= 80 for line in full.splitlines())


@pytest.mark.parametrize("width", [30, 40, 50, 60, 80])
def test_narrow_terminal_never_cuts_a_number(width: int) -> None:
    result = Result(
        expr="h = x * 1\nh",
        value=a(123456.789, 234567.891),
        inputs={"x": a(123456.789, 234567.891)},
        grads={"x": a(1e-5, 1)},
        intermediates={"h": (a(123456.789, 234567.891), a(1, 1))},
        reduction="sum",
    )
    out = render(result, width=width)
    assert "123456.789" in out and "234567.891" in out
    assert "1.e-05" in out
    assert "…" not in out
    assert all(len(line) <= width for line in out.splitlines())


def test_narrow_layout_keeps_every_field() -> None:
    out = render(tutorial(grads={"a": a(5, 6), "b": None}), width=30)
    for text in ("a*b+b", "[3. 4.]", "[5. 6.]", "— (constant)", "[20. 30.]"):
        assert text in out
    assert "output reduced with sum()" in words(out)
    assert "│ name     │ b" in out and "│ shape    │ (2,)" in out


def test_nonfinite_values_display() -> None:
    result = Result(
        expr="log(x)",
        value=a(-np.inf, np.nan, 0),
        inputs={"x": a(0, -1, 1)},
        grads={"x": a(np.inf, np.nan, 1)},
        reduction="sum",
    )
    out = render(result)
    assert cells(row(out, "x"))[3] == "[inf nan  1.]"
    assert cells(row(out, "output"))[2] == "[-inf  nan   0.]"
    assert "total gradient norm nan" in words(out)


def test_empty_array() -> None:
    out = render(Result(expr="x", value=a(), inputs={"x": a()}, grads={"x": a()}))
    assert cells(row(out, "x")) == ["x", "(0,)", "[]", "[]"]


# --- errors and warnings ------------------------------------------------------------------


def test_print_error_caret_stays_under_its_column() -> None:
    source = "a * [bold]b + + 1 " + "x" * 100
    column = source.index("+ +") + 2  # 0-based column of the second '+'
    err = ParseError(
        "unexpected '+' [red]",
        line=1,
        column=column + 1,
        context=f"  {source}\n  {' ' * column}^ expected a number or a name",
    )
    console = _console(60)
    print_error(err, console)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "error: unexpected '+' [red]"
    assert lines[1] == f"  {source}"  # verbatim: not wrapped, not cropped
    assert lines[2].index("^") == lines[1].index("+ +") + 2
    assert len(lines) == 3


def test_print_error_without_context() -> None:
    console = _console()
    print_error(ShapeError("matmul: shapes (2,) and (3,) do not fit"), console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert out == "error: matmul: shapes (2,) and (3,) do not fit\n"


def test_print_warnings() -> None:
    console = _console()
    print_warnings(["overflow in [bold]exp: inf", "output reduced with sum"], console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert out.splitlines() == [
        "warning: overflow in [bold]exp: inf",
        "warning: output reduced with sum",
    ]


def test_print_warnings_then_notes() -> None:
    console = _console()
    print_warnings(["overflow in exp"], console, notes=["the output has shape (2,)", "[b]"])
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert out.splitlines() == [
        "warning: overflow in exp",
        "note: the output has shape (2,)",
        "note: [b]",
    ]


def test_make_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    console = make_console(stderr=True)
    assert console.stderr
    assert console.no_color
    assert not console.soft_wrap
    out = make_console()
    assert not out.stderr
