"""The `plm` command line: an empty typer app that every installed package fills through
`plm_register_commands` (the index commands come from `plm_index.commands`, evaluation from
`plm_eval`, the service from `plm_serve`). User errors print one message and exit 2; bugs
keep their traceback."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from plm_core.errors import PipelineError, PlmUserError
from plm_core.registry import register_commands

# numpy's OpenBLAS threads keep spinning after each product and starve torch's threads when
# a query is embedded next (72 ms -> 7 ms per query embedding on 2 cores, BENCHMARKS.md 10);
# plm's own BLAS work (one matrix-vector product per dense query) gains nothing from them.
# Set before anything loads numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

app = typer.Typer(
    help="plm: hybrid retrieval where a recipe is one TOML file.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every subcommand inherits it
)
err = Console(stderr=True, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from plm_core import __version__

        print(f"plm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print plm's version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """plm: hybrid retrieval where a recipe is one TOML file."""


def _is_click_error(exc: BaseException) -> bool:
    """A usage error from click, or from the copy of click that newer typers vendor."""
    return hasattr(exc, "exit_code") and hasattr(exc, "show") and type(exc).__module__.startswith(("click", "typer"))


def loaded_app() -> typer.Typer:
    """The `plm` app with every installed package's commands added (once per process)."""
    if not app.registered_commands:
        register_commands(app)
    return app


def plain_help(command: Any) -> Any:
    """Help as written, for every command any package adds: no rich markup (it ate words in
    [brackets]), metavars PATH, TEXT, PATHS... (newer typers print <list[Path]> and {paths})."""
    if not hasattr(typer.core.TyperArgument, "_usage_display_name"):
        return command  # typers before 0.2x print plain metavars and apply no markup to options
    command.rich_markup_mode = None
    for p in command.params:
        if p.metavar is not None:
            continue
        if p.param_type_name == "argument" and hasattr(p, "_usage_display_name"):
            p.metavar = p.name.upper() + ("..." if p.nargs != 1 else "")
            shown = p.metavar if p.required else f"[{p.metavar}]"
            p._usage_display_name = lambda shown=shown: shown
            p.display_type_rich = lambda ctx: None
        elif p.param_type_name == "option" and hasattr(p, "display_type") and not p.is_flag:
            label = p.display_type(None).strip("<>").removeprefix("list[").removesuffix("]")
            p.metavar = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER"}.get(label, label.upper())
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    return command


def main() -> None:
    try:
        rv = plain_help(typer.main.get_command(loaded_app()))(standalone_mode=False, prog_name="plm")
    except PipelineError as exc:
        if isinstance(exc.cause, PlmUserError):
            err.print(f"error: {exc}", highlight=False, markup=False)
            sys.exit(2)
        raise
    except PlmUserError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)
    except Exception as exc:
        if _is_click_error(exc):  # a usage error: click's short usage message, exit 2
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if type(exc).__name__ == "Abort" and type(exc).__module__.startswith(("click", "typer")):
            err.print("aborted")
            sys.exit(130)
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    # Run the importable module, so plugin commands that import plm_core.cli share its app.
    from plm_core import cli as _cli

    _cli.main()
