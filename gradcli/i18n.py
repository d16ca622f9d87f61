"""The interface's language: English (the default) or Bengali (docs/i18n.md).

A user-visible message is made with :func:`msg`: a :class:`Message` is a ``str`` whose
value is the English text, so everything that stores, compares or writes it (JSON output
above all: JSON never changes with the language) keeps working, and which remembers its
template and arguments, so that the presentation layer can show it in the active language
with :func:`translate` at the moment it is drawn. :func:`tr` is the same for text that is
shown at once (table headers, captions). The first argument of ``msg``/``tr`` is always a
string literal: it is the message's id in the catalog ``locale/bn/LC_MESSAGES/gradcli.po``
(compiled to ``gradcli.mo`` by ``python -m gradcli.i18n --compile``).

The active language lives in a context variable (never a global a thread could change
under another): the command line sets it (:func:`activate`) from ``--lang`` or the
environment (:func:`env_language`); the Python API leaves it English. ``gettext`` is
imported, and the catalog read, only the first time a Bengali text is asked for.
"""

from __future__ import annotations

import os
import sys
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any

#: the languages of the interface; the first is the default
LANGUAGES = ("en", "bn")
DOMAIN = "gradcli"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"

_active: ContextVar[str] = ContextVar("gradcli_language", default="en")
_catalogs: dict[str, Any] = {}


class Message(str):
    """A user-visible message: its ``str`` value is the English text; ``template`` (the
    catalog id) and ``args`` let :func:`translate` say it in another language."""

    template: str
    args: dict[str, Any]

    def __new__(cls, template: str, args: dict[str, Any]) -> Message:
        self = super().__new__(cls, template.format(**args) if args else template)
        self.template = template
        self.args = args
        return self

    def __reduce__(self) -> Any:  # a Message crosses processes (Dask workers) as itself
        return (Message, (self.template, self.args))


def msg(template: str, /, **args: Any) -> Message:
    """A message to show later in the active language. ``template`` is a literal with
    ``{name}`` placeholders (``str.format`` syntax, ``{name!r}`` and ``{x:g}`` included)
    filled from ``args``; without ``args`` it is taken as it is (braces and all)."""
    return Message(template, args)


def tr(template: str, /, **args: Any) -> str:
    """``msg(template, **args)`` said now, in the active language: for text drawn at once."""
    return translate(Message(template, args))


def language() -> str:
    """The active language: ``"en"`` or ``"bn"``."""
    return _active.get()


def activate(lang: str | None) -> Token[str]:
    """Make ``lang`` (``"en"``, ``"bn"``; ``None``: from the environment) the language of
    what this context shows from now on; :func:`restore` with the token given back undoes
    it."""
    return _active.set(env_language() if lang is None else lang)


def restore(token: Token[str]) -> None:
    """The language as it was before the :func:`activate` that gave ``token``."""
    _active.reset(token)


def env_language(environ: Any = None) -> str:
    """The language the environment asks for, with gettext's precedence: the first
    non-empty of ``LANGUAGE`` (its first entry), ``LC_ALL``, ``LC_MESSAGES``, ``LANG``
    decides; Bengali when it starts with ``bn`` (``bn_BD.UTF-8``, ``bn_IN``, ``bn``)."""
    env = os.environ if environ is None else environ
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var, "").split(":")[0].strip()
        if value:
            return "bn" if value.lower().startswith("bn") else "en"
    return "en"


def _catalog(lang: str) -> Any:
    """The ``gettext`` translations of ``lang``, read once (a missing catalog: English)."""
    if lang not in _catalogs:
        import gettext

        _catalogs[lang] = gettext.translation(
            DOMAIN, localedir=str(LOCALE_DIR), languages=[lang], fallback=True
        )
    return _catalogs[lang]


def translate(text: Any, lang: str | None = None) -> str:
    """``text`` in ``lang`` (default: the active language). A :class:`Message` is looked up
    in the catalog by its template and filled with its arguments (those that are messages
    translated too); any other text is returned as it is. Numbers keep ASCII digits."""
    lang = language() if lang is None else lang
    if not isinstance(text, Message) or lang == "en":
        return str(text)
    said = _catalog(lang).gettext(text.template)
    if not text.args:
        return str(said)
    args = {k: translate(v, lang) if isinstance(v, Message) else v for k, v in text.args.items()}
    try:
        return str(said.format(**args))
    except (KeyError, IndexError, ValueError):  # a broken translation: the English text
        return str(text)


def placeholders(template: str) -> set[str]:
    """The ``{name}`` fields of a template (their names, without conversion or format)."""
    import string

    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


# ---- catalogs: .po (source, committed) -> .mo (compiled, committed, shipped) ----------


def _unquote(line: str) -> str:
    import ast

    return str(ast.literal_eval(line))


def read_po(path: Path) -> dict[str, str]:
    """The ``msgid -> msgstr`` entries of a .po file (the header entry ``""`` included;
    fuzzy entries and comments ignored; only the subset of the format gradcli writes)."""
    entries: dict[str, str] = {}
    msgid: list[str] | None = None
    msgstr: list[str] | None = None
    target: list[str] | None = None
    fuzzy = False

    def flush() -> None:
        nonlocal msgid, msgstr, fuzzy
        if msgid is not None and msgstr is not None and not fuzzy:
            entries["".join(msgid)] = "".join(msgstr)
        msgid, msgstr, fuzzy = None, None, False

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#,") and "fuzzy" in line:
            flush()
            fuzzy = True
        elif line.startswith("#") or not line:
            if msgstr is not None:
                flush()
        elif line.startswith("msgid "):
            if msgstr is not None:
                flush()
            msgid, target = [_unquote(line[6:])], None
            target = msgid
        elif line.startswith("msgstr "):
            msgstr = [_unquote(line[7:])]
            target = msgstr
        elif line.startswith('"') and target is not None:
            target.append(_unquote(line))
        else:
            raise ValueError(f"{path}: cannot read the line {raw!r}")
    flush()
    return entries


def mo_bytes(entries: dict[str, str]) -> bytes:
    """A GNU .mo file of ``entries`` (what ``msgfmt`` writes, without its hash table):
    empty translations left out, so that they fall back to the English text."""
    import struct

    kept = sorted((k, v) for k, v in entries.items() if v)
    ids = [k.encode("utf-8") for k, _ in kept]
    strs = [v.encode("utf-8") for _, v in kept]
    n = len(kept)
    header = 7 * 4
    id_table = header
    str_table = id_table + 8 * n
    data = str_table + 8 * n
    offsets: list[int] = []
    blob = b""
    for s in ids + strs:
        offsets += [len(s), data + len(blob)]
        blob += s + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, n, id_table, str_table, 0, data)
    out += struct.pack(f"<{4 * n}I", *offsets)
    return out + blob


def compile_catalogs(check: bool = False) -> list[Path]:
    """Compile every ``locale/*/LC_MESSAGES/gradcli.po`` to its ``.mo``; with ``check``,
    write nothing and return the .mo files that differ from what the .po gives."""
    stale = []
    for po in sorted(LOCALE_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        mo = po.with_suffix(".mo")
        data = mo_bytes(read_po(po))
        if not mo.exists() or mo.read_bytes() != data:
            stale.append(mo)
            if not check:
                mo.write_bytes(data)
    return stale


def extract(root: Path = LOCALE_DIR.parent) -> dict[str, dict[str, Any]]:
    """Every message of the source under ``root``: the literal first argument of each
    ``msg``/``tr`` call → the files it is in, and whether it is filled from arguments."""
    import ast

    found: dict[str, dict[str, Any]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            f, first = node.func, node.args[0]
            called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if (
                called in ("msg", "tr")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                entry = found.setdefault(first.value, {"files": [], "format": False})
                where = path.relative_to(root.parent).as_posix()
                if where not in entry["files"]:
                    entry["files"].append(where)
                entry["format"] |= bool(node.keywords)
    return found


def _po_string(keyword: str, text: str) -> str:
    def quoted(part: str) -> str:
        escaped = part.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
        return '"' + escaped.replace("\n", "\\n") + '"'

    if "\n" not in text.rstrip("\n"):
        return f"{keyword} {quoted(text)}\n"
    lines = [line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    return f'{keyword} ""\n' + "".join(quoted(line) + "\n" for line in lines if line)


def update_po(po: Path) -> list[str]:
    """Rewrite ``po`` with the source's messages in the source's order, keeping every
    translation it has; a new message gets an empty one. Returns the new msgids."""
    old = read_po(po)
    header = po.read_text(encoding="utf-8").split('msgid ""', 1)[0]
    entries = [header + 'msgid ""\n' + _po_string("msgstr", old.get("", ""))]
    new = []
    for msgid, where in extract().items():
        if msgid not in old:
            new.append(msgid)
        flags = "#, python-brace-format\n" if where["format"] else ""
        entries.append(
            "".join(f"#: {f}\n" for f in where["files"]) + flags
            + _po_string("msgid", msgid) + _po_string("msgstr", old.get(msgid, ""))
        )  # fmt: skip
    po.write_text("\n".join(entries), encoding="utf-8")
    return new


if __name__ == "__main__":  # python -m gradcli.i18n --update | --compile | --check
    if sys.argv[1:] == ["--update"]:
        for po in sorted(LOCALE_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
            for msgid in update_po(po):
                print(f"{po}: new, to translate: {msgid!r}")
    elif sys.argv[1:] == ["--compile"]:
        for path in compile_catalogs():
            print(f"wrote {path}")
    elif sys.argv[1:] == ["--check"]:
        stale = compile_catalogs(check=True)
        for path in stale:
            print(f"out of date: {path}")
        sys.exit(1 if stale else 0)
    else:
        sys.exit("usage: python -m gradcli.i18n --update | --compile | --check")
