"""The message catalogs' tools (docs/i18n.md, "Adding a message"), kept out of
:mod:`gradcli.i18n` so that start-up does not load them.

``python -m gradcli.catalogs --update`` brings the source's new messages into every
``locale/*/LC_MESSAGES/gradcli.po`` (with empty translations); ``--compile`` compiles each
.po to the .mo that ``gettext`` reads (the standard library reads .mo files but cannot
write them; no ``msgfmt`` or Babel is needed); ``--check`` says whether the committed .mo
files are what their .po files compile to.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path
from typing import Any

from .i18n import DOMAIN, LOCALE_DIR


def placeholders(template: str) -> set[str]:
    """The ``{name}`` fields of a template (their names, without conversion or format)."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


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


if __name__ == "__main__":  # python -m gradcli.catalogs --update | --compile | --check
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
        sys.exit("usage: python -m gradcli.catalogs --update | --compile | --check")
