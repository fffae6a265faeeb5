"""Registers plm_serve's commands with the `plm` CLI (entry point `plm_serve`). The
modules import their heavy dependencies (FastAPI, watchfiles, mcp) only when run."""

from __future__ import annotations

import typer

from plm_core.hookspecs import hookimpl


@hookimpl
def plm_register_commands(app: typer.Typer) -> None:
    from plm_serve import mcp_server, server, watcher

    app.command("serve")(server.serve_command)
    app.command("watch")(watcher.watch_command)
    app.command("mcp")(mcp_server.mcp_command)
