"""``python -m gradcli`` behaves as the ``gradcli`` command, and :func:`main` is that
command's entry point.

It installs the interrupt handler before the command line's modules are imported (typer,
rich and click take a tenth of a second): a Ctrl-C in that time ends the run as any
interrupted command does, ``interrupted`` on stderr and exit code 130, never a traceback
(docs/json.md, "Exit codes and error kinds"). ``cli.main`` then installs its own.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, NoReturn


def _interrupted_early(signum: int, frame: Any) -> NoReturn:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted_early)
    from .cli import main as run

    run()


if __name__ == "__main__":
    main()
