"""How the command line's words become a command's arguments: gradcli's click group (an
expression may begin with ``-``, an option typo is reported as one, the streams are guarded
while a command runs), its help layout, and the options read into a program, its inputs and
names, handed to ``gradcli.analysis`` (docs/cli.md, "Options and arguments", "Help and
completion").

The readers (``inputs``, ``io``, ``language``) and ``analysis`` are imported inside the
functions, so that ``gradcli --help`` starts fast.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from gettext import gettext
from pathlib import Path
from typing import Any

import typer

from . import i18n, options, streams
from .i18n import msg
from .reporting import _click_error


class _Commands(MutableMapping[str, Any]):
    """A group's commands by name, each made into a click command by typer when it is first
    looked up. Typer makes every command of an app at every start, reading each function's
    signature and type hints (13 ms for gradcli's); one run needs one command, ``--help``
    and completion all of them."""

    __slots__ = ("_made", "_registered", "_settings")

    def __init__(self, registered: list[Any], settings: dict[str, Any]) -> None:
        self._registered = {
            info.name or typer.main.get_command_name(info.callback.__name__): info
            for info in registered
        }
        self._made: dict[str, Any] = {}
        self._settings = settings

    def __getitem__(self, name: str) -> Any:
        command = self._made.get(name)
        if command is None:
            info = self._registered[name]  # KeyError: no such command
            command = typer.main.get_command_from_info(info, **self._settings)
            self._made[name] = command
        return command

    def __setitem__(self, name: str, command: Any) -> None:
        self._registered.pop(name, None)
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        if self._made.pop(name, None) is None:
            del self._registered[name]
        else:
            self._registered.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._registered), **dict.fromkeys(self._made)})

    def __len__(self) -> int:
        return len(self._registered.keys() | self._made.keys())

    def summary(self, name: str) -> str | None:
        """The one-line help ``--help`` lists for a command not made yet, from its
        registration, as click gives a command's ``short_help``; None otherwise."""
        info = self._registered.get(name) if name not in self._made else None
        if info is None or not info.short_help or info.hidden or info.deprecated:
            return None
        return inspect.cleandoc(info.short_help).strip()


def click_group(app: typer.Typer) -> Any:
    """``app`` as the click group that ``app()`` would run, with its commands made when
    they are first looked up (:class:`_Commands`) instead of all at every start."""
    import copy

    registered = app.registered_commands
    bare = copy.copy(app)  # app itself unchanged: another thread may be making its group
    bare.registered_commands = []
    group: Any = typer.main.get_command(bare)
    settings = {
        "pretty_exceptions_short": app.pretty_exceptions_short,
        "rich_markup_mode": app.rich_markup_mode,
    }
    group.commands = _Commands(registered, settings)
    return group


class _Group(typer.core.TyperGroup):
    """gradcli's command group: an expression may begin with ``-``, click's own usage errors
    are reported like every other gradcli error (one line, JSON with ``--json``), and the
    standard streams are guarded while a command runs (:class:`streams.guarded`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands in the order of ``options.SHORT_HELP`` (not the order in which the
        modules that define them registered them)."""
        order = list(options.SHORT_HELP)
        names = list(self.commands)  # typer asks for each command too (items())
        return sorted(names, key=lambda n: order.index(n) if n in order else len(order))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands and their one-line help, as typer lists them, read from their
        registrations: making every command to ask it would cost ``--help`` 13 ms."""
        commands = self.commands
        if not isinstance(commands, _Commands):
            return super().format_commands(ctx, formatter)
        shown: list[tuple[str, Any]] = []
        for name in self.list_commands(ctx):
            text = commands.summary(name)
            if text is None:
                cmd = self.get_command(ctx, name)
                if cmd is None or cmd.hidden:
                    continue
                shown.append((name, cmd))
            else:
                shown.append((name, text))
        if shown:
            limit = formatter.width - 6 - max(len(name) for name, _ in shown)
            rows = [(n, t if isinstance(t, str) else t.get_short_help_str(limit)) for n, t in shown]
            with formatter.section(gettext("Commands")):
                formatter.write_dl(rows)
        return None

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        given = sys.argv[1:] if args is None else list(args)
        # the environment's language until --lang says otherwise; the caller's afterwards
        language = i18n.activate(None)
        try:
            with streams.guarded() as stdout:
                try:
                    code = self._run(given, prog_name, complete_var, **extra)
                    sys.stdout.flush()  # what is still buffered fails here, not at exit
                except streams.OutputError:
                    code = 1  # reported just below
                if stdout.error is not None and not stdout.reported:
                    code = streams.output_failed(stdout)
        finally:
            i18n.restore(language)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def _run(
        self, given: list[str], prog_name: str | None, complete_var: str | None, **extra: Any
    ) -> Any:
        try:
            return super().main(
                args=_expressions_as_arguments(given, self),
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except Exception as exc:  # click's errors (typer may bundle its own click)
            if not hasattr(exc, "format_message") or not hasattr(exc, "exit_code"):
                raise
            return _click_error(exc, json_out="--json" in given)
        # an OutputError goes on: Group.main reports it


class _Command(typer.core.TyperCommand):
    """A command whose ``--help`` lists its options under headings: "Options", then each
    option's ``rich_help_panel`` ("Limits"). Typer draws panels only in rich-formatted help,
    which costs start-up time (see ``app``); this is the same grouping in click's plain
    text (docs/cli.md, "Help and completion")."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                heading = "Arguments"
            else:
                heading = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(heading, []).append(record)
        for heading, records in sections.items():
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)


#: a word that can only be an option: ``--json``, ``--jsn``, ``--precission=3``
_OPTION_WORD = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*(=.*)?\Z", re.DOTALL)


def _expressions_as_arguments(args: list[str], group: Any = None) -> list[str]:
    """Let an expression that begins with ``-`` (``"-x**2"``) be an argument, not an option,
    and let an option typo be one (docs/cli.md, "Options and arguments").

    Options the command knows are kept (with their values). The first positional argument
    (EXPR) is the one place a ``-`` may begin something that is not an option: it is moved
    after ``--``, where click reads it as an argument, unless it is an option word
    (``--jsn``) that is not ``--`` and a name given a value (``--x`` with ``x=0`` is minus
    minus x). Anywhere else a ``-`` begins an option (NAME=VALUE never does, and a
    negative value is written ``x=-3``), so an unknown one stays where click reports it,
    with the nearest options: "No such option: --jsn (Possible options: --json)".
    """
    i = next((k for k, a in enumerate(args) if not a.startswith("-")), None)
    if i is None:
        return args
    if group is None:
        from .cli import app

        group = click_group(app)
    command = group.get_command(None, args[i])
    if command is None:
        return args
    takes_value: dict[str, bool] = {"-h": False, "--help": False}
    program_file: set[str] = set()  # -f FILE: then no argument is EXPR
    for p in command.params:  # duck-typed: typer may bundle its own click
        if getattr(p, "param_type_name", "") == "option":
            for opt in (*p.opts, *p.secondary_opts):
                takes_value[opt] = not p.is_flag and not p.count
            if p.name == "file":
                program_file.update(p.opts)
    options: list[str] = []
    positional: list[str] = []
    expr_next = True  # the next positional argument is EXPR
    # names given values (x=0): `--x` before `x=0` is the expression minus minus x
    bound = {a.split("=", 1)[0] for a in args[i + 1 :] if "=" in a and not a.startswith("-")}
    j = i + 1
    while j < len(args):
        a = args[j]
        if a == "--":
            positional += args[j + 1 :]
            break
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a.startswith("-") and name in takes_value:
            options.append(a)
            expr_next = expr_next and name not in program_file
            if takes_value[name] and "=" not in a and j + 1 < len(args):
                options.append(args[j + 1])
                j += 1
        elif (
            a.startswith("-")
            and a != "-"
            and (not expr_next or (_OPTION_WORD.match(a) and a.lstrip("-") not in bound))
        ):
            options.append(a)  # an unknown option: click says so
        else:
            positional.append(a)
            expr_next = False
        j += 1
    head = [*args[: i + 1], *options]
    return [*head, "--", *positional] if positional else head


def _split_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


#: whether the command runs in a process of its own (the console script), whose
#: process-wide settings are its to choose; not when ``cli.main(argv)`` is called in a
#: process that goes on
OWN_PROCESS = False

#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def _mallopt(*settings: tuple[int, int]) -> None:
    """Set glibc's allocator parameters; where the allocator is not glibc's (musl, other
    systems), nothing changes."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    for param, value in settings:
        mallopt(param, value)


def may_use_dask(args: list[str]) -> bool:
    """Whether a command line may evaluate on Dask: it names the backend, a Zarr store or
    an ``.npy`` file (one large enough is read a chunk at a time). A look at the words
    only, before any is parsed, for :func:`one_heap`, which must come first; wrong either
    way, it costs a little time, never a result."""
    return any("dask" in a or ".zarr" in a or ".npy" in a for a in args)


def _threads_by_default() -> None:
    """Dask's threads for whatever the command computes without naming a scheduler (the
    corners of a lazy input it shows): named by their function, as ``gradcli.lazy``
    names them, Dask does not import ``distributed`` (0.2 s) to look for a cluster's
    client first. The command's process only: Dask's configuration is the process's."""
    import dask
    import dask.threaded

    dask.config.set(scheduler=dask.threaded.get)


def one_heap() -> None:
    """All of the command's threads allocate from one heap, so that what one frees another
    can use (:func:`keep_freed_memory`). Only before any thread has allocated (before
    NumPy starts its threads): a thread keeps the heap it first used. And one BLAS thread
    per Dask thread, as Dask advises, unless ``OPENBLAS_NUM_THREADS`` says otherwise: the
    chunks are Dask's parallelism, and BLAS's own threads, waiting for work that did not
    come, took 3% of W10's time."""
    _mallopt((_M_ARENA_MAX, 1))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_memory() -> None:
    """Let the command's process keep the memory of freed chunks for the next ones, when it
    evaluates on Dask's threads (docs/dask.md, "Chunks"). A chunk of 32 MiB is at glibc's
    largest threshold for memory of its own (a fresh ``mmap``, given back when freed), and
    memory fresh from the system cost more than computing in it: on the benchmark
    machine, ~8 ms of the kernel's time for each 32 MiB, 2.4 to 5 s of W10's. Kept, a
    freed chunk is written into again by the next: chunks up to 1 GiB from the heap
    (:func:`one_heap`), none of it given back while the command runs."""
    _mallopt((_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, 1 << 30))


@dataclass
class Scale:
    """A command's ``--backend``, ``--chunks`` and ``--scheduler`` (docs/dask.md): how its
    input files are read and where its program is evaluated."""

    backend: options.BackendName | None
    chunks: str | None
    scheduler: str | None
    #: whether the evaluation wrote ``--save out.zarr`` itself, a chunk at a time
    saved: bool = False

    @property
    def chunked(self) -> str:
        """How input files are read (``inputs.read_value``): a chunk at a time with
        ``--backend dask``, never with ``--backend numpy``, when they must by default."""
        from .inputs import ALWAYS, AUTO, NEVER

        if self.backend is None:
            return AUTO
        return ALWAYS if self.backend is options.BackendName.dask else NEVER

    @property
    def chunk_bytes(self) -> int | None:
        if self.chunks is None:
            return None
        from .lazy import parse_chunks, require_dask

        require_dask()
        return parse_chunks(self.chunks)

    def on_dask(self, inputs: dict[str, Any], quiet: bool) -> bool:
        """Whether to evaluate on Dask: asked for, or an input was read a chunk at a time
        (a Zarr store, a large ``.npy`` file), which is said on stderr. On Dask's threads
        in the command's own process, its allocator then keeps freed chunks' memory
        (:func:`keep_freed_memory`) and Dask's threads are its default scheduler
        (:func:`_threads_by_default`)."""
        dask = self._on_dask(inputs, quiet)
        if dask and self.scheduler is None and OWN_PROCESS:
            keep_freed_memory()
            _threads_by_default()
        return dask

    def _on_dask(self, inputs: dict[str, Any], quiet: bool) -> bool:
        if self.backend is options.BackendName.dask:
            return True
        from .autograd.backend import OTHER_ARRAYS

        lazy = [n for n, v in inputs.items() if isinstance(v, OTHER_ARRAYS)]
        if self.backend is None and lazy:
            if not quiet:
                from . import present

                names = ", ".join(f"`{n}`" for n in lazy)
                said = (
                    i18n.tr(
                        "evaluated with --backend dask: {names} is read a chunk at a time",
                        names=names,
                    )
                    if len(lazy) == 1
                    else i18n.tr(
                        "evaluated with --backend dask: {names} are read a chunk at a time",
                        names=names,
                    )
                )
                present.make_console(stderr=True).print(
                    f"{i18n.tr('note')}: {said}",
                    markup=False,
                    soft_wrap=True,
                )
            return True
        if self.chunks is not None or self.scheduler is not None:
            from .errors import InputError

            raise InputError(msg("--chunks and --scheduler go with --backend dask"))
        return False

    def evaluate(
        self, kwargs: dict[str, Any], limited: dict[str, Any], save: Path | None, quiet: bool
    ) -> Any:
        """The evaluation on Dask: into ``--save out.zarr`` a chunk at a time when that is
        where the result goes, else into memory; a progress bar on a terminal's stderr."""
        from . import lazy
        from .io import check_save_path

        where: dict[str, Any] = {"chunks": self.chunk_bytes, "scheduler_address": self.scheduler}
        with self.progress(quiet):
            if save is not None and check_save_path(str(save)) == ".zarr":
                self.saved = True
                return lazy.evaluate_into(str(save), **kwargs, **limited, **where)
            return lazy.evaluate(**kwargs, **limited, **where)

    def progress(self, quiet: bool) -> Any:
        """A progress bar of the chunks Dask's threads compute, on a terminal's stderr."""
        from . import lazy, present

        show = not quiet and sys.stderr.isatty() and self.scheduler is None
        return lazy.progress(show, present.make_console(stderr=True))

    def analysis_options(self, inputs: dict[str, Any], quiet: bool) -> dict[str, Any]:
        """The keyword arguments that put a ``gradcli.analysis`` function on Dask when the
        command evaluates there (:meth:`on_dask`: asked for, or an input read a chunk at a
        time, said on stderr); none on NumPy, whose path is as it always was."""
        if not self.on_dask(inputs, quiet):
            return {}
        return {"backend": "dask", "chunks": self.chunk_bytes, "scheduler": self.scheduler}


def _program_and_inputs(
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs: str | None,
    dtype: options.DType,
    seed: int,
    limits: options.Limits,
    scale: Scale | None = None,
) -> tuple[str, dict[str, Any]]:
    from .inputs import NEVER, read_program_and_inputs

    return read_program_and_inputs(
        expr, values, file, inputs, dtype=dtype.value, seed=seed,
        max_elements=limits.elements, max_program_chars=limits.program_chars,
        max_stdin_bytes=limits.stdin_bytes,
        chunked=NEVER if scale is None else scale.chunked,
        chunk_bytes=None if scale is None else scale.chunk_bytes,
    )  # fmt: skip


def _analyse(
    command: str,
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs: str | None,
    wrt: str | None,
    dtype: options.DType,
    seed: int,
    limits: options.Limits,
    scale: Scale | None = None,
    quiet: bool = False,
    **command_options: Any,
) -> Any:
    """Run ``gradcli.analysis.<command>`` on the command line's program and inputs; on Dask
    when ``scale`` says so (docs/dask.md), with a progress bar of the chunks computed
    (``optimize`` has its own of the steps: its passes are computed a step at a time)."""
    import contextlib

    from . import analysis

    text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits, scale)
    on_dask = {} if scale is None else scale.analysis_options(given, quiet)
    shown: Any = contextlib.nullcontext()
    if on_dask and command != "optimize" and scale is not None:
        shown = scale.progress(quiet)
    run = getattr(analysis, command)
    with shown:
        return run(
            text, given, wrt=_split_names(wrt), dtype=dtype.value, seed=seed,
            max_elements=limits.elements, max_program_chars=limits.program_chars,
            **on_dask, **command_options,
        )  # fmt: skip


def _check_save(save: Path | None) -> None:
    """Refuse a ``--save`` file whose extension names no format before any work is done."""
    if save is not None:
        from .io import check_save_path

        check_save_path(str(save))


def _function_names(incomplete: str) -> list[str]:
    """Shell completion of ``functions NAME``: the language's function names (and aliases).
    Only a completion request pays for loading the registry (docs/cli.md)."""
    from .language import FUNCTIONS

    return sorted(name for name in FUNCTIONS if name.startswith(incomplete))
