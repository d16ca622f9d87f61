"""The interface's language: English (the default) or Bengali (docs/i18n.md).

A user-visible message is made with :func:`msg`: a :class:`Message` is a ``str`` whose
value is the English text, so everything that stores, compares or writes it (JSON output
above all: JSON never changes with the language) keeps working, and which remembers its
template and arguments, so that the presentation layer can show it in the active language
with :func:`translate` at the moment it is drawn. :func:`tr` is the same for text that is
shown at once (table headers, captions). The first argument of ``msg``/``tr`` is always a
string literal: it is the message's id in the catalog ``locale/bn/LC_MESSAGES/gradcli.po``
(compiled to ``gradcli.mo`` by ``python -m gradcli.catalogs --compile``).

The active language lives in a context variable (never a global a thread could change
under another): the command line sets it (:func:`activate`) from ``--lang`` or the
environment (:func:`env_language`); the Python API leaves it English. ``gettext`` is
imported, and the catalog read, only the first time a Bengali text is asked for. The
catalogs' tools (compiling, updating) are :mod:`gradcli.catalogs`, outside start-up.
"""

from __future__ import annotations

import os
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any

#: the languages of the interface; the first is the default
LANGUAGES = ("en", "bn")
DOMAIN = "gradcli"
LOCALE_DIR = Path(__file__).parent / "locale"

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

    def __reduce__(self) -> Any:
        """A message crosses processes (``batch --jobs``, Dask workers) with its English
        text as it is; an argument that is not text, a number or a tuple goes as its
        ``str`` (what a message shows of it), so that it can always be sent."""
        import numbers

        def plain(v: Any) -> Any:
            return v if isinstance(v, str | numbers.Number | tuple | None) else str(v)

        return (_rebuilt, (str(self), self.template, {k: plain(v) for k, v in self.args.items()}))


def _rebuilt(text: str, template: str, args: dict[str, Any]) -> Message:
    """A :class:`Message` as it was sent: ``text`` not formatted again."""
    self = str.__new__(Message, text)
    self.template = template
    self.args = args
    return self


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
