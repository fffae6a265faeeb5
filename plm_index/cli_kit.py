"""The toolkit every `plm` command shares, whichever package adds it: the consoles, the
common options (`--config`, `--set`, `--dataset`, `--index`), log lines, opening a job from
those options, tables and timings, and plain help. The index commands (`plm_index.commands`),
`plm_eval`'s and `plm_serve`'s commands import it; none imports another's commands."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from plm_core.settings import load_settings
from plm_index.job import Job

# soft_wrap: long lines (paths, errors) stay one line when piped or logged, so they grep.
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="Job config (TOML).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a config value: query.retrieve.fuser.rank_base=1")
]
DatasetOpt = Annotated[
    Path | None, typer.Option(help="BEIR-layout dataset folder (default: the config's job.dataset).")
]
IndexOpt = Annotated[
    Path | None, typer.Option("--index", help="Index folder (default: PLM_DATA_DIR/<job>[-<dataset>]).")
]


class _LogLine(logging.Formatter):
    """`warning: message`, as the CLI prints `error: message` (not `WARNING:plm_plugins...:`);
    the logger's name only at DEBUG, where it helps."""

    def format(self, record: logging.LogRecord) -> str:
        where = f" [{record.name}]" if record.levelno <= logging.DEBUG else ""
        line = f"{record.levelname.lower()}{where}: {record.getMessage()}"
        return line + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


def setup_logging(level: str) -> None:
    """The commands' log output on stderr, once per process."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_LogLine())
        logging.basicConfig(level=level, handlers=[handler])


def open_job(config: Path, overrides: list[str] | None, dataset: Path | None, index: Path | None) -> Job:
    if config is None:  # older typers let a required option through as None
        raise typer.BadParameter("the job config is required", param_hint="'--config' / '-c'")
    settings = load_settings()
    setup_logging(settings.log_level)
    return Job.from_config(config, overrides or [], index_dir=index, dataset=dataset, settings=settings)


def print_table(console: Console, table: Any) -> None:
    """A rich table printed whole. On a terminal rich fits it to the window; anywhere else
    (a pipe, a log file, a job in the background) rich assumes 80 columns and cuts the
    columns past them (p-values and MRR were lost), so there it is as wide as its cells need."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement

    need = Measurement.get(console, console.options.update_width(100_000), table).maximum
    if need <= console.width:
        console.print(table)
        return
    before = console._width  # print(width=) only narrows: widen the console for this table
    console.width = need
    try:
        console.print(table)
    finally:
        console._width = before


def print_timings(what: str, timings: dict[str, Any]) -> None:
    if timings:
        out.print(f"{what} time: " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()), highlight=False)


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


class PlainHelpGroup(TyperGroup):
    """The `plm` command group, built with every package's commands, its help made plain."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_help(self)
