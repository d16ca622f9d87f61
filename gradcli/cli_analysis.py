"""The command line's analysis commands: ``check``, ``jacobian``, ``hessian`` (and
``hessian --vector``), ``jvp`` and ``optimize``, registered on :data:`gradcli.cli.app` when
that module loads. Each reads its program and inputs as ``eval`` does
(:func:`arguments._analyse`), calls :mod:`gradcli.analysis` and prints through
:mod:`gradcli.present`; what they compute: docs/commands.md.
"""

from __future__ import annotations

import signal
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from . import options
from .arguments import Scale, _analyse, _check_save, _program_and_inputs
from .cli import _command
from .i18n import msg
from .reporting import _emit, _failures
from .terminal import _interrupted, _StepProgress, _StopOnCtrlC


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
    backend: options.BackendOpt = None,
    chunks: options.ChunksOpt = None,
    scheduler: options.SchedulerOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    scale = Scale(backend, chunks, scheduler)
    with _failures(json_out, debug):
        from . import present_analysis

        result = _analyse(
            "check", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet,
            eps=eps, rtol=rtol, atol=atol, order=order, max_passes=max_passes,
        )  # fmt: skip
        _emit(
            result, json_out, quiet, lambda console: present_analysis.print_check(result, console)
        )
        if not result.ok:
            raise typer.Exit(1)


class _JacobianMode(str, Enum):
    reverse = "reverse"
    forward = "forward"
    auto = "auto"


@_command("jacobian", options.JACOBIAN_HELP, no_args_is_help=True)
def jacobian_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    mode: Annotated[
        _JacobianMode,
        typer.Option(
            "--mode",
            help="reverse: a backward pass per output element; forward: a pass per input "
            "element; auto: forward when the inputs have fewer elements than the output.",
        ),
    ] = _JacobianMode.reverse,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    full: options.FullOpt = False,
    save: options.SaveOpt = None,
    backend: options.BackendOpt = None,
    chunks: options.ChunksOpt = None,
    scheduler: options.SchedulerOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    scale = Scale(backend, chunks, scheduler)
    with _failures(json_out, debug):
        from . import present_analysis

        _check_save(save)
        result = _analyse(
            "jacobian", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet,
            max_passes=max_passes, mode=mode.value,
        )  # fmt: skip
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
            lambda console: present_analysis.print_jacobian(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip


def _named_values(
    option: str, args: list[str] | None, dtype: options.DType, seed: int, limits: options.Limits
) -> dict[str, Any]:
    """The values of a repeated ``OPTION NAME=VALUE`` (``--tangent``, ``--vector``), each
    VALUE read as an input's is (docs/commands.md, "The program and its inputs")."""
    from .errors import InputError
    from .inputs import read_value

    found: dict[str, Any] = {}
    for arg in args or []:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise InputError(
                msg("{option} expects NAME=VALUE, got {arg!r}", option=option, arg=arg[:60])
            )
        if name in found:
            raise InputError(msg("{option} gives `{name}` twice", option=option, name=name[:40]))
        found[name] = read_value(
            text, f"{option} {name}", dtype=dtype.value, seed=seed,
            max_elements=limits.elements, max_program_chars=limits.program_chars,
            max_stdin_bytes=limits.stdin_bytes,
        )  # fmt: skip
    return found


@_command("hessian", options.HESSIAN_HELP, no_args_is_help=True)
def hessian_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    wrt: options.WrtOpt = None,
    vector: Annotated[
        list[str] | None,
        typer.Option(
            "--vector",
            metavar="NAME=VALUE",
            help="Print the Hessian-vector product H v instead, without forming H; once per "
            "input (the others' parts of v are zero).",
        ),
    ] = None,
    dtype: options.DTypeOpt = options.DType.float64,
    seed: options.SeedOpt = 0,
    json_out: options.JsonOpt = False,
    precision: options.PrecisionOpt = 4,
    save: options.SaveOpt = None,
    backend: options.BackendOpt = None,
    chunks: options.ChunksOpt = None,
    scheduler: options.SchedulerOpt = None,
    max_elements: options.MaxElementsOpt = options.DEFAULT_MAX_ELEMENTS,
    max_program_chars: options.MaxProgramCharsOpt = options.DEFAULT_MAX_PROGRAM_CHARS,
    max_stdin_bytes: options.MaxStdinBytesOpt = options.DEFAULT_MAX_STDIN_BYTES,
    max_passes: options.MaxPassesOpt = options.DEFAULT_MAX_PASSES,
    quiet: options.QuietOpt = False,
    debug: options.DebugOpt = False,
    lang: options.LangOpt = None,
) -> None:
    limits = options.Limits(max_elements, max_program_chars, max_stdin_bytes)
    scale = Scale(backend, chunks, scheduler)
    with _failures(json_out, debug):
        from . import present_analysis

        _check_save(save)
        if vector:  # H v (docs/commands.md, "hessian")
            vec = _named_values("--vector", vector, dtype, seed, limits)
            hv = _analyse(
                "hvp", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet,
                vector=vec, max_passes=max_passes,
            )  # fmt: skip
            if save is not None:
                from .io import save_result

                arrays = {"output": hv.value, **{f"hvp_{n}": h for n, h in hv.hvp.items()}}
                save_result(str(save), hv.to_json, arrays)
            _emit(
                hv, json_out, quiet,
                lambda console: present_analysis.print_hvp(hv, console, precision=precision),
            )  # fmt: skip
            return
        result = _analyse(
            "hessian", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet,
            max_passes=max_passes,
        )  # fmt: skip
        if save is not None:  # before printing: a failed save must not follow a success
            from .io import save_result

            save_result(
                str(save), result.to_json, {"output": result.value, "hessian": result.hessian}
            )
        _emit(
            result, json_out, quiet,
            lambda console: present_analysis.print_hessian(result, console, precision=precision),
        )  # fmt: skip


@_command("jvp", options.JVP_HELP, no_args_is_help=True)
def jvp_command(
    expr: options.ExprArg = None,
    values: options.ValuesArg = None,
    file: options.FileOpt = None,
    inputs: options.InputsOpt = None,
    tangent: Annotated[
        list[str] | None,
        typer.Option(
            "--tangent",
            metavar="NAME=VALUE",
            help="The tangent of input NAME, of its shape; once per input that moves.",
        ),
    ] = None,
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
        from .analysis import jvp

        text, given = _program_and_inputs(expr, values, file, inputs, dtype, seed, limits)
        tangents = _named_values("--tangent", tangent, dtype, seed, limits)
        result = jvp(
            text, given, tangents, dtype=dtype.value, seed=seed,
            max_elements=limits.elements, max_program_chars=limits.program_chars,
        )  # fmt: skip
        _emit(
            result, json_out, quiet,
            lambda console: present_analysis.print_jvp(
                result, console, precision=precision, full=full
            ),
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

        with _StopOnCtrlC() as ctrl_c, _StepProgress(steps, shown=not quiet) as on_step:
            result = _analyse(
                "optimize", expr, values, file, inputs, wrt, dtype, seed, limits, scale, quiet,
                optimizer=optimizer.value, steps=steps, lr=lr, momentum=momentum,
                clip_norm=clip_norm, norm_type=norm_type, clip_value=clip_value,
                zero_grad=zero_grad, max_history=max_history, on_step=on_step,
                tol=tol, stop=ctrl_c.requested,
            )  # fmt: skip
        if ctrl_c.asked and not result.interrupted:  # after the last step: at once, as anywhere
            _interrupted(signal.SIGINT, None)
        if result.interrupted:
            from .i18n import tr

            said = tr("interrupted after {n} of {steps} steps", n=result.steps_run, steps=steps)
            sys.stderr.write(said + "\n")
        _emit(
            result, json_out, quiet,
            lambda console: present_analysis.print_optimization(
                result, console, precision=precision, full=full
            ),
        )  # fmt: skip
        if result.interrupted:  # the result so far is printed; the status says it is partial
            raise typer.Exit(130)
