"""The interface in Bengali (issue 16, item 3; docs/i18n.md).

With ``LANG``/``LC_MESSAGES`` ``bn_*`` or ``--lang bn``, what a person reads (table headers,
captions, notes, warnings and errors on stderr, ``explain``'s steps, ``repl``'s lines) is
Bengali; JSON, exit codes and error kinds are the English run's, byte for byte. The source
tests at the end walk gradcli with ``ast``: every message goes through the marker
(``msg``/``tr``), and every marked message has a Bengali translation in the catalog.
"""

from __future__ import annotations

import ast
import pickle
import re
import string
import threading
from functools import cache
from pathlib import Path

import pytest
from harness import REPO, Run, invoke, run

import gradcli
from gradcli import errors, i18n
from gradcli.catalogs import compile_catalogs, placeholders, read_po
from gradcli.i18n import msg, tr, translate

BN = {"LANG": "bn_BD.UTF-8"}
PROGRAM = ("eval", "a*b+b", "a=[3,4]", "b=[5,6]")
PO = REPO / "gradcli" / "locale" / "bn" / "LC_MESSAGES" / "gradcli.po"
SOURCE = REPO / "gradcli"

HEADERS_BN = ("নাম", "আকার", "মান", "গ্রেডিয়েন্ট")
CAPTION_BN = (
    "backward-এর আগে আউটপুট sum() দিয়ে রিডিউস করা হয়েছে, যেমন z.sum().backward() "
    "মোট গ্রেডিয়েন্ট নর্ম 10.0995"
)
CAPTION_EN = (
    "output reduced with sum() before backward, as z.sum().backward() total gradient norm 10.0995"
)


@cache
def cli(*args: str, lang: str | None = None, **language: str) -> Run:
    """One gradcli process (cached), with the locale variables given (``lang``: ``LANG``)."""
    env = dict(language)
    if lang is not None:
        env["LANG"] = lang
    return run(*args, language=env)


def header_cells(r: Run) -> list[str]:
    line = next(line for line in r.stdout.splitlines() if line.startswith("┃"))
    return [c.strip() for c in line.strip("┃").split("┃")]


# ---- eval: headers, caption, rows ---------------------------------------------------------


@pytest.mark.parametrize("lang", ["bn_BD.UTF-8", "bn_IN.UTF-8"])
def test_lang_bengali_gives_bengali_headers_and_caption(lang: str) -> None:
    r = cli(*PROGRAM, lang=lang).expect(0)
    assert header_cells(r) == list(HEADERS_BN)
    assert r.caption() == CAPTION_BN
    assert r.row("আউটপুট")  # the output row's label
    assert "[20. 30.]" in r.row("আউটপুট")  # numbers as in English, ASCII digits
    assert not re.search("[০-৯]", r.stdout), "digits stay ASCII"
    assert r.stderr == ""


def test_lang_option_bn_is_the_same_as_the_environment() -> None:
    by_option = cli(*PROGRAM, "--lang", "bn").expect(0)
    assert by_option.stdout == cli(*PROGRAM, lang="bn_BD.UTF-8").stdout


def test_english_is_the_default_and_unchanged() -> None:
    r = cli(*PROGRAM).expect(0)
    assert header_cells(r) == ["name", "shape", "value", "gradient"]
    assert r.caption() == CAPTION_EN
    assert cli(*PROGRAM, lang="en_US.UTF-8").stdout == r.stdout
    assert cli(*PROGRAM, lang="C.UTF-8").stdout == r.stdout


def test_lang_option_en_overrides_a_bengali_environment() -> None:
    assert cli(*PROGRAM, "--lang", "en", lang="bn_BD.UTF-8").stdout == cli(*PROGRAM).stdout


def test_gettext_precedence_of_the_locale_variables() -> None:
    bengali = cli(*PROGRAM, lang="bn_BD.UTF-8").stdout
    english = cli(*PROGRAM).stdout
    # LC_MESSAGES before LANG, LC_ALL before both, LANGUAGE (its first entry) first of all
    assert cli(*PROGRAM, lang="en_US.UTF-8", LC_MESSAGES="bn_IN.UTF-8").stdout == bengali
    assert cli(*PROGRAM, lang="bn_BD.UTF-8", LC_ALL="en_US.UTF-8").stdout == english
    assert cli(*PROGRAM, lang="en_US.UTF-8", LANGUAGE="bn:en").stdout == bengali
    assert i18n.env_language({"LANG": "bn"}) == "bn"
    assert i18n.env_language({"LANG": "bnx", "LANGUAGE": ""}) == "bn"
    assert i18n.env_language({"LANG": "en_GB.UTF-8", "LANGUAGE": "bn_BD:en"}) == "bn"
    assert i18n.env_language({}) == "en"


def test_a_bad_lang_is_a_usage_error() -> None:
    cli(*PROGRAM, "--lang", "fr").assert_usage_error("--lang")


# ---- JSON never changes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        (*PROGRAM, "--json"),
        ("eval", "a*b+q", "a=[3,4]", "b=[5,6]", "--json"),  # an error object
        ("eval", "log(a)", "a=[0,1]", "--json"),  # warnings on stderr
        ("eval", "foo(a)", "a=1", "--json"),  # a suggestion inside the message
        ("explain", "a*b+b", "a=[3,4]", "b=[5,6]", "--json"),
        ("jacobian", "a*b", "a=[3,4]", "b=[5,6]", "--json"),
        ("functions", "sin", "--json"),
    ],
)
def test_json_is_byte_for_byte_the_english_runs(args: tuple[str, ...]) -> None:
    english = cli(*args)
    for bengali in (cli(*args, lang="bn_BD.UTF-8"), cli(*args, "--lang", "bn")):
        assert bengali.stdout == english.stdout
        assert bengali.code == english.code
    assert english.stdout.isascii() or "error" not in english.stdout


def test_batch_responses_stay_english() -> None:
    requests = (
        '{"id": 1, "expr": "a*b+b", "inputs": {"a": [3, 4], "b": [5, 6]}}\n'
        '{"id": 2, "expr": "a*q", "inputs": {"a": 1}}\n'
        '{"id": 3, "expr": "sin(", "inputs": {}}\n'
    )
    english = run("batch", "-", stdin=requests)
    bengali = run("batch", "-", stdin=requests, language=BN)
    assert bengali.stdout == english.stdout
    assert "unknown name" in english.stdout
    assert bengali.code == english.code


def test_json_error_line_on_stderr_is_bengali_with_the_english_kind() -> None:
    r = cli("eval", "a*b+q", "a=[3,4]", "b=[5,6]", "--json", lang="bn_BD.UTF-8").expect(2)
    assert r.first_error_line == "ত্রুটি (name): অজানা নাম `q`: q=VALUE দিয়ে এর মান দিন"


# ---- errors, warnings, notes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "english", "bengali"),
    [
        (
            ("eval", "a*b+q", "a=[3,4]", "b=[5,6]"),
            "error: unknown name `q`: give it a value as q=VALUE",
            "ত্রুটি: অজানা নাম `q`: q=VALUE দিয়ে এর মান দিন",
        ),
        (
            ("eval", "sine(a)", "a=1"),
            "error: unknown function `sine` (did you mean `sin` or `sinh` or `sign`?); "
            "`gradcli functions` lists them all",
            "ত্রুটি: অজানা ফাংশন `sine` (আপনি কি `sin` বা `sinh` বা `sign` বোঝাতে চেয়েছেন?); "
            "`gradcli functions` সবগুলোর তালিকা দেয়",
        ),
        (
            ("eval", "a @ b", "a=[[1,2]]", "b=[[1,2]]"),
            "error: matmul: shapes (1, 2) and (1, 2) do not fit",
            "ত্রুটি: matmul: আকার (1, 2) ও (1, 2) মেলে না",
        ),
        (
            ("eval", "a", "a=[1,"),
            None,
            "ত্রুটি: a-এর জন্য ভুল মান:",
        ),
    ],
    ids=["name", "function", "shape", "value"],
)
def test_errors_on_stderr_are_bengali_and_keep_their_exit_code(
    args: tuple[str, ...], english: str | None, bengali: str
) -> None:
    en = cli(*args)
    bn = cli(*args, lang="bn_BD.UTF-8")
    assert en.code == bn.code != 0
    if english is not None:
        assert en.first_error_line == english
        assert bn.first_error_line == bengali
    else:
        assert bn.first_error_line.startswith(bengali)
    assert bn.stdout == en.stdout == ""


def test_warnings_and_notes_are_bengali() -> None:
    r = cli("eval", "log(a)", "a=[0,1]", lang="bn_BD.UTF-8").expect(0)
    assert "সতর্কতা: 1টি অপারেশনে শূন্য দিয়ে ভাগ ঘটেছে" in r.stderr
    assert "সতর্কতা: a-এর গ্রেডিয়েন্টে অসীম বা অসংজ্ঞায়িত মান আছে" in r.stderr
    quiet = cli("eval", "a*b+b", "a=[3,4]", "b=[5,6]", "--json", lang="bn_BD.UTF-8")
    assert quiet.stderr.startswith("নোট: আউটপুটের আকার (2,): গ্রেডিয়েন্টগুলো sum(output)-এর")


def test_a_usage_error_says_what_gradcli_adds_in_bengali() -> None:
    r = cli("eval", "a", "a=1", "--precision", "x", lang="bn_BD.UTF-8")
    assert r.code == 2
    assert r.first_error_line.startswith("ত্রুটি: ")
    assert "('gradcli eval --help' দেখুন)" in r.first_error_line


# ---- the other commands -----------------------------------------------------------------


def test_explain_steps_are_bengali() -> None:
    args = ("explain", "a*b+b", "a=[3,4]", "b=[5,6]")
    r = run(*args, columns=200, language=BN).expect(0)  # wide: no step is wrapped
    text = r.text
    assert "backward, ইঞ্জিন যে ক্রমে চালিয়েছে" in text
    assert "শুরু: d আউটপুট / d আউটপুট = 1" in text
    assert "a.grad-এ জমা হয়েছে" in text
    assert "গ্রেডিয়েন্ট মিলিত হয়: [1. 1.] (#3 add থেকে) + [3. 4.] (#2 mul থেকে) = [4. 5.]" in text
    assert "উপাদানভিত্তিক গুণফল" in text  # the forward table's summary of *
    assert "গ্রেডিয়েন্ট: a: [5. 6.]; b: [4. 5.]" in text
    for english in ("accumulated into", "gradients meet", "start:", "what happens"):
        assert english not in text


def test_functions_table_headers_are_bengali() -> None:
    r = cli("functions", "sin", lang="bn_BD.UTF-8").expect(0)
    assert "gradcli ফাংশনসমূহ" in r.stdout
    assert "কী গণনা করে" in r.stdout


def test_jacobian_and_check_tables_are_bengali() -> None:
    jac = cli("jacobian", "a*b", "a=[3,4]", "b=[5,6]", lang="bn_BD.UTF-8").expect(0)
    assert "আউটপুটের আকার (2,)" in jac.text
    chk = cli("check", "sin(a)", "a=[1,2]", lang="bn_BD.UTF-8").expect(0)
    assert "গ্রেডিয়েন্ট যাচাই" in chk.text and "ঠিক আছে" in chk.text


def test_repl_speaks_bengali() -> None:
    lines = ":vars\na = [3, 4]\nsum(a*a)\n:grad\n:zero\n:frob\n"
    r = run("repl", stdin=lines, language=BN)
    assert "এখনো কোনো নাম নেই: NAME = VALUE দিয়ে একটি বাইন্ড করুন" in r.stdout
    assert "a.grad = [6. 8.]" in r.stdout
    assert "শূন্য করা হয়েছে: a.grad" in r.stdout
    assert "ত্রুটি: অজানা কমান্ড `:frob`" in r.stderr
    assert r.code == 1  # a line failed, as in English
    assert run("repl", stdin=lines).code == 1


# ---- the Message type, the API and threads ------------------------------------------------


def test_a_message_is_its_english_text() -> None:
    m = msg("unknown function `{name}`{suggest}", name="sine", suggest="")
    assert m == "unknown function `sine`" and isinstance(m, str)
    assert translate(m, "bn") == "অজানা ফাংশন `sine`"
    assert translate(m, "en") == m
    assert pickle.loads(pickle.dumps(m)).args == m.args
    assert translate(pickle.loads(pickle.dumps(m)), "bn") == "অজানা ফাংশন `sine`"
    odd = msg("{what}: {err}", what="f", err=lambda: 0)  # not picklable as it is
    assert pickle.loads(pickle.dumps(odd)) == str(odd)
    assert translate(pickle.loads(pickle.dumps(odd)), "bn").startswith("f: <function")
    # a message inside a message is translated too; plain text is left as it is
    nested = msg(
        "unknown input `{n}`{suggest}", n="x", suggest=msg(" (did you mean `{name}`?)", name="y")
    )
    assert translate(nested, "bn") == "অজানা ইনপুট `x` (আপনি কি `y` বোঝাতে চেয়েছেন?)"
    assert translate("plain text", "bn") == "plain text"


def test_the_api_stays_english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "bn_BD.UTF-8")
    with pytest.raises(errors.NamingError) as e:
        gradcli.evaluate("a*q", {"a": 1.0})
    assert str(e.value) == e.value.message == "unknown name `q`: give it a value as q=VALUE"
    assert i18n.language() == "en"
    assert tr("error") == "error"


def test_a_command_in_process_leaves_the_language_as_it_found_it() -> None:
    r = invoke(*PROGRAM, "--lang", "bn")
    assert header_cells(r) == list(HEADERS_BN)
    assert invoke(*PROGRAM, language=BN).stdout == r.stdout
    assert i18n.language() == "en"
    assert header_cells(invoke(*PROGRAM)) == ["name", "shape", "value", "gradient"]


def test_the_language_is_per_thread() -> None:
    seen: dict[str, str] = {}

    def worker(lang: str) -> None:
        i18n.activate(lang)
        barrier.wait()
        seen[lang] = tr("error")

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=worker, args=(lang,)) for lang in ("en", "bn")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"en": "error", "bn": "ত্রুটি"}
    assert i18n.language() == "en"


def test_english_reads_no_catalog() -> None:
    # start-up: the catalog is read only when Bengali is shown (docs/i18n.md)
    i18n._catalogs.clear()
    invoke(*PROGRAM).expect(0)
    invoke("eval", "a*q", "a=1").expect(2)
    assert i18n._catalogs == {}
    invoke(*PROGRAM, "--lang", "bn").expect(0)
    assert list(i18n._catalogs) == ["bn"]


# ---- the catalog --------------------------------------------------------------------------


@cache
def catalog() -> dict[str, str]:
    entries = read_po(PO)
    entries.pop("")  # the header
    return entries


MARKERS = {"msg", "tr"}


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


@cache
def sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text("utf-8")) for p in sorted(SOURCE.rglob("*.py"))}


@cache
def msgids() -> dict[str, list[str]]:
    """Every message of gradcli: the literal first argument of each ``msg``/``tr`` call."""
    found: dict[str, list[str]] = {}
    for path, tree in sources().items():
        if path.name == "i18n.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in MARKERS:
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                    f"{where}: the first argument of {_called(node)}() must be a string literal "
                    "(it is the message's id in the catalog)"
                )
                found.setdefault(first.value, []).append(where)
    return found


def test_every_message_has_a_bengali_translation() -> None:
    assert len(msgids()) > 350
    missing = {m: where for m, where in msgids().items() if not catalog().get(m, "").strip()}
    assert not missing, (
        f"{len(missing)} message(s) without a Bengali translation in {PO.relative_to(REPO)} "
        "(docs/i18n.md, 'Adding a message'):\n"
        + "\n".join(f"  {where[0]}: {m!r}" for m, where in missing.items())
    )


def test_the_catalog_has_no_stale_entries() -> None:
    stale = sorted(set(catalog()) - set(msgids()))
    assert not stale, f"entries no code uses any more (remove them from the .po): {stale}"


def test_every_translation_keeps_exactly_its_placeholders() -> None:
    wrong = {
        m: (sorted(placeholders(m)), sorted(placeholders(t)))
        for m, t in catalog().items()
        if placeholders(m) != placeholders(t)
    }
    assert not wrong, f"msgid placeholders vs msgstr placeholders: {wrong}"

    # and each field keeps its conversion and format (``{x!r}``, ``{n:,}``)
    def fields(text: str) -> set[tuple[str, str, str]]:
        parsed = string.Formatter().parse(text)
        return {(f, spec or "", conv or "") for _, f, spec, conv in parsed if f is not None}

    changed = [m for m, t in catalog().items() if fields(m) != fields(t)]
    assert not changed, f"a placeholder's conversion or format changed in: {changed}"


def test_translations_keep_ascii_digits() -> None:
    assert not [t for t in catalog().values() if re.search("[০-৯]", t)]


def test_the_committed_mo_is_compiled_from_the_po() -> None:
    assert compile_catalogs(check=True) == [], "run: python -m gradcli.catalogs --compile"


def test_the_mo_is_what_gettext_reads() -> None:
    import gettext

    with (PO.with_suffix(".mo")).open("rb") as f:
        compiled = gettext.GNUTranslations(f)
    for m, t in catalog().items():
        assert compiled.gettext(m) == t


# ---- every user-visible message goes through the marker -----------------------------------

ERROR_CLASSES = {
    name
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, errors.GradcliError)
}


def _returns_message() -> set[str]:
    """Helpers whose return annotation says they give a Message (``suggest``, ...)."""
    return {
        node.name
        for tree in sources().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.returns is not None
        and "Message" in ast.unparse(node.returns)
    }


def _is_marked(expr: ast.expr, fn: ast.FunctionDef | None, helpers: set[str]) -> bool:
    """Whether ``expr`` is a message: a marker call or a call of a helper that returns one,
    a conditional of two messages, or a name that the enclosing function binds only to
    messages (or takes as a parameter annotated ``Message``)."""
    if isinstance(expr, ast.Call):
        return _called(expr) in MARKERS | helpers
    if isinstance(expr, ast.IfExp):
        return _is_marked(expr.body, fn, helpers) and _is_marked(expr.orelse, fn, helpers)
    if isinstance(expr, ast.BoolOp):
        return all(_is_marked(v, fn, helpers) for v in expr.values)
    if isinstance(expr, ast.Name) and fn is not None:
        arguments = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        for a in arguments:
            if a.arg == expr.id:
                return a.annotation is not None and "Message" in ast.unparse(a.annotation)
        bound = [
            node.value
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
        ]
        return bool(bound) and all(_is_marked(v, fn, helpers) for v in bound)
    return False


def _enclosing(tree: ast.Module, line: int) -> ast.FunctionDef | None:
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or 0)
    ]
    return min(functions, key=lambda f: (f.end_lineno or 0) - f.lineno, default=None)


def test_every_error_is_made_from_a_message() -> None:
    """The rule: the first argument of every call of a GradcliError class is a message
    (:func:`_is_marked`), so that it can be shown in Bengali; an English literal or
    f-string there fails."""
    helpers = _returns_message()
    bad = []
    calls = 0
    for path, tree in sources().items():
        if path.name == "errors.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in ERROR_CLASSES:
                calls += 1
                first = node.args[0] if node.args else None
                if first is None or not _is_marked(first, _enclosing(tree, node.lineno), helpers):
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert calls > 250
    assert not bad, "errors made from unmarked text (wrap it in msg(...)):\n" + "\n".join(bad)


#: calls that put their first argument in front of a person: table headers and cells,
#: titles, captions, lines on the console or stderr, progress-bar labels, warnings, notes
SHOWN = {
    "add_column", "Table", "Text", "_text", "_say", "print", "write", "TextColumn", "append",
    "add_task", "_input_table",
}  # fmt: skip
#: modules whose output is drawn for a person (JSON writers are not)
DRAWING = {
    "present.py", "present_analysis.py", "reporting.py", "layout.py", "repl.py", "terminal.py",
    "streams.py",
    "arguments.py", "cli.py", "cli_analysis.py", "lazy.py",
}  # fmt: skip
_WORD = re.compile(r"[A-Za-z]{3,}")


def _words(expr: ast.expr) -> list[str]:
    """The words of a literal's text, but rich's ``{task.fields}`` templates and attributes
    of code such as ``.grad``."""
    text = re.sub(r"\{[^{}]*\}|\.\w+", " ", _literal_text(expr))
    return _WORD.findall(text)


def _literal_text(expr: ast.expr) -> str:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        return " ".join(_literal_text(v) for v in expr.values)
    if isinstance(expr, ast.BinOp):
        return _literal_text(expr.left) + " " + _literal_text(expr.right)
    return ""


def test_no_english_words_are_drawn_without_the_marker() -> None:
    """In the modules that draw for a person, a header, title, caption, cell or line given
    as a literal (or f-string) holding a word fails: it must go through ``tr``/``msg``.
    ``warnings``/``notes`` lists take messages everywhere in gradcli."""
    bad = []
    for path, tree in sources().items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node) in SHOWN):
                continue
            name = _called(node)
            target = ast.unparse(node.func)
            if name == "append" and not re.search(r"\b(warnings|notes)\.append$", target):
                continue
            if name != "append" and path.name not in DRAWING:
                continue
            if name == "write" and not target.startswith("sys.std"):
                continue
            shown = node.args[:1] + [
                k.value for k in node.keywords if k.arg in ("title", "caption")
            ]
            for expr in shown:
                words = _words(expr)
                if words:
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(expr)[:80]}")
    assert not bad, "text drawn without tr()/msg():\n" + "\n".join(bad)
