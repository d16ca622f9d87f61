"""Files in and out (issue 13, items 3, 10 and 11; docs/cli.md, "Files").

- ``--save`` chooses its format by the extension: ``.npz`` (every array), ``.json`` (the
  object ``--json`` prints), ``.npy`` (when there is exactly one array); any other
  extension is refused before any work, with exit code 2.
- CSV/text files are read as NumPy's ``loadtxt`` reads them: a header row that holds no
  number is skipped, the delimiter is sniffed among ``,`` ``;`` tab and whitespace, quotes
  are stripped, ``.tsv`` is a known extension; bad cells are still refused with their line
  and cell.
- ``.npz`` archives are read back: ``x=@grads.npz:grad_a``, ``x=@one.npz``, ``--inputs
  inputs.npz``; and standard input, where it is not already the request: ``x=@-``,
  ``x=@-:KEY``, ``--inputs -`` holding an archive, and ``-f -``.

Everything runs the real CLI in a subprocess (``harness.run``), at a temporary folder.
"""

from __future__ import annotations

import io
import json
import shlex
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import Run, gradcli_env, run, strict_loads

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def gc(cwd: Path, *args: str, stdin: str | bytes | None = b"") -> Run:
    """``python -m gradcli ARGS`` at ``cwd``; stdin empty unless given (never the test's)."""
    return run(*args, stdin=stdin, cwd=cwd)


def error_of(r: Run, code: int, kind: str) -> str:
    """The message of a ``--json`` run's error object, after checking its code and kind."""
    r.expect(code)
    error = r.json["error"]
    assert error["kind"] == kind, error
    return str(error["message"])


def npy_bytes(a: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, a)
    return buffer.getvalue()


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


#: The tutorial's program: two inputs, an intermediate, a vector output.
PROGRAM = ["h = a*b; h + b", "a=[3,4]", "b=[5,6]"]


# --------------------------------------------------------------------------------------
# 3: --save chooses its format by the extension
# --------------------------------------------------------------------------------------


def test_save_json_writes_the_object_json_prints(tmp_path: Path) -> None:
    r = gc(tmp_path, "eval", *PROGRAM, "--json", "--save", "g.json").expect(0)
    saved = (tmp_path / "g.json").read_bytes()
    assert not saved.startswith(b"PK")  # not a zip archive under a .json name
    assert saved.decode("utf-8") == r.stdout  # byte for byte: one line of strict JSON
    doc = strict_loads(saved)
    assert doc["output"] == {"shape": [2], "value": [20.0, 30.0]}
    assert doc["inputs"]["a"]["grad"] == [5.0, 6.0]
    assert doc["inputs"]["b"]["grad"] == [4.0, 5.0]
    assert doc["intermediates"]["h"]["grad"] == [1.0, 1.0]


def test_save_json_in_table_mode_and_with_non_finite_numbers(tmp_path: Path) -> None:
    table = gc(tmp_path, "eval", "1/x", "x=[0,2]", "--save", "t.JSON").expect(0)
    assert "x" in table.stdout  # the table was printed, the JSON saved
    printed = gc(tmp_path, "eval", "1/x", "x=[0,2]", "--json").expect(0)
    saved = strict_loads((tmp_path / "t.JSON").read_bytes())  # strict: "inf", never Infinity
    assert saved == printed.json
    assert saved["output"]["value"] == ["inf", 0.5]
    assert saved["inputs"]["x"]["grad"] == ["-inf", -0.25]


def test_save_json_of_a_request_keeps_its_id(tmp_path: Path) -> None:
    request = json.dumps({"expr": "x*y", "inputs": {"x": 2, "y": 3}, "id": "r-7"})
    r = gc(tmp_path, "eval", "-", "--json", "--save", "r.json", stdin=request).expect(0)
    saved = strict_loads((tmp_path / "r.json").read_bytes())
    assert saved == r.json
    assert saved["id"] == "r-7" and saved["inputs"]["x"]["grad"] == 3.0


def test_save_npz_still_writes_every_array_and_reads_back_by_key(tmp_path: Path) -> None:
    r = gc(tmp_path, "eval", *PROGRAM, "--json", "--save", "g.npz").expect(0)
    with np.load(tmp_path / "g.npz", allow_pickle=False) as saved:
        assert sorted(saved.files) == ["grad_a", "grad_b", "grad_h", "output"]
    back = gc(tmp_path, "eval", "u * 1", "u=@g.npz:grad_a", "--json").expect(0)
    assert back.json["inputs"]["u"]["value"] == r.json["inputs"]["a"]["grad"] == [5.0, 6.0]


def test_save_npy_writes_the_one_array(tmp_path: Path) -> None:
    # no inputs: the output is the only array
    gc(tmp_path, "eval", "linspace(0, 1, 5) * 2", "--save", "o.npy").expect(0)
    saved = np.load(tmp_path / "o.npy", allow_pickle=False)
    assert saved.dtype == np.float64
    assert saved.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_save_npy_of_several_arrays_is_an_input_error_naming_them(tmp_path: Path) -> None:
    r = gc(tmp_path, "eval", *PROGRAM, "--json", "--save", "g.npy")
    message = error_of(r, 2, "input")
    assert message == (
        '--save "g.npy": a .npy file holds one array, and this result has 4 ("output", '
        '"grad_a", "grad_b", "grad_h"); save to .npz to keep them all'
    )
    assert not (tmp_path / "g.npy").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file either


@pytest.mark.parametrize("name", ["g.txt", "g.csv", "g.npz.bak", "noext"])
def test_save_with_an_unknown_extension_is_refused_before_any_work(
    tmp_path: Path, name: str
) -> None:
    # the program names an unknown input: were it run, the error would be kind "name"
    r = gc(tmp_path, "eval", "y + 1", "x=1", "--json", "--save", name)
    message = error_of(r, 2, "input")
    assert message.startswith(f'--save "{name}": ')
    assert message.endswith(
        "the extension chooses the format: .npz (every array), .json (the --json response), "
        ".npy (one array) or .zarr (every array, a chunk at a time)"
    )
    assert list(tmp_path.iterdir()) == []
    r = gc(tmp_path, "eval", "y + 1", "x=1", "--save", name)  # table mode: stderr
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith(f'error: --save "{name}": ')


def test_check_save_path_names_the_format() -> None:
    from gradcli.io import check_save_path  # new with this test: a failure, not an error

    assert check_save_path("a/b.NPZ") == ".npz"
    assert check_save_path("~/r.json") == ".json"
    assert check_save_path("x.npy") == ".npy"


def test_save_json_goes_through_the_atomic_replacement(tmp_path: Path) -> None:
    old = tmp_path / "g.json"
    old.write_text("old")
    old.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to("g.json")
    gc(tmp_path, "eval", "x*3", "x=[1,2]", "--save", "link.json").expect(0)
    assert link.is_symlink()  # the link is followed, its target replaced
    assert strict_loads(old.read_bytes())["output"]["value"] == [3.0, 6.0]
    assert stat.S_IMODE(old.stat().st_mode) == 0o640  # the old file's permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "link.json"]
    r = gc(tmp_path, "eval", "x*3", "x=[1,2]", "--json", "--save", "missing/g.json")
    assert error_of(r, 2, "input") == 'cannot write "missing/g.json": no such file'


# --------------------------------------------------------------------------------------
# 10: CSV as NumPy reads it
# --------------------------------------------------------------------------------------


def value_of(cwd: Path, *values: str, stdin: str | bytes | None = b"") -> Any:
    """The value of ``x`` as gradcli reads ``values`` (``x=...``), from its --json."""
    r = gc(cwd, "eval", "x", *values, "--json", stdin=stdin).expect(0)
    return r.json["inputs"]["x"]["value"]


@pytest.mark.parametrize(
    ("filename", "text", "numpy_reads"),
    [
        # a header row, skipped as genfromtxt(names=True) / loadtxt(skiprows=1) skip it
        ("h.csv", "a,b\n1,2\n3,4\n", {"delimiter": ",", "skiprows": 1}),
        ("q.csv", '"a","b"\n"1","2"\n"3","4"\n', {"delimiter": ",", "skiprows": 1}),
        ("s.csv", "1;2\n3;4\n", {"delimiter": ";"}),
        ("sh.csv", "x;y\n1.5;-2\n3e2;4\n", {"delimiter": ";", "skiprows": 1}),
        ("t.tsv", "x\ty\n1\t2\n3\t4\n", {"delimiter": "\t", "skiprows": 1}),
        ("t.txt", "1\t2\n3\t4\n", {"delimiter": "\t"}),
        ("w.txt", "x y\n1 2\n3 4\n", {"skiprows": 1}),
        ("c.csv", "# exported\nx,y  # names\n1,2\n\n3,4\n", {"delimiter": ",", "skiprows": 2}),
    ],
)
def test_csv_reads_as_numpy_reads(
    tmp_path: Path, filename: str, text: str, numpy_reads: dict[str, Any]
) -> None:
    path = tmp_path / filename
    path.write_text(text, "utf-8")
    expected = np.loadtxt(path, quotechar='"', **numpy_reads)
    assert value_of(tmp_path, f"x=@{filename}") == expected.tolist()
    assert expected.shape == (2, 2)


def test_a_quoted_header_may_hold_the_delimiter(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text('"loss, train";"loss, test"\n0.5;0.75\n', "utf-8")
    assert value_of(tmp_path, "x=@h.csv") == [0.5, 0.75]


def test_tsv_of_one_column_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "c.tsv").write_text("loss\n1\n2\n3\n", "utf-8")
    assert value_of(tmp_path, "x=@c.tsv") == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n3,oops\n", 'x: file "v.csv", line 3, cell 2: "oops" is not a number'),
        ("1,2\nbad,4\n", 'x: file "v.csv", line 2, cell 1: "bad" is not a number'),
        ("1;2\n3;;4\n", 'x: file "v.csv", line 2, cell 2: empty cell'),
        ("a,1\n2,3\n", 'x: file "v.csv", line 1, cell 1: "a" is not a number'),  # no header
        ("x,y\n1,2,3\n4,5\n", 'x: file "v.csv", line 3 has 2 numbers but the first row has 3'),
    ],
)
def test_a_bad_cell_is_still_refused_with_its_position(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "v.csv").write_text(text, "utf-8")
    assert error_of(gc(tmp_path, "eval", "x", "x=@v.csv", "--json"), 2, "input") == message


def test_tsv_keeps_an_empty_cell_as_an_error(tmp_path: Path) -> None:
    (tmp_path / "v.tsv").write_text("1\t\t2\n", "utf-8")
    message = error_of(gc(tmp_path, "eval", "x", "x=@v.tsv", "--json"), 2, "input")
    assert message == 'x: file "v.tsv", line 1, cell 2: empty cell'


def test_a_header_does_not_lift_the_element_limit(tmp_path: Path) -> None:
    (tmp_path / "v.csv").write_text("n\n" + "1\n" * 11, "utf-8")
    r = gc(tmp_path, "eval", "x", "x=@v.csv", "--json", "--max-elements", "10")
    assert error_of(r, 1, "limit") == (
        'x: file "v.csv" has more than 10 numbers (raise it with --max-elements)'
    )
    r = gc(tmp_path, "eval", "x", "x=@v.csv", "--json", "--max-elements", "11").expect(0)
    assert r.json["inputs"]["x"]["value"] == [1.0] * 11


# --------------------------------------------------------------------------------------
# 11: .npz read back, and standard input
# --------------------------------------------------------------------------------------


def test_inputs_from_an_npz_archive_by_name(tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", W=np.array([[1.0, 2.0], [3.0, 4.0]]), v=np.array([1.0, -1.0]))
    from_npz = gc(tmp_path, "eval", "sum(W @ v)", "--inputs", "in.npz", "--json").expect(0)
    (tmp_path / "in.json").write_text('{"W": [[1, 2], [3, 4]], "v": [1, -1]}')
    from_json = gc(tmp_path, "eval", "sum(W @ v)", "--inputs", "in.json", "--json").expect(0)
    assert from_npz.json == from_json.json
    assert from_npz.json["output"]["value"] == -2.0
    assert from_npz.json["inputs"]["W"]["grad"] == [[1.0, -1.0], [1.0, -1.0]]


def test_inputs_npz_is_what_save_wrote(tmp_path: Path) -> None:
    gc(tmp_path, "eval", *PROGRAM, "--save", "g.npz").expect(0)
    r = gc(tmp_path, "eval", "output + grad_a", "--inputs", "g.npz", "--json").expect(0)
    assert r.json["output"]["value"] == [25.0, 36.0]
    assert sorted(r.json["inputs"]) == ["grad_a", "grad_b", "grad_h", "output"]


def test_one_array_archive_needs_no_key(tmp_path: Path) -> None:
    np.savez(tmp_path / "one.npz", w=np.arange(3.0))
    assert value_of(tmp_path, "x=@one.npz") == [0.0, 1.0, 2.0]
    assert value_of(tmp_path, "x=@one.npz:w") == [0.0, 1.0, 2.0]


def test_an_archive_of_several_arrays_needs_a_key_and_lists_them(tmp_path: Path) -> None:
    np.savez(tmp_path / "g.npz", output=np.ones(2), grad_a=np.zeros(2))
    message = error_of(gc(tmp_path, "eval", "x", "x=@g.npz", "--json"), 2, "input")
    assert message == (
        'x: file "g.npz" holds 2 arrays ("output", "grad_a"); name one as x=@g.npz:KEY'
    )
    message = error_of(gc(tmp_path, "eval", "x", "x=@g.npz:grad_q", "--json"), 2, "input")
    assert message == 'x: file "g.npz" has no array "grad_q"; it holds "output", "grad_a"'


def test_a_compressed_archive_and_float32(tmp_path: Path) -> None:
    np.savez_compressed(tmp_path / "c.npz", a=np.array([0.1, 0.2]), b=np.eye(2))
    r = gc(tmp_path, "eval", "x", "x=@c.npz:a", "--dtype", "float32", "--json").expect(0)
    assert r.json["inputs"]["x"]["value"] == np.array([0.1, 0.2], np.float32).tolist()


def _npz_with_member(path: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(name, data)


def test_an_archive_member_is_bounded_by_its_header(tmp_path: Path) -> None:
    # a header that claims 10^9 elements, and no data: refused by the header, unread
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**9,)}
    )
    _npz_with_member(tmp_path / "big.npz", "x.npy", header.getvalue())
    r = gc(tmp_path, "eval", "x", "x=@big.npz:x", "--json")
    assert "1000000000 elements" in error_of(r, 1, "limit")
    r = gc(tmp_path, "eval", "x", "--inputs", "big.npz", "--json")
    assert "1000000000 elements" in error_of(r, 1, "limit")
    # a member shorter than its header says
    _npz_with_member(tmp_path / "cut.npz", "x.npy", npy_bytes(np.arange(10.0))[:-16])
    message = error_of(gc(tmp_path, "eval", "x", "x=@cut.npz", "--json"), 2, "input")
    assert message.startswith('x: cannot read file "cut.npz", array "x" as .npy: the file is')


def test_an_archive_is_read_without_pickle(tmp_path: Path) -> None:
    np.savez(tmp_path / "o.npz", x=np.array([1, "two", None], dtype=object))
    message = error_of(gc(tmp_path, "eval", "x", "x=@o.npz", "--json"), 2, "input")
    assert message.endswith("it holds Python objects; only numeric arrays are read")
    (tmp_path / "z.npz").write_text("1,2\n")
    message = error_of(gc(tmp_path, "eval", "x", "x=@z.npz", "--json"), 2, "input")
    assert message == 'x: cannot read file "z.npz" as .npz: it is not a zip archive'


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (b"1,2\n3,4\n", [[1.0, 2.0], [3.0, 4.0]]),  # CSV
        (b"a;b\n1;2\n", [1.0, 2.0]),  # CSV with a header
        (b"[[1, 2], [3, 4]]", [[1.0, 2.0], [3.0, 4.0]]),  # JSON
        (b"7\n", 7.0),
        (npy_bytes(np.array([0.5, -1.5])), [0.5, -1.5]),  # .npy
        (npz_bytes(w=np.array([2.0, 3.0])), [2.0, 3.0]),  # .npz of one array
    ],
    ids=["csv", "csv-header", "json", "number", "npy", "npz"],
)
def test_a_value_from_stdin(tmp_path: Path, stdin: bytes, expected: Any) -> None:
    assert value_of(tmp_path, "x=@-", stdin=stdin) == expected


def test_a_value_from_an_npz_on_stdin_by_key(tmp_path: Path) -> None:
    gc(tmp_path, "eval", *PROGRAM, "--save", "g.npz").expect(0)
    archive = (tmp_path / "g.npz").read_bytes()
    r = gc(tmp_path, "eval", "sum(x)", "x=@-:grad_b", "--json", stdin=archive).expect(0)
    assert r.json["inputs"]["x"]["value"] == [4.0, 5.0]
    r = gc(tmp_path, "eval", "output + grad_b", "--inputs", "-", "--json", stdin=archive)
    assert r.expect(0).json["output"]["value"] == [24.0, 35.0]


def test_the_program_from_stdin(tmp_path: Path) -> None:
    program = "h = tanh(w * x)  # a comment\nsum(h ** 2)\n"
    r = gc(tmp_path, "eval", "-f", "-", "w=[1,2]", "x=0.5", "--json", stdin=program).expect(0)
    (tmp_path / "p.txt").write_text(program, "utf-8")
    same = gc(tmp_path, "eval", "-f", "p.txt", "w=[1,2]", "x=0.5", "--json").expect(0)
    assert r.json == same.json
    assert r.json["output"]["value"] == pytest.approx(np.sum(np.tanh([0.5, 1.0]) ** 2))
    r = gc(tmp_path, "jacobian", "-f", "-", "x=[1,2]", "--json", stdin="x ** 2").expect(0)
    assert r.json["jacobian"]["x"]["value"] == [[2.0, 0.0], [0.0, 4.0]]


@pytest.mark.parametrize(
    ("args", "stdin", "first", "second"),
    [
        (["-f", "-", "x=@-"], "x * 2", "-f -", "x=@-"),
        (["x*y", "x=@-", "y=@-"], "[1, 2]", "x=@-", "y=@-"),
        (["x*y", "--inputs", "-", "x=@-"], '{"y": 2}', "--inputs -", "x=@-"),
        (["-f", "-", "--inputs", "-"], "x * y", "-f -", "--inputs -"),
    ],
)
def test_stdin_is_read_once(
    tmp_path: Path, args: list[str], stdin: str, first: str, second: str
) -> None:
    r = gc(tmp_path, "eval", *args, "--json", stdin=stdin)
    assert error_of(r, 2, "input") == (
        f"standard input is read once, and {first} reads it: {second} cannot read it too "
        "(give one of them a file)"
    )


def test_a_closed_or_empty_stdin_for_a_value(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "-c", f"{shlex.quote(sys.executable)} -m gradcli eval x x=@- --json <&-"],
        capture_output=True,
        text=True,
        env=gradcli_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2
    assert strict_loads(proc.stdout)["error"] == {
        "kind": "input",
        "message": "standard input is closed: nothing to read",
    }
    message = error_of(gc(tmp_path, "eval", "x", "x=@-", "--json", stdin=b""), 2, "input")
    assert message == "x: standard input is empty: no value to read"
    message = error_of(gc(tmp_path, "eval", "x", "x=@-:k", "--json", stdin="3"), 2, "input")
    assert message == "x: @-:k names an array of an .npz archive, but standard input is not one"


def test_a_value_from_stdin_is_bounded_by_max_stdin_bytes(tmp_path: Path) -> None:
    r = gc(tmp_path, "eval", "x", "x=@-", "--json", "--max-stdin-bytes", "10", stdin="1," * 10)
    assert error_of(r, 1, "limit") == (
        "standard input is longer than 10 bytes (raise it with --max-stdin-bytes)"
    )


# --------------------------------------------------------------------------------------
# 11: --save on jacobian and hessian
# --------------------------------------------------------------------------------------


def test_jacobian_save_npz_holds_the_output_and_each_jacobian(tmp_path: Path) -> None:
    gc(tmp_path, "jacobian", "x*W@x", "W=[[1,2],[3,4]]", "x=[1,2]", "--save", "j.npz").expect(0)
    with np.load(tmp_path / "j.npz") as saved:
        assert sorted(saved.files) == ["jacobian_W", "jacobian_x", "output"]
        assert saved["output"].tolist() == [9.0, 19.0]
        assert saved["jacobian_x"].tolist() == [[2.0, 8.0], [6.0, 16.0]]
        assert saved["jacobian_W"].tolist() == [[[1.0, 4.0], [0.0, 0.0]], [[0.0, 0.0], [1.0, 4.0]]]


def test_hessian_save_json_is_what_json_prints(tmp_path: Path) -> None:
    r = gc(tmp_path, "hessian", "sum(x**3)", "x=[1,2]", "--json", "--save", "h.json").expect(0)
    saved = (tmp_path / "h.json").read_text("utf-8")
    assert saved == r.stdout
    assert strict_loads(saved)["hessian"] == [[6.0, 0.0], [0.0, 12.0]]
    gc(tmp_path, "hessian", "sum(x**3)", "x=[1,2]", "--save", "h.npz").expect(0)
    with np.load(tmp_path / "h.npz") as npz:
        assert npz["hessian"].tolist() == [[6.0, 0.0], [0.0, 12.0]]


def test_jacobian_save_to_an_unknown_extension_is_refused_before_any_work(tmp_path: Path) -> None:
    # a program too large to run under --max-passes would be a limit error (exit 1) if run
    r = gc(tmp_path, "jacobian", "x*ones(10**6)", "x=1", "--save", "j.txt", "--json")
    assert "unknown file type" in error_of(r, 2, "input")
    assert not (tmp_path / "j.txt").exists()
