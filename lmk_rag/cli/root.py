"""The root ``lmk-rag`` Typer app that every command module adds its commands to, and its one error path.

Every command fails the same way: one ``error: ...`` line on stderr and exit status 1 (2 for a bad command line),
whatever went wrong: a typed :class:`~lmk_rag.errors.LmkRagError`, a bad option, or an unexpected exception
(then the line names its type). ``lmk-rag --debug COMMAND ...`` shows the traceback instead.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from lmk_rag.errors import LmkRagError, needs_extra

# A command is the process's last work, and the interpreter's finalization then runs the cycle collector over every
# object left: after torch and transformers load, that is ~1 s of every query's exit (benchmarks/cold_start.py).
# Frozen objects are skipped (refcounting still frees what is not in a cycle); registered at import, this runs after
# the exit handlers of the libraries imported later.
atexit.register(gc.freeze)


class CliGroup(TyperGroup):
    """The command group: usage errors and failures become one ``error:`` line (``--debug``: a traceback)."""

    debug = False

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit with its status (1, silently, when the reader of its output has gone, as
        ``lmk-rag query ... | head -1`` leaves it: Python's recipe for a closed pipe)."""
        try:
            status = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at the final flush
            sys.exit(1)
        except typer.TyperException as error:  # a bad command line (typer's usage errors)
            if type(error).__name__ == "NoArgsIsHelpError":  # ``lmk-rag`` alone: the help is printed, nothing failed
                sys.exit(0)
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            typer.echo(f"error: {message}", err=True)
            sys.exit(getattr(error, "exit_code", 2))
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A command, its on/off options shown as flags in its ``--help`` (see :func:`show_flags_as_flags`)."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            show_flags_as_flags(command, ctx)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """``lmk-rag --help``, its on/off options shown as flags."""
        show_flags_as_flags(self, ctx)
        super().format_help(ctx, formatter)

    def invoke(self, ctx: Any) -> Any:
        """Run a command; turn any failure into one ``error:`` line and status 1 (a missing optional package: the
        line names the extra to install)."""
        try:
            with needs_extra("this command"):
                return super().invoke(ctx)
        except (typer.TyperException, typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt, BrokenPipeError):
            raise
        except LmkRagError as error:
            if CliGroup.debug:
                raise
            typer.echo(f"error: {error}", err=True)
        except BaseException as error:  # also the engine's panics (pyo3's PanicException is a BaseException)
            if CliGroup.debug:
                raise
            hint = "rerun with lmk-rag --debug for the traceback"
            typer.echo(f"error: {type(error).__name__}: {error} ({hint})", err=True)
        raise typer.Exit(1)


def show_flags_as_flags(command: Any, ctx: Any) -> None:
    """Show a command's on/off options (``--sync``, ``--bm25/--no-bm25``, ``--help``) as flags in its ``--help``:
    typer's rich help labels every option with its type, ``<bool>`` for a flag, as if it took a value; an empty
    metavar leaves a flag's type column blank.
    """
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


app = typer.Typer(
    name="lmk-rag",
    cls=CliGroup,
    help="Landmark-pooling embeddings and two-stage Qdrant search for long documents.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


@app.callback()
def main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one error line.")) -> None:
    """Landmark-pooling embeddings and two-stage Qdrant search for long documents."""
    CliGroup.debug = debug
    # A command prints its own progress: no "Loading weights" bar of transformers each time a model opens (unless
    # the user's environment sets it; read when huggingface_hub is first imported, which no command has done yet).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
