"""The hooks a plm plugin can implement (project name and entry-point group: `plm`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from plm_core.registry import Registry

hookspec = pluggy.HookspecMarker("plm")
hookimpl = pluggy.HookimplMarker("plm")


@hookspec
def plm_register_components(registry: Registry) -> None:
    """Register component classes with `registry.add(cls, name=...)`."""


@hookspec
def plm_register_commands(app: Any) -> None:
    """Add commands to the `plm` CLI: `app` is its typer.Typer (`app.command("name")(fn)`)."""
