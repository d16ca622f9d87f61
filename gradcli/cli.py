"""The command line: options (:mod:`gradcli.options`) in, calls to ``api`` and ``present`` out.

Imports of NumPy and the engine happen inside the commands, so ``gradcli --help`` starts
fast. How the words become arguments (an expression may begin with ``-``, an option typo is
reported as one) is :mod:`gradcli.arguments`; what a command prints, and its failures, is
:mod:`gradcli.reporting`: every failure ends in :func:`reporting._fail`, one line on stderr,
the exit code of its kind (docs/json.md, "Exit codes and error kinds"), and in ``--json``
mode an error object on stdout; progress bars and Ctrl-C are :mod:`gradcli.terminal`. The
streams themselves are guarded while a command runs (:class:`streams.guarded`): a stdout
that cannot be written ends the command with one line and exit 1
(:func:`streams.output_failed`); a stderr that cannot be written is ignored. How options,
help and completion behave: docs/cli.md, "Options and arguments", "Help and completion".
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from . import __version__, arguments, options
from .arguments import (
    Scale,
    _analyse,
    _Command,
    _function_names,
    _Group,
    _program_and_inputs,
    _split_names,
)
from .arguments import _expressions_as_arguments as _expressions_as_arguments  # tests, docs
from .i18n import msg
from .reporting import _emit, _failures, _print_line, _report
from .terminal import _batch_shows_progress, _interrupted

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
            help="Write the result: .npz or .zarr (output and gradients), .json or .npy "
            "(one array).",
        ),
    ] = None,
    backend: options.BackendOpt = None,
    chunks: options.ChunksOpt = None,
    scheduler: options.SchedulerOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    scale = Scale(backend, chunks, scheduler)
    with _failures(json_out, debug) as state:
        from . import present
        from .api import evaluate, request_id, request_kwargs
        from .errors import InputError
        from .inputs import read_stdin, read_value
        from .io import arrays_to_save, check_save_path, parse_json_text, save_result, write_json

        if save is not None:  # an unknown extension costs nothing (docs/cli.md, "Files")
            check_save_path(str(save))
        if expr == "-" and file is None:
            if values:
                raise InputError(
                    msg("`eval -` reads one JSON request from stdin: give no NAME=VALUE")
                )
            request = parse_json_text(read_stdin(limits.stdin_bytes), what="request")
            state.id = request_id(request)
            kwargs = request_kwargs(request)
        else:
            text, given = _program_and_inputs(
                expr, values, file, inputs, dtype, seed, limits, scale=scale
            )
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
        limited: dict[str, Any] = {
            "max_elements": max_elements,
            "max_program_chars": max_program_chars,
        }
        if scale.on_dask(kwargs["inputs"], quiet):
            result = scale.evaluate(kwargs, limited, save, quiet)
        else:
            result = evaluate(**kwargs, **limited)
        # saved before printing: a failed save must not follow a success
        if save is not None and not scale.saved:  # (on Dask, --save .zarr is written already)
            save_result(str(save), lambda: result.to_json(lists=False), arrays_to_save(result))
        _report(result, quiet=quiet, table=not json_out)
        if json_out:  # the arrays a piece at a time: they may be larger than memory
            write_json(result.to_json(lists=False), sys.stdout.write)
            _print_line("")
        else:
            present.print_result(result, present.make_console(), precision=precision, full=full)


@_command("batch", options.BATCH_HELP)
def batch_command(
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[FILE|-]...",
            show_default=False,
            help="NDJSON requests, several files read one after another (default: stdin).",
        ),
    ] = None,
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
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=1,
            metavar="N",
            help="Answer on N worker processes, in blocks of lines, with the output of one "
            "(1: in this process, as with --debug).",
        ),
    ] = 1,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            metavar="ADDRESS|local:N",
            help="Answer the files on a Dask cluster, in partitions the workers read "
            "themselves, with the output of one process: a distributed scheduler "
            "(tcp://host:8786) or N local worker processes (local:N).",
        ),
    ] = None,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    with _failures(True, debug):
        import gc

        from .errors import InputError

        sources = sources or ["-"]
        # docs/commands.md, "batch": --debug answers in this process, whatever else is asked
        cluster = None if debug else scheduler
        if scheduler is not None and jobs > 1:
            raise InputError(
                msg(
                    "--jobs and --scheduler cannot be used together: --jobs N answers on N "
                    "processes here, --scheduler on the cluster's workers"
                )
            )
        if cluster is not None and "-" in sources:
            raise InputError(
                msg(
                    "batch --scheduler cannot read stdin (-): the workers read their parts "
                    "of the files themselves; for a stream, answer on N processes with "
                    "--jobs N"
                )
            )
        shows_progress = not quiet and "-" not in sources and _batch_shows_progress()
        if jobs > 1 and not debug:  # before this process loads NumPy: see warm_up
            from .parallel import warm_up

            # (a progress bar is a thread of its own: no fork from this process after it)
            warm_up(
                jobs, (max_line_bytes, max_elements, max_program_chars, accumulate),
                own_process=arguments.OWN_PROCESS and not shows_progress,
            )  # fmt: skip
        gc.enable()  # a stream of any length: cycles (an error's traceback) must be freed
        if cluster is not None:
            from .cluster import run_on_cluster

            failed = run_on_cluster(
                cluster,
                sources,
                _print_line,
                accumulate=accumulate,
                max_line_bytes=max_line_bytes,
                max_elements=max_elements,
                max_program_chars=max_program_chars,
                progress=shows_progress,
            )
        else:
            from .batch import open_files, run_batch

            stream, total = open_files(sources)
            failed = run_batch(
                stream,
                _print_line,
                accumulate=accumulate,
                max_line_bytes=max_line_bytes,
                max_elements=max_elements,
                max_program_chars=max_program_chars,
                progress_total=total if shows_progress else None,
                debug=debug,
                jobs=jobs,
            )
        if failed:
            raise typer.Exit(1)


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
    backend: options.BackendOpt = None,
    chunks: options.ChunksOpt = None,
    scheduler: options.SchedulerOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    scale = Scale(backend, chunks, scheduler)
    with _failures(json_out, debug):
        from . import present_analysis

        result = _analyse(
            "graph", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet
        )
        if dot and not json_out:
            _report(result, quiet=quiet, table=False)
            sys.stdout.write(result.to_dot())
            return
        _emit(
            result, json_out, quiet,
            lambda console: present_analysis.print_graph(result, console, precision=precision),
        )  # fmt: skip


@_command("explain", options.EXPLAIN_HELP, no_args_is_help=True)
def explain_command(
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
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    with _failures(json_out, debug):
        from . import present_analysis
        from .inputs import read_value

        upstream_grad = None
        if grad_output is not None:
            upstream_grad = read_value(
                grad_output, "grad_output", dtype=dtype.value, seed=seed,
                max_elements=limits.elements, max_program_chars=limits.program_chars,
            )  # fmt: skip
        result = _analyse(
            "explain", expr, values, file, inputs, wrt, dtype, seed, limits, None, quiet,
            grad_output=upstream_grad, clip_norm=clip_norm, norm_type=norm_type,
            clip_value=clip_value,
        )  # fmt: skip
        _emit(
            result, json_out, quiet,
            lambda console: present_analysis.print_explain(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip


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
    lang: options.LangOpt = None,
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
                raise InputError(
                    msg(
                        "unknown function `{name}`{suggest}",
                        name=name,
                        suggest=suggest(name, FUNCTIONS),
                    )
                )
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


@_command("repl", options.REPL_HELP)
def repl_command(
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    precision: options.PrecisionOpt = 4,
    full: options.FullOpt = False,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    quiet: options.QuietOpt = False,
    lang: options.LangOpt = None,
) -> None:
    from . import repl

    settings = {"dtype": dtype.value, "seed": seed, "precision": precision, "full": full}
    limits = {"max_elements": max_elements, "max_program_chars": max_program_chars}
    code = repl.main(**settings, **limits, quiet=quiet)
    if code:
        raise typer.Exit(code)


# check, jacobian, hessian, jvp, optimize: registered on `app` as the module loads
from . import cli_analysis as _cli_analysis  # noqa: E402, F401

# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


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
    arguments.OWN_PROCESS = argv is None
    if arguments.OWN_PROCESS and arguments.may_use_dask(sys.argv[1:]):
        arguments.one_heap()  # before NumPy starts its threads: see one_heap
    given = sys.argv[1:] if argv is None else list(argv)
    if not given:  # `gradcli` alone: a session on a terminal, else the help (docs/repl.md)
        from .repl import on_a_terminal

        given = ["repl"] if on_a_terminal() else given
    try:
        arguments.click_group(app).main(args=given, prog_name="gradcli")
    finally:
        if argv is None:  # the console script: the process ends now
            gc.freeze()
        elif collecting:  # called in a process that goes on
            gc.enable()
