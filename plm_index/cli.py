"""The `plm` command line: an empty typer app each installed package fills through
`plm_register_commands`. User errors print one message and exit 2; bugs keep their traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from plm_core import __version__
from plm_core.errors import PipelineError, PlmUserError
from plm_index.plugins import call_each, plugin_manager

# Spinning OpenBLAS threads starve torch's when a query is embedded next (72 -> 7 ms per
# query on 2 cores, BENCHMARKS.md 10); set before numpy loads, a user's own setting wins.
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
        print(f"plm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print plm's version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """plm: hybrid retrieval where a recipe is one TOML file."""


def register_commands(app: typer.Typer) -> None:
    """Let every installed plugin add its commands to `app` (`plm_register_commands`)."""
    pm, origin = plugin_manager()

    def undo_to(impl: Any) -> Callable[[], None]:  # the app's commands and groups, as now
        commands, groups = len(app.registered_commands), len(app.registered_groups)

        def undo() -> None:
            del app.registered_commands[commands:], app.registered_groups[groups:]

        return undo

    call_each(pm, "plm_register_commands", origin, undo_to, app=app)


def loaded_app() -> typer.Typer:
    """The `plm` app with every installed package's commands added (once per process)."""
    if not app.registered_commands:
        register_commands(app)
    return app


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # answered before the commands load (BENCHMARKS.md 18)
        print(f"plm {__version__}")
        sys.exit(0)
    try:
        rv = loaded_app()(standalone_mode=False, prog_name="plm")
    except (PipelineError, PlmUserError) as exc:
        if isinstance(exc, PipelineError) and not isinstance(exc.cause, PlmUserError):
            raise  # a bug in a stage: its traceback
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)
    except Exception as exc:
        # A usage error from click, or from the copy of click newer typers vendor: exit 2.
        if hasattr(exc, "exit_code") and hasattr(exc, "show") and type(exc).__module__.startswith(("click", "typer")):
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
    main()
