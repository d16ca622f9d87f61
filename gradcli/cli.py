"""The command line: options (:mod:`gradcli.options`) in, calls to ``api`` and ``present`` out.

Imports of NumPy and the engine happen inside the commands, so ``gradcli --help`` starts
fast. Every failure ends in :func:`_fail`: one line on stderr, the exit code of its kind
(docs/json.md, "Exit codes and error kinds"), and in ``--json`` mode an error object on
stdout. The streams themselves are guarded while a command runs (:class:`streams.guarded`):
a stdout that cannot be written ends the command with one line and exit 1
(:func:`streams.output_failed`); a stderr that cannot be written is ignored. How options,
help and completion behave: docs/cli.md, "Options and arguments", "Help and completion".
"""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from . import __version__, options, streams


class _Group(typer.core.TyperGroup):
    """gradcli's command group: an expression may begin with ``-``, click's own usage errors
    are reported like every other gradcli error (one line, JSON with ``--json``), and the
    standard streams are guarded while a command runs (:class:`streams.guarded`)."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        given = sys.argv[1:] if args is None else list(args)
        with streams.guarded() as stdout:
            try:
                code = self._run(given, prog_name, complete_var, **extra)
                sys.stdout.flush()  # what is still buffered fails here, not at exit
            except streams.OutputError:
                code = 1  # reported just below
            if stdout.error is not None and not stdout.reported:
                code = streams.output_failed(stdout)
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


app = typer.Typer(
    cls=_Group,
    # plain help: rich-formatted help imports markdown and pygments (+100 ms per --help)
    rich_markup_mode=None,
    help=options.HELP,
    # --install-completion, --show-completion (docs/cli.md, "Help and completion")
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _command(name: str, help: str, **settings: Any) -> Callable[[Any], Any]:
    """``app.command`` with gradcli's help layout and the command's one-sentence summary."""
    return app.command(
        name, cls=_Command, help=help, short_help=options.SHORT_HELP[name], **settings
    )


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """gradcli: values and gradients of tensor expressions."""


@_command("eval", options.EVAL_HELP, no_args_is_help=True)
def eval_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    grad_output: options.GradOutputOpt = None,
    clip_norm: options.ClipNormOpt = None,
    norm_type: options.NormTypeOpt = "2",
    clip_value: options.ClipValueOpt = None,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    full: options.FullOpt = False,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE",
            help="Write the result: .npz (output and gradients), .json or .npy (one array).",
        ),
    ] = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug) as state:
        from . import present
        from .api import evaluate, request_id, request_kwargs
        from .errors import InputError
        from .inputs import read_stdin, read_value
        from .io import arrays_to_save, check_save_path, dumps, parse_json_text, save_result

        if save is not None:  # an unknown extension costs nothing (docs/cli.md, "Files")
            check_save_path(str(save))
        if expr == "-" and file is None:
            if values:
                raise InputError("`eval -` reads one JSON request from stdin: give no NAME=VALUE")
            request = parse_json_text(read_stdin(limits.stdin_bytes), what="request")
            state.id = request_id(request)
            kwargs = request_kwargs(request)
        else:
            text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits)
            upstream_grad = None
            if grad_output is not None:
                upstream_grad = read_value(
                    grad_output, "grad_output", dtype=dtype.value, seed=seed,
                    max_elements=limits.elements, max_program_chars=limits.program_chars,
                )  # fmt: skip
            kwargs = {
                "expr": text,
                "inputs": given,
                "wrt": _split_names(wrt),
                "grad_output": upstream_grad,
                "clip_norm": clip_norm,
                "norm_type": norm_type,
                "clip_value": clip_value,
                "dtype": dtype.value,
                "seed": seed,
            }
        result = evaluate(**kwargs, max_elements=max_elements, max_program_chars=max_program_chars)
        if save is not None:  # before printing: a failed save must not follow a success
            save_result(str(save), result.to_json, arrays_to_save(result))
        _report(result, quiet=quiet, table=not json_out)
        if json_out:
            _print_line(dumps(result.to_json()))
        else:
            present.print_result(result, present.make_console(), precision=precision, full=full)


@_command("batch", options.BATCH_HELP)
def batch_command(
    source: Annotated[
        str, typer.Argument(metavar="[FILE|-]", help="NDJSON requests (default: stdin).")
    ] = "-",
    accumulate: Annotated[
        bool,
        typer.Option(
            "--accumulate",
            help="Also sum each input's gradient over all requests; a final summary line.",
        ),
    ] = False,
    max_line_bytes: options.MaxLineBytesOpt = options.DEFAULT_MAX_LINE_BYTES,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    with _failures(True, debug):
        import gc

        from .batch import run_batch
        from .inputs import open_requests

        gc.enable()  # a stream of any length: cycles (an error's traceback) must be freed
        stream, total = open_requests(source)
        failed = run_batch(
            stream,
            _print_line,
            accumulate=accumulate,
            max_line_bytes=max_line_bytes,
            max_elements=max_elements,
            max_program_chars=max_program_chars,
            progress_total=None if quiet or source == "-" or not _batch_shows_progress() else total,
            debug=debug,
        )
        if failed:
            raise typer.Exit(1)


def _program_and_inputs(
    expr: str | None,
    values: list[str] | None,
    file: Path | None,
    inputs: str | None,
    dtype: options.DType,
    seed: int,
    limits: options.Limits,
) -> tuple[str, dict[str, Any]]:
    from .inputs import read_program_and_inputs

    return read_program_and_inputs(
        expr, values, file, inputs, dtype=dtype.value, seed=seed,
        max_elements=limits.elements, max_program_chars=limits.program_chars,
        max_stdin_bytes=limits.stdin_bytes,
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
    **command_options: Any,
) -> Any:
    """Run ``gradcli.analysis.<command>`` on the command line's program and inputs."""
    from . import analysis

    text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits)
    run = getattr(analysis, command)
    return run(
        text, given, wrt=_split_names(wrt), dtype=dtype.value, seed=seed,
        max_elements=limits.elements, max_program_chars=limits.program_chars, **command_options,
    )  # fmt: skip


def _check_save(save: Path | None) -> None:
    """Refuse a ``--save`` file whose extension names no format before any work is done."""
    if save is not None:
        from .io import check_save_path

        check_save_path(str(save))


def _emit(result: Any, json_out: bool, quiet: bool, show: Callable[[Any], None]) -> None:
    """The result's warnings (and its notes, without a table) on stderr, then the result as
    one line of JSON, or drawn by ``show`` on the console."""
    _report(result, quiet=quiet, table=not json_out)
    if json_out:
        from .io import dumps

        _print_line(dumps(result.to_json()))
    else:
        from . import present

        show(present.make_console())


def _report(result: Any, *, quiet: bool, table: bool) -> None:
    """The result's warnings on stderr, and its notes (the implicit sum, clipping, a thinned
    history) when no table is printed: a table's caption says them, and a thing is said
    once. ``--quiet``: neither (docs/commands.md, "Notes and warnings")."""
    notes = [] if table else getattr(result, "notes", [])
    if (result.warnings or notes) and not quiet:
        from . import present

        present.print_warnings(result.warnings, present.make_console(stderr=True), notes=notes)


@_command("check", options.CHECK_HELP, no_args_is_help=True)
def check_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    eps: Annotated[
        float, typer.Option("--eps", metavar="EPS", help="Finite-difference step.")
    ] = 1e-6,
    rtol: Annotated[
        float, typer.Option("--rtol", metavar="RTOL", help="Relative tolerance.")
    ] = 1e-5,
    atol: Annotated[
        float, typer.Option("--atol", metavar="ATOL", help="Absolute tolerance.")
    ] = 1e-8,
    order: Annotated[
        int,
        typer.Option("--order", min=1, max=2, metavar="1|2", help="1: gradients, 2: the Hessian."),
    ] = 1,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse(
            "check", expr, values, file, inputs, wrt, dtype, seed, limits,
            eps=eps, rtol=rtol, atol=atol, order=order, max_passes=max_passes,
        )  # fmt: skip
        _emit(result, json_out, quiet, lambda console: present.print_check(result, console))
        if not result.ok:
            raise typer.Exit(1)


@_command("jacobian", options.JACOBIAN_HELP, no_args_is_help=True)
def jacobian_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    full: options.FullOpt = False,
    save: options.SaveOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        _check_save(save)
        result = _analyse(
            "jacobian", expr, values, file, inputs, wrt, dtype, seed, limits, max_passes=max_passes
        )
        if save is not None:  # before printing: a failed save must not follow a success
            from .io import save_result

            save_result(
                str(save),
                result.to_json,
                {
                    "output": result.value,
                    **{f"jacobian_{n}": j for n, j in result.jacobian.items()},
                },
            )
        _emit(
            result, json_out, quiet,
            lambda console: present.print_jacobian(result, console, precision=precision, full=full),
        )  # fmt: skip


@_command("hessian", options.HESSIAN_HELP, no_args_is_help=True)
def hessian_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    save: options.SaveOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        _check_save(save)
        result = _analyse(
            "hessian", expr, values, file, inputs, wrt, dtype, seed, limits, max_passes=max_passes
        )
        if save is not None:  # before printing: a failed save must not follow a success
            from .io import save_result

            save_result(
                str(save), result.to_json, {"output": result.value, "hessian": result.hessian}
            )
        _emit(
            result, json_out, quiet,
            lambda console: present.print_hessian(result, console, precision=precision),
        )  # fmt: skip


@_command("graph", options.GRAPH_HELP, no_args_is_help=True)
def graph_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    dot: Annotated[
        bool,
        typer.Option(
            "--dot",
            help="Write Graphviz DOT text (drawing it needs Graphviz's dot program).",
        ),
    ] = False,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse("graph", expr, values, file, inputs, wrt, dtype, seed, limits)
        if dot and not json_out:
            _report(result, quiet=quiet, table=False)
            sys.stdout.write(result.to_dot())
            return
        _emit(
            result, json_out, quiet,
            lambda console: present.print_graph(result, console, precision=precision),
        )  # fmt: skip


@_command("optimize", options.OPTIMIZE_HELP, no_args_is_help=True)
def optimize_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    steps: Annotated[
        int, typer.Option("--steps", min=0, metavar="N", help="Most steps taken.")
    ] = 100,
    tol: Annotated[
        float | None,
        typer.Option(
            "--tol",
            metavar="TOL",
            help="Stop once a step changes the loss by less than TOL.",
        ),
    ] = None,
    lr: Annotated[float, typer.Option("--lr", metavar="LR", help="Learning rate.")] = 0.01,
    optimizer: Annotated[
        options.OptimizerName, typer.Option("--optimizer", help="sgd, momentum or adam.")
    ] = options.OptimizerName.sgd,
    momentum: Annotated[
        float,
        typer.Option("--momentum", metavar="M", help="Momentum of the momentum optimizer."),
    ] = 0.9,
    clip_norm: options.ClipNormOpt = None,
    norm_type: options.NormTypeOpt = "2",
    clip_value: options.ClipValueOpt = None,
    zero_grad: Annotated[
        bool,
        typer.Option(
            "--zero-grad/--no-zero-grad", help="Zero the gradients before each backward()."
        ),
    ] = True,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    full: options.FullOpt = False,
    max_history: options.MaxHistoryOpt = options.DEFAULT_MAX_HISTORY,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        with _StopOnCtrlC() as ctrl_c, _StepProgress(steps, shown=not quiet) as on_step:
            result = _analyse(
                "optimize", expr, values, file, inputs, wrt, dtype, seed, limits,
                optimizer=optimizer.value, steps=steps, lr=lr, momentum=momentum,
                clip_norm=clip_norm, norm_type=norm_type, clip_value=clip_value,
                zero_grad=zero_grad, max_history=max_history, on_step=on_step,
                tol=tol, stop=ctrl_c.requested,
            )  # fmt: skip
        if ctrl_c.asked and not result.interrupted:  # after the last step: at once, as anywhere
            _interrupted(signal.SIGINT, None)
        if result.interrupted:
            sys.stderr.write(f"interrupted after {result.steps_run} of {steps} steps\n")
        _emit(
            result, json_out, quiet,
            lambda console: present.print_optimization(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip
        if result.interrupted:  # the result so far is printed; the status says it is partial
            raise typer.Exit(130)


def _function_names(incomplete: str) -> list[str]:
    """Shell completion of ``functions NAME``: the language's function names (and aliases).
    Only a completion request pays for loading the registry (docs/cli.md)."""
    from .language import FUNCTIONS

    return sorted(name for name in FUNCTIONS if name.startswith(incomplete))


@_command("functions", options.FUNCTIONS_HELP)
def functions_command(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME]...",
            show_default=False,
            autocompletion=_function_names,
            help="Only these functions (a name or an alias); default: all.",
        ),
    ] = None,
    json_out: options.JsonOpt = False,
) -> None:
    with _failures(json_out, False):
        from . import present
        from .errors import InputError
        from .io import dumps
        from .language import FUNCTIONS, suggest

        if names:
            unknown = [n for n in names if n not in FUNCTIONS]
            if unknown:
                name = unknown[0]
                raise InputError(f"unknown function `{name}`{suggest(name, FUNCTIONS)}")
            chosen = [FUNCTIONS[n] for n in names]
        else:
            chosen = list(FUNCTIONS.values())
        unique = list({id(f): f for f in chosen}.values())  # an alias names its function
        if json_out:
            rows = [
                {"name": f.name, "aliases": list(f.aliases), "signature": f.signature,
                 "summary": f.summary, "derivative": f.derivative}
                for f in unique
            ]  # fmt: skip
            _print_line(dumps(rows))
            return
        present.print_functions(unique, present.make_console())


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class _State:
    id: Any = None


class _failures:
    """Context manager that turns any failure into an error's output and exit code
    (docs/json.md, "Error", "Exit codes and error kinds")."""

    def __init__(self, json_out: bool, debug: bool) -> None:
        self.json_out = json_out
        self.debug = debug
        self.state = _State()

    def __enter__(self) -> _State:
        return self.state

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        # an OutputError goes on to _Group.main: no error object could be written either
        if isinstance(exc, Exception) and not isinstance(exc, typer.Exit | streams.OutputError):
            _fail(exc, self.json_out, self.state.id, self.debug)


def _split_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


def _print_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _batch_shows_progress() -> bool:
    """batch's progress bar: on a terminal's stderr, and not when stdout is a terminal too,
    where the responses themselves show the progress and a bar would be drawn among them
    (docs/cli.md, "Streams")."""
    return sys.stderr.isatty() and not sys.stdout.isatty()


class _StepProgress:
    """optimize's progress bar on stderr, on a terminal only: steps done, the loss, time
    elapsed and time remaining (not with ``--quiet``). Nothing is written to stdout while it
    runs."""

    def __init__(self, steps: int, *, shown: bool = True) -> None:
        self.steps = steps
        self.shown = shown
        self.display: Any = None

    def __enter__(self) -> Callable[[int, float], None] | None:
        if not self.shown or self.steps < 2 or not sys.stderr.isatty():
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.display = streams.progress(
            TextColumn("optimizing"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        )  # fmt: skip
        task = self.display.add_task("optimize", total=self.steps, loss="")
        update = self.display.update

        def on_step(step: int, loss: float) -> None:
            update(task, completed=step, loss=f"{loss:.6g}")

        return on_step

    def __exit__(self, *exc: Any) -> None:
        if self.display is not None:
            self.display.stop()


class _StopOnCtrlC:
    """While optimize's steps run, a first Ctrl-C asks it to stop after the step under way,
    so that the result so far is printed (exit status 130); a second one, or one before the
    steps begin (reading the inputs), ends the command at once, as Ctrl-C does everywhere
    else (docs/cli.md, "optimize"). ``requested`` is what the steps ask before each one."""

    def __init__(self) -> None:
        self.asked = False
        self.stepping = False  # the steps have begun: they will see a request
        self.previous: Any = None

    def requested(self) -> bool:
        self.stepping = True
        return self.asked

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.asked or not self.stepping:
            _interrupted(signum, frame)
        self.asked = True

    def __enter__(self) -> _StopOnCtrlC:
        try:
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread (gradcli called by a program): not ours
            self.previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _fail(exc: BaseException, json_out: bool, request_id: Any, debug: bool) -> NoReturn:
    from . import present
    from .api import as_gradcli_error
    from .io import dumps

    if debug:
        raise exc
    err = as_gradcli_error(exc)
    console = present.make_console(stderr=True)
    lost: streams.OutputError | None = None
    if json_out:
        try:
            _print_line(dumps({"id": request_id, "error": err.to_json()}))
        except streams.OutputError as e:
            lost = e
        console.print(f"error ({err.kind}): {err.message}", markup=False, soft_wrap=True)
    else:
        present.print_error(err, console)
    if lost is not None:  # said as well; the exit code stays the error's
        streams.output_failed(sys.stdout)
    raise typer.Exit(err.exit_code)


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


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
        group = typer.main.get_command(app)
    command = getattr(group, "commands", {}).get(args[i])
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


def main(argv: list[str] | None = None) -> None:
    """The ``gradcli`` console script; ``main(argv)`` runs one command line in a process
    that goes on (and leaves the garbage collector as it found it)."""
    import gc

    # click turns Ctrl-C into "Aborted!" with exit 1; an interrupted command exits 130,
    # without a traceback (docs/json.md, "Exit codes and error kinds").
    signal.signal(signal.SIGINT, _interrupted)
    # One command, then the process ends. Parse trees and graphs hold no reference
    # cycles, so reference counting frees them; the cyclic collector would only rescan
    # them, again and again as they grow (0.4 s of a 100,000-term program), and once more
    # at exit. `batch`, which runs for as long as its stream, turns it back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        app(args=sys.argv[1:] if argv is None else list(argv), prog_name="gradcli")
    finally:
        if argv is None:  # the console script: the process ends now
            gc.freeze()
        elif collecting:  # called in a process that goes on
            gc.enable()


def _click_error(exc: Any, json_out: bool) -> int:
    """A bad option or argument, reported like every other gradcli error (kind ``input``)."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()  # `gradcli eval` alone: the help text
        return int(exc.exit_code)
    from .errors import InputError

    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    try:
        _fail(InputError(message), json_out, None, debug=False)
    except typer.Exit as done:
        return int(done.exit_code)


def _interrupted(signum: int, frame: Any) -> NoReturn:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130)
