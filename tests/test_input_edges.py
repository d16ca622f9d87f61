"""Inputs at the edges (issue 12, items 4, 6 and 11): a closed stdin, file reads bounded by
the element limit, JSON ``-0``, CSV row ends, masked arrays, bad API arguments, and huge
names echoed in messages.

The process-level cases run the real CLI through bash (``<&-`` closes fd 0, which a Python
``subprocess`` call cannot express as plainly). Runs that could grow without bound on a
broken build get an address-space limit and a timeout, so a regression fails the test
instead of exhausting the machine.
"""

from __future__ import annotations

import json
import math
import resource
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import gradcli_env, run, strict_loads

import gradcli
import gradcli.io as gio
from gradcli.errors import GradcliError, InputError, LimitError, NamingError
from gradcli.io import load_file_value, parse_cli_value, parse_json_text, read_inputs_object

GRADCLI = f"{shlex.quote(sys.executable)} -m gradcli"

#: The address space a child may use where a broken build would read without bound:
#: plenty for gradcli (it needs a few hundred MB), far below a read of /dev/zero to the end.
MEMORY_CAP = 3 * 2**30


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def bash(command: str, cwd: Path, *, timeout: float = 60, cap: bool = False) -> Any:
    """``command`` run by bash with ``gradcli`` spelled ``$G``; a hang fails the test."""
    return subprocess.run(
        ["bash", "-c", command.replace("$G", GRADCLI)],
        capture_output=True,
        text=True,
        env=gradcli_env(),
        cwd=cwd,
        timeout=timeout,
        preexec_fn=_cap_memory if cap else None,
    )


def error_of(proc: Any) -> dict[str, Any]:
    """The JSON error object of a ``--json`` run (one line on stdout)."""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    doc = strict_loads(lines[0])
    assert "Traceback" not in proc.stderr, proc.stderr
    return doc["error"]


def result_of(proc: Any) -> dict[str, Any]:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return strict_loads(proc.stdout)


# --------------------------------------------------------------------------- 4: closed stdin


@pytest.mark.parametrize(
    "command",
    [
        "$G eval - --json <&-",
        "$G batch <&-",
        "$G batch - <&-",
        "$G eval 'x*2' --inputs - --json <&-",
        "$G jacobian 'x*2' --inputs - --json <&-",
    ],
)
def test_closed_stdin_is_an_input_error(command: str, tmp_path: Path) -> None:
    proc = bash(command, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    error = error_of(proc)
    assert error["kind"] == "input"
    assert error["message"] == "standard input is closed: nothing to read"
    assert "internal error" not in proc.stderr


def test_closed_stdin_in_table_mode_is_one_line_on_stderr(tmp_path: Path) -> None:
    proc = bash("$G eval - <&-", tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["error: standard input is closed: nothing to read"]


def test_closed_stdin_is_no_error_when_stdin_is_not_read(tmp_path: Path) -> None:
    proc = bash("$G eval 'x*2' x=3 --json <&-", tmp_path)
    assert result_of(proc)["output"]["value"] == 6.0


# --------------------------------------------------------------------------- 6: bounded files


def test_the_byte_bound_is_tied_to_the_element_limit() -> None:
    assert gio.FILE_BYTES_PER_ELEMENT == 32
    assert gio.max_file_bytes(1000) == 1000 * 32 + 2**16
    assert gio.max_file_bytes(None) == 10**8 * 32 + gio.FILE_BYTES_SLACK  # the CLI's default
    # a float64 written in full, as json.dumps and np.savetxt write it, fits with room to spare
    widest = json.dumps([-2.2250738585072014e-308] * 1000)
    assert len(widest) / 1000 < gio.FILE_BYTES_PER_ELEMENT
    assert len("%.18e " % -1.7976931348623157e308) < gio.FILE_BYTES_PER_ELEMENT


@pytest.mark.parametrize(
    ("link", "args"),
    [
        ("zero.csv", ["x=@zero.csv"]),
        ("zero.txt", ["x=@zero.txt"]),
        ("zero.json", ["x=@zero.json"]),
        ("zero", ["--inputs", "zero"]),
    ],
)
def test_dev_zero_is_refused_at_the_bound(link: str, args: list[str], tmp_path: Path) -> None:
    (tmp_path / link).symlink_to("/dev/zero")
    # the default limit (10^8 elements: 3.2 GB read, none of it kept): memory stays capped
    proc = bash(f"$G eval 'sum(x)' {shlex.join(args)} --json", tmp_path, cap=True)
    assert proc.returncode == 1, (proc.stdout, proc.stderr[-500:])
    error = error_of(proc)
    assert error["kind"] == "limit"
    assert "is longer than 3,200,065,536 bytes" in error["message"]
    assert "--max-elements 100,000,000 (32 bytes a number)" in error["message"]
    assert error["message"].endswith("raise --max-elements to read it")
    assert "\n" not in error["message"]


def test_dev_zero_with_a_small_limit_names_that_limit(tmp_path: Path) -> None:
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    proc = bash("$G eval 'sum(x)' x=@zero.csv --max-elements 1000 --json", tmp_path, cap=True)
    error = error_of(proc)
    assert proc.returncode == 1
    assert error == {
        "kind": "limit",
        "message": 'x: file "zero.csv" is longer than 97,536 bytes, the most read for '
        "--max-elements 1,000 (32 bytes a number); raise --max-elements to read it",
    }


def test_a_huge_regular_file_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    # sparse: 8 GB that take no disk; a read of it would take 8 GB of memory
    with open(tmp_path / "big.json", "wb") as f:
        f.truncate(8 * 2**30)
    proc = bash("$G eval 'sum(x)' x=@big.json --json", tmp_path, cap=True)
    error = error_of(proc)
    assert error["kind"] == "limit"
    assert error["message"].startswith('x: file "big.json" is longer than 3,200,065,536 bytes')
    proc = bash("$G eval 'sum(x)' --inputs big.json --json", tmp_path, cap=True)
    error = error_of(proc)
    assert error["kind"] == "limit"
    assert error["message"].startswith('--inputs file "big.json" is longer than 3,200,065,536')


def test_the_bound_is_exact(tmp_path: Path) -> None:
    limit = gio.max_file_bytes(2)
    assert limit == 2 * 32 + 2**16
    body = "[1, 2]"
    (tmp_path / "fits.json").write_text(body + " " * (limit - len(body)))
    (tmp_path / "over.json").write_text(body + " " * (limit + 1 - len(body)))
    value = load_file_value(str(tmp_path / "fits.json"), name="x", max_elements=2)
    assert value.tolist() == [1.0, 2.0]
    with pytest.raises(LimitError) as info:
        load_file_value(str(tmp_path / "over.json"), name="x", max_elements=2)
    assert "is longer than 65,600 bytes" in info.value.message
    # the same file is read under a larger limit: the bound follows --max-elements
    assert load_file_value(str(tmp_path / "over.json"), name="x", max_elements=3).shape == (2,)


def test_csv_and_inputs_files_are_bounded_too(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("1\n" * 40_000)  # 80,000 bytes, over 10 * 32 + 65,536
    with pytest.raises(LimitError) as info:
        load_file_value(str(tmp_path / "x.csv"), name="x", max_elements=10)
    assert info.value.message.startswith('x: file "')
    assert "is longer than 65,856 bytes" in info.value.message
    (tmp_path / "in.json").write_text('{"x": [' + "1," * 40_000 + "1]}")
    proc = bash("$G eval 'sum(x)' --inputs in.json --max-elements 10 --json", tmp_path)
    error = error_of(proc)
    assert (proc.returncode, error["kind"]) == (1, "limit")
    assert error["message"].startswith('--inputs file "in.json" is longer than 65,856 bytes')
    # under the bound, the element count still decides, and says how to raise it
    (tmp_path / "y.csv").write_text("1\n" * 11)
    with pytest.raises(LimitError) as info:
        load_file_value(str(tmp_path / "y.csv"), name="y", max_elements=10)
    assert info.value.message.endswith("has more than 10 numbers (raise it with --max-elements)")


def test_a_file_of_nul_bytes_is_not_text_and_is_not_kept(tmp_path: Path) -> None:
    with open(tmp_path / "holes.json", "wb") as f:
        f.write(b"[1, 2]")
        f.truncate(10 * 2**20)  # a sparse tail of NUL bytes, under the bound
    with pytest.raises(InputError) as info:
        load_file_value(str(tmp_path / "holes.json"), name="x")
    assert info.value.message.endswith("is not text (a NUL byte at byte 6)")


def test_a_file_that_is_not_utf8_says_where(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_bytes(b"1,2\n3,\xff4\n")
    with pytest.raises(InputError) as info:
        load_file_value(str(tmp_path / "x.csv"), name="x")
    assert info.value.message.endswith("is not UTF-8 text (byte 6: invalid start byte)")
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf1,2\n3,4\n")
    assert load_file_value(str(tmp_path / "bom.csv"), name="x").tolist() == [[1, 2], [3, 4]]


def _npy_header_only(path: Path, shape: tuple[int, ...], version: tuple[int, int]) -> None:
    """A .npy file whose header declares ``shape`` of float64 and which holds no data."""
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_2_0(f, header)
    with open(path, "r+b") as f:
        f.seek(6)
        f.write(bytes(version))


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_header_shape_is_checked_before_loading(
    version: tuple[int, int], tmp_path: Path
) -> None:
    path = tmp_path / "big.npy"
    if version == (1, 0):
        with open(path, "wb") as f:
            header = {"descr": "<f8", "fortran_order": False, "shape": (10**11,)}
            np.lib.format.write_array_header_1_0(f, header)
    else:
        _npy_header_only(path, (10**11,), version)
    proc = bash("$G eval 'sum(x)' x=@big.npy --max-elements 1000 --json", tmp_path, cap=True)
    assert error_of(proc) == {
        "kind": "limit",
        "message": "x has 100000000000 elements (shape (100000000000,)), more than the "
        "limit of 1000",
    }


def test_npy_version_3_is_read(tmp_path: Path) -> None:
    path = tmp_path / "v3.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.array([[1.5, -2.0], [0.0, 4.0]]), version=(3, 0))
    value = load_file_value(str(path), name="x", dtype="float32")
    assert value.dtype == np.float32
    assert value.tolist() == [[1.5, -2.0], [0.0, 4.0]]


# --------------------------------------------------------------------------- 11: JSON -0


def test_json_minus_zero_keeps_its_sign() -> None:
    for value in (parse_cli_value("-0", name="x"), parse_cli_value(" -0 ", name="x")):
        assert value.shape == ()
        assert math.copysign(1.0, float(value)) == -1.0
    vector = parse_cli_value("[-0, 0, -0.0, -0e0]", name="x")
    assert np.signbit(vector).tolist() == [True, False, True, True]
    obj = parse_json_text('{"x": -0, "y": [[-0]]}', what="request")
    values = read_inputs_object(obj)
    assert np.signbit(values["x"]) and np.signbit(values["y"]).tolist() == [[True]]
    assert values["y"].dtype == np.float64
    # the other integers are still integers (exact beyond 2**53 until they become floats)
    assert parse_json_text("[0, -1, 12345678901234567890]", what="v") == [
        0,
        -1,
        12345678901234567890,
    ]


def test_minus_zero_through_the_cli_gives_minus_inf(tmp_path: Path) -> None:
    doc = result_of(bash("$G eval '1/x' x=-0 --json", tmp_path))
    assert doc["output"]["value"] == "-inf"
    assert doc["inputs"]["x"]["grad"] == "-inf"
    request = '{"expr": "1/x", "inputs": {"x": -0}}'
    doc = result_of(bash(f"echo {shlex.quote(request)} | $G eval - --json", tmp_path))
    assert doc["output"]["value"] == "-inf"


# --------------------------------------------------------------------------- 11: CSV rows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,2\f3,4", [1.0, 2.0, 3.0, 4.0]),  # form feed: whitespace inside a row
        ("1,2\u20283,4", [1.0, 2.0, 3.0, 4.0]),  # LINE SEPARATOR
        ("1 2\u20293 4", [1.0, 2.0, 3.0, 4.0]),  # PARAGRAPH SEPARATOR
        ("1,2\x0b3,4", [1.0, 2.0, 3.0, 4.0]),  # vertical tab
        ("1,2\x1c3,4", [1.0, 2.0, 3.0, 4.0]),  # file separator
        ("1,2\x853,4", [1.0, 2.0, 3.0, 4.0]),  # NEL
        ("1,2\r3,4\r\n5,6\n", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),  # the three row ends
        ("1,2\n\n3,4\n", [[1.0, 2.0], [3.0, 4.0]]),
    ],
)
def test_csv_rows_end_only_at_newlines(text: str, expected: Any, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(text.encode("utf-8"))
    assert load_file_value(str(path), name="x").tolist() == expected


def test_csv_form_feed_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "ff.csv").write_bytes(b"1,2\f3,4")
    doc = result_of(bash("$G eval 'x' x=@ff.csv --json", tmp_path))
    assert doc["output"] == {"shape": [4], "value": [1.0, 2.0, 3.0, 4.0]}


def test_csv_line_numbers_count_only_row_ends(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_bytes("1,2\u20283,4\n5,x\n".encode())
    with pytest.raises(InputError) as info:
        load_file_value(str(tmp_path / "x.csv"), name="x")
    assert "line 2, cell 2" in info.value.message


# --------------------------------------------------------------------------- 11: masked arrays


def test_a_masked_array_with_masked_elements_is_refused() -> None:
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, True])
    with pytest.raises(InputError) as info:
        gradcli.evaluate("x*2", {"x": m})
    assert info.value.kind == "input"
    assert info.value.message == (
        "bad value for x: a masked array with 2 masked elements; gradcli has no masks: pass "
        "m.filled(value) to choose the masked elements' value, or m.data to ignore the mask"
    )
    with pytest.raises(InputError, match="1 masked element;"):
        gradcli.evaluate("x*2", {"x": np.ma.masked_array([1.0, 2.0], mask=[True, False])})
    with pytest.raises(InputError, match="masked array"):
        gradcli.evaluate("x*2", {"x": np.ma.masked})
    with pytest.raises(InputError, match="masked array"):
        gradcli.evaluate("sum(y)", {"y": [1.0]}, grad_output=np.ma.masked_array(1.0, mask=True))
    # inside a list, a masked element is named where it is
    with pytest.raises(InputError) as info:
        gradcli.evaluate("x*2", {"x": [m, m]})
    assert info.value.message == (
        "bad value for x: element [0, 1] is masked (numpy.ma.masked), not a number"
    )


def test_a_masked_array_with_nothing_masked_is_its_data() -> None:
    for m in (
        np.ma.masked_array([1.0, 2.0]),
        np.ma.masked_array([1.0, 2.0], mask=[False, False]),
    ):
        r = gradcli.evaluate("sum(x**2)", {"x": m})
        assert type(r.inputs["x"]) is np.ndarray
        assert r.value.tolist() == 5.0
        assert r.grads["x"].tolist() == [2.0, 4.0]
    # filled() is the way to say what a masked element is
    m = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    assert gradcli.evaluate("sum(x)", {"x": m.filled(0.0)}).value.tolist() == 1.0


# --------------------------------------------------------------------------- 11: API arguments


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"inputs": [("x", 1)]},
            "inputs must be a mapping of name -> value (a dict), not [('x', 1)]",
        ),
        ({"inputs": "x=1"}, "inputs must be a mapping of name -> value (a dict), not 'x=1'"),
        ({"wrt": 5}, "wrt must be a list of input names (strings), not 5"),
        ({"wrt": [5]}, "wrt must hold input names (strings), not 5"),
        ({"wrt": [["x"]]}, "wrt must hold input names (strings), not ['x']"),
        ({"dtype": np.array([1, 2])}, "unknown dtype array([1, 2]): use float64 or float32"),
        (
            {"dtype": [np.float64]},
            "unknown dtype [<class 'numpy.float64'>]: use float64 or float32",
        ),
        ({"seed": "1"}, "seed must be a whole number >= 0, not '1'"),
        ({"clip_norm": [1]}, "clip_norm must be a number, not [1]"),
        ({"norm_type": {"p": 2}}, "norm_type must be a positive number or inf, not {'p': 2}"),
        ({"max_elements": 1.5}, "max_elements must be a whole number >= 1, not 1.5"),
        ({"norm_type": -(10**400), "clip_norm": 1.0}, None),  # beyond float: still refused
    ],
)
def test_bad_api_arguments_are_input_errors(kwargs: dict[str, Any], message: str | None) -> None:
    args = {"inputs": {"x": 1.0}, **kwargs}
    inputs = args.pop("inputs")
    with pytest.raises(GradcliError) as info:
        gradcli.evaluate("x*2", inputs, **args)
    assert isinstance(info.value, InputError)
    assert info.value.kind == "input"
    if message is not None:
        assert info.value.message == message


def test_bad_api_arguments_of_any_size_give_short_messages() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    for bad in ({"wrt": 10**5000}, {"seed": deep}, {"clip_value": "v" * 10**6}, {"dtype": deep}):
        with pytest.raises(InputError) as info:
            gradcli.evaluate("x", {"x": 1.0}, **bad)
        assert len(info.value.message) < 150


def test_api_wrt_accepts_one_name_or_any_iterable() -> None:
    inputs = {"x": 2.0, "xy": 3.0}
    r = gradcli.evaluate("x*xy", inputs, wrt="xy")  # one name, not its letters
    assert r.grads == {"x": None, "xy": 2.0}
    r = gradcli.evaluate("x*xy", inputs, wrt=(n for n in ["x", "x"]))
    assert r.grads["x"].tolist() == 3.0 and r.grads["xy"] is None
    r = gradcli.evaluate("x*xy", inputs, wrt=[])
    assert r.grads == {"x": None, "xy": None}
    r = gradcli.evaluate("x", {"x": 1.0}, clip_norm=1, norm_type=10**400)
    assert r.clip is not None and r.clip["norm_type"] == math.inf


# --------------------------------------------------------------------------- 11: huge names


HUGE = "y" * 100_000


def test_a_huge_unknown_name_is_shortened() -> None:
    with pytest.raises(NamingError) as info:
        gradcli.evaluate(HUGE, {"x": 1.0})
    message = info.value.message
    assert len(message) < 300, len(message)
    assert message.startswith("unknown name `" + "y" * 37 + "...`")


def test_a_huge_unknown_function_is_shortened() -> None:
    with pytest.raises(NamingError) as info:
        gradcli.evaluate(HUGE + "(x)", {"x": 1.0})
    assert len(info.value.message) < 300
    assert info.value.message.startswith("unknown function `" + "y" * 37 + "...`")


def test_a_huge_wrt_name_is_shortened() -> None:
    with pytest.raises(NamingError) as info:
        gradcli.evaluate("x", {"x": 1.0}, wrt=[HUGE])
    assert info.value.message == f"--wrt names `{'y' * 37}...`, which is not an input"


def test_a_huge_name_in_a_constant_value_is_shortened() -> None:
    r = run("eval", "x*2", f"x={HUGE}", "--json")
    assert r.code == 2
    error = r.json["error"]
    assert error["kind"] == "input"
    assert len(error["message"]) < 300, len(error["message"])
    assert f"it uses `{'y' * 37}...`, which has no value" in error["message"]
    assert len(r.stderr) < 400


def test_a_huge_name_given_twice_is_shortened() -> None:
    r = run("eval", "x*2", f"{HUGE}=1", f"{HUGE}=2", "--json")
    assert r.code == 2
    assert r.json["error"] == {
        "kind": "input",
        "message": f"the input `{'y' * 37}...` is given twice",
    }


def test_a_huge_unknown_name_through_the_cli_is_shortened() -> None:
    r = run("eval", HUGE, "x=1", "--json")
    assert r.code == 2
    error = r.json["error"]
    assert error["kind"] == "name"
    assert len(error["message"]) < 300
    assert len(r.stdout) + len(r.stderr) < 2000
