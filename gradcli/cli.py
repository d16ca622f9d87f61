"""The command line: options (:mod:`gradcli.options`) in, calls to ``api`` and ``present`` out.

Imports of NumPy and the engine happen inside the commands, so ``gradcli --help`` starts
fast. Every failure ends in :func:`_fail`: one line on stderr, the SPEC's exit code, and in
``--json`` mode an error object on stdout. The streams themselves are guarded while a
command runs (:class:`streams.guarded`): a stdout that cannot be written ends the command
in :func:`_output_failed` (one line, exit 1); a stderr that cannot be written is ignored.
"""

from __future__ import annotations

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


app = typer.Typer(
    cls=_Group,
    # plain help: rich-formatted help imports markdown and pygments (+100 ms per --help)
    rich_markup_mode=None,
    help=options.HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
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


@app.command("eval", help=options.EVAL_HELP, no_args_is_help=True)
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
        typer.Option("--save", metavar="FILE.npz", help="Write output and gradients (.npz)."),
    ] = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug) as state:
        from . import present
        from .api import evaluate, request_id, request_kwargs
        from .errors import InputError
        from .inputs import read_stdin, read_value
        from .io import arrays_to_save, dumps, parse_json_text, save_npz

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
            save_npz(str(save), arrays_to_save(result))
        present.print_warnings(result.warnings, present.make_console(stderr=True))
        if json_out:
            _print_line(dumps(result.to_json()))
        else:
            present.print_result(result, present.make_console(), precision=precision, full=full)


@app.command("batch", help=options.BATCH_HELP)
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
    max_line_bytes: Annotated[
        int, typer.Option("--max-line-bytes", min=1, help="Longest request line accepted.")
    ] = 16 * 2**20,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
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
            progress_total=total if source != "-" and sys.stderr.isatty() else None,
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


def _emit(result: Any, json_out: bool, show: Callable[[Any], None]) -> None:
    """The result's warnings on stderr, then the result as one line of JSON, or drawn by
    ``show`` on the console."""
    _print_warnings(result.warnings)
    if json_out:
        from .io import dumps

        _print_line(dumps(result.to_json()))
    else:
        from . import present

        show(present.make_console())


def _print_warnings(warnings: list[str]) -> None:
    if warnings:
        from . import present

        present.print_warnings(warnings, present.make_console(stderr=True))


@app.command("check", help=options.CHECK_HELP, no_args_is_help=True)
def check_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    eps: Annotated[float, typer.Option("--eps", help="Finite-difference step.")] = 1e-6,
    rtol: Annotated[float, typer.Option("--rtol", help="Relative tolerance.")] = 1e-5,
    atol: Annotated[float, typer.Option("--atol", help="Absolute tolerance.")] = 1e-8,
    order: Annotated[
        int, typer.Option("--order", min=1, max=2, help="1: gradients, 2: the Hessian.")
    ] = 1,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse(
            "check", expr, values, file, inputs, wrt, dtype, seed, limits,
            eps=eps, rtol=rtol, atol=atol, order=order, max_passes=max_passes,
        )  # fmt: skip
        _emit(result, json_out, lambda console: present.print_check(result, console))
        if not result.ok:
            raise typer.Exit(1)


@app.command("jacobian", help=options.JACOBIAN_HELP, no_args_is_help=True)
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
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse(
            "jacobian", expr, values, file, inputs, wrt, dtype, seed, limits, max_passes=max_passes
        )
        _emit(
            result, json_out,
            lambda console: present.print_jacobian(result, console, precision=precision, full=full),
        )  # fmt: skip


@app.command("hessian", help=options.HESSIAN_HELP, no_args_is_help=True)
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
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse(
            "hessian", expr, values, file, inputs, wrt, dtype, seed, limits, max_passes=max_passes
        )
        _emit(
            result, json_out,
            lambda console: present.print_hessian(result, console, precision=precision),
        )  # fmt: skip


@app.command("graph", help=options.GRAPH_HELP, no_args_is_help=True)
def graph_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    dot: Annotated[bool, typer.Option("--dot", help="Write Graphviz DOT text.")] = False,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        result = _analyse("graph", expr, values, file, inputs, wrt, dtype, seed, limits)
        if dot and not json_out:
            _print_warnings(result.warnings)
            sys.stdout.write(result.to_dot())
            return
        _emit(
            result, json_out,
            lambda console: present.print_graph(result, console, precision=precision),
        )  # fmt: skip


@app.command("optimize", help=options.OPTIMIZE_HELP, no_args_is_help=True)
def optimize_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    steps: Annotated[int, typer.Option("--steps", min=0, help="Number of steps.")] = 100,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 0.01,
    optimizer: Annotated[
        options.OptimizerName, typer.Option("--optimizer", help="sgd, momentum or adam.")
    ] = options.OptimizerName.sgd,
    momentum: Annotated[
        float, typer.Option("--momentum", help="Momentum of the momentum optimizer.")
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
    max_history: Annotated[
        int,
        typer.Option("--max-history", min=1, help="Most losses kept; more are evenly thinned."),
    ] = options.DEFAULT_MAX_HISTORY,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    debug: options.DebugOpt = False,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present

        with present.step_progress(steps) as on_step:
            result = _analyse(
                "optimize", expr, values, file, inputs, wrt, dtype, seed, limits,
                optimizer=optimizer.value, steps=steps, lr=lr, momentum=momentum,
                clip_norm=clip_norm, norm_type=norm_type, clip_value=clip_value,
                zero_grad=zero_grad, max_history=max_history, on_step=on_step,
            )  # fmt: skip
        _emit(
            result, json_out,
            lambda console: present.print_optimization(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip


@app.command("functions", help=options.FUNCTIONS_HELP)
def functions_command(json_out: options.JsonOpt = False) -> None:
    from . import present
    from .io import dumps
    from .language import FUNCTIONS

    unique = list({id(f): f for f in FUNCTIONS.values()}.values())
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
    """Context manager that turns any failure into SPEC's error output and exit code."""

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


def _expressions_as_arguments(args: list[str], group: Any = None) -> list[str]:
    """Let an expression that begins with ``-`` (``"-x**2"``) be an argument, not an option.

    Options the command knows are kept (with their values); everything else is moved after
    ``--``, where click reads it as a positional argument.
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
    for p in command.params:  # duck-typed: typer may bundle its own click
        if getattr(p, "param_type_name", "") == "option":
            for opt in (*p.opts, *p.secondary_opts):
                takes_value[opt] = not p.is_flag and not p.count
    options: list[str] = []
    positional: list[str] = []
    j = i + 1
    while j < len(args):
        a = args[j]
        if a == "--":
            positional += args[j + 1 :]
            break
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a.startswith("-") and name in takes_value:
            options.append(a)
            if takes_value[name] and "=" not in a and j + 1 < len(args):
                options.append(args[j + 1])
                j += 1
        else:
            positional.append(a)
        j += 1
    head = [*args[: i + 1], *options]
    return [*head, "--", *positional] if positional else head


def main(argv: list[str] | None = None) -> None:
    """The ``gradcli`` console script; ``main(argv)`` runs one command line in a process
    that goes on (and leaves the garbage collector as it found it)."""
    import gc
    import signal

    # click turns Ctrl-C into "Aborted!" with exit 1; SPEC wants 130 and no traceback.
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
