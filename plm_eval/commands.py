"""Registers plm_eval's commands with the `plm` CLI and its `[job]` keys with the registry
(entry point `plm_eval`)."""

from __future__ import annotations

import typer

from plm_core.hookspecs import hookimpl
from plm_core.registry import Registry


@hookimpl
def plm_register_components(registry: Registry) -> None:
    from plm_eval.settings import EvalSettings

    registry.add_job_settings(EvalSettings)


@hookimpl
def plm_register_commands(app: typer.Typer) -> None:
    from plm_eval import adapt_command, eval_command, run_command, tune_command, validate_command

    app.command("run")(run_command.run)
    eval_command.register(app)
    validate_command.register(app)
    tune_command.register(app)
    adapt_command.register(app)
