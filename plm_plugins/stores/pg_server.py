"""`plm pg start|stop|status --data DIR`: a local Postgres 16 with pgvector from the
`pgserver` wheel, for a laptop or CI without a system install.

The server listens on a Unix socket inside DIR (no TCP port, so nothing outside this
machine reaches it) and keeps running after the command returns; `start` prints the DSN
to put in `[store] dsn` or PLM_DATABASE_URL.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from plm import MissingDependencyError, PlmUserError

pg_app = typer.Typer(help="Run a local Postgres (with pgvector) for the postgres store.", no_args_is_help=True)
DataOption = Annotated[Path, typer.Option("--data", help="The server's data folder (created on first start).")]


def _pgserver() -> Any:
    try:
        import pgserver
    except ImportError:
        raise MissingDependencyError("pgserver (a Postgres in a wheel)", "postgres") from None
    return pgserver


def _check_folder(data: Path) -> Path:
    data = data.expanduser().resolve()
    if data.exists() and not data.is_dir():
        raise PlmUserError(f"{data} is a file: --data takes a folder")
    if len(str(data)) > 80:  # the socket lives in it, and socket paths are limited to 107 bytes
        raise PlmUserError(f"--data {data} is {len(str(data))} characters long: use a path of at most 80")
    return data


def server(data: Path) -> Any:
    """Start (or find running) the server for `data`; returns pgserver's handle."""
    data = _check_folder(data)
    data.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR notice
        try:
            return _pgserver().get_server(data, cleanup_mode=None)
        except Exception as err:  # noqa: BLE001 - pgserver raises plain errors with the server log
            raise PlmUserError(f"cannot start Postgres in {data}: {str(err).strip()[:500]}") from None


@pg_app.command("start")
def start(data: DataOption) -> None:
    """Start the server (or find it running) and print its DSN."""
    handle = server(data)
    handle.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    typer.echo(handle.get_uri())


@pg_app.command("status")
def status(data: DataOption) -> None:
    """Print the DSN of the server running in DATA, or exit 1 if none runs."""
    data = _check_folder(data)
    if not (data / "postmaster.pid").exists():
        typer.echo(f"no Postgres is running in {data}", err=True)
        raise typer.Exit(1)
    typer.echo(server(data).get_uri())


@pg_app.command("stop")
def stop(
    data: DataOption,
    delete: Annotated[bool, typer.Option("--delete", help="Also delete the data folder.")] = False,
) -> None:
    """Stop the server running in DATA (and with --delete remove its data)."""
    data = _check_folder(data)
    if (data / "postmaster.pid").exists():
        handle = server(data)
        handle.cleanup_mode = "delete" if delete else "stop"
        handle.cleanup()
    elif delete and data.exists():
        shutil.rmtree(data)
    typer.echo(f"stopped {data}" + (" and deleted its data" if delete else ""))
