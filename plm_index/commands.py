"""The index commands (`ingest`, `query`, `delete`, `status`, `index`, `config`, `plugins`),
added to the `plm` CLI through `plm_register_commands` as `plm_eval` and `plm_serve` add
theirs; the options and printers those packages share (`open_job`, `out`) are `cli_kit`'s."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from plm_core.config import JobConfig, StageSpec, load_job
from plm_core.errors import PlmUserError
from plm_core.hookspecs import hookimpl
from plm_core.settings import Settings, load_settings
from plm_index.cli_kit import (
    ConfigOpt,
    DatasetOpt,
    IndexOpt,
    PlainHelpGroup,
    SetOpt,
    err,
    open_job,
    out,
    print_timings,
    setup_logging,
)
from plm_index.job import Job
from plm_index.plugins import default_registry
from plm_index.search import no_match, query_payload
from plm_index.sources import failure_line

config_app = typer.Typer(help="Check job configs.", no_args_is_help=True)
plugins_app = typer.Typer(help="Registered components (`plm plugins show NAME` for one's config keys).")
index_app = typer.Typer(help="Inspect and rebuild an index.", no_args_is_help=True)


@plugins_app.callback(invoke_without_command=True)
def plugins(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List registered components: name, family, package, version, module."""
    if ctx.invoked_subcommand is None:
        _list_plugins(as_json)


@plugins_app.command("list")
def plugins_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The same list as `plm plugins` (the name `plm plugins list` was "No such command")."""
    _list_plugins(as_json)


def _list_plugins(as_json: bool) -> None:
    from plm_index.plugin_info import plugin_rows

    rows = plugin_rows(default_registry())
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    # Names are what users type: never cut. A table on a terminal, aligned columns otherwise.
    columns = ["name", "family", "package", "version", "module"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    for row in [dict(zip(columns, columns, strict=True)), *rows]:
        print("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())


@plugins_app.command("show")
def plugins_show(name: Annotated[str, typer.Argument(help="A registered name, e.g. bm25s (or family:name).")]) -> None:
    """A component's config keys: type, default, constraints and what each does."""
    from plm_index.plugin_info import render_show

    print(render_show(default_registry().get(name)))


def describe(job: JobConfig, resolved: Mapping[str, Any] | None = None) -> str:
    """The config as `plm config check` prints it: each table a line, nested ones indented;
    `resolved`: label -> the settings a built stage runs with, where they differ from its
    config (`resolved_config`)."""

    def stage(spec: StageSpec, indent: int) -> list[str]:
        params = (resolved or {}).get(spec.label) or spec.config.model_dump()
        params = {k: v for k, v in params.items() if k not in spec.nested}
        lines = [f"{'  ' * indent}{spec.label.rsplit('.', 1)[-1]}: {spec.use} ({spec.family}) {params}"]
        for value in spec.nested.values():
            for part in value.values() if isinstance(value, dict) else [value]:
                lines += stage(part, indent + 1)
        return lines

    out = [f"job {job.job.name!r} from {job.path}"] + ([f"  {job.job.description}"] if job.job.description else [])
    out += ["store:", *stage(job.store, 1)]
    if job.embedder:
        out += ["embedder:", *stage(job.embedder, 1)]
    if job.executor is not None:
        out += ["executor:", *stage(job.executor, 1)]
    for name, specs in (("index", job.index), ("query", job.query)):
        out.append(f"{name} pipeline:\n" + "\n".join(line for s in specs for line in stage(s, 1)))
    return "\n".join(out)


@config_app.command("check")
def config_check(file: Path, set_: SetOpt = None) -> None:
    """Validate a config and print the resolved pipelines; runs nothing."""
    setup_logging(load_settings().log_level)
    job = load_job(file, default_registry(), set_ or [])
    # Assemble every component (typed slots, pipeline types, cross-stage checks) without
    # opening anything or loading a model.
    built = Job(job, Path("(not opened)"), Settings(cache=False), default_registry()).built
    resolved = {label: r for label, stage in built.items() if (r := stage.resolved_config()) is not None}
    out.print(describe(job, resolved), highlight=False, markup=False)
    out.print(f"[green]ok[/green]: {file} is valid")


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders for the [index] loader.")],
    config: ConfigOpt,
    set_: SetOpt = None,
    index: IndexOpt = None,
    prune: Annotated[
        bool, typer.Option(help="Delete stored documents whose files are gone (or give other documents now).")
    ] = False,
    prune_unread: Annotated[
        bool,
        typer.Option(
            help="With --prune, also delete documents whose files still exist but are no longer read "
            "(the loader's pattern or exclude changed)."
        ),
    ] = False,
    force: Annotated[bool, typer.Option(help="Re-process every document, recomputing cached work.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    executor: Annotated[
        str | None, typer.Option(help="Where documents are processed: local (default) or ray ([executor] use).")
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="With --executor ray: the cluster, auto or HOST:PORT or ray://HOST:10001.")
    ] = None,
) -> None:
    """Sync an index with files: new and changed documents are indexed, unchanged ones
    skipped. Exits 1 when some files failed (the others are stored)."""
    set_ = list(set_ or [])
    if executor is not None:
        set_.append(f"executor.use={executor}")
    if address is not None:
        if executor is None:  # the executor's own config says whether it takes an address
            raise typer.BadParameter(
                "--address needs --executor ray (or another that takes an address)", param_hint="--address"
            )
        set_.append(f"executor.address={address}")
    job = open_job(config, set_, None, index)
    report = job.ingest(paths, force=force, prune=prune, prune_unread=prune_unread)
    if as_json:
        print(json.dumps({**report.as_dict(), "index_dir": str(job.index_dir)}, indent=1))
    else:
        _print_sync(report, job)
        tip = synthetic_tip(report, paths, config)
        if tip:
            out.print(tip, highlight=False, markup=False)
    if report.failed:
        raise typer.Exit(1)


def delete(
    doc_ids: Annotated[list[str], typer.Argument(help="Document ids to remove.")],
    config: ConfigOpt,
    set_: SetOpt = None,
    dataset: DatasetOpt = None,
    index: IndexOpt = None,
) -> None:
    """Remove documents (with their chunks and vectors) from an index. Exits 1 if an id is unknown."""
    job = open_job(config, set_, dataset, index)
    report = job.delete(doc_ids)
    missing = [i for i in doc_ids if i not in set(report.deleted)]
    n = len(report.deleted)
    out.print(
        f"deleted {n} document{'' if n == 1 else 's'} in {report.seconds:.1f}s; "
        f"{report.chunks} chunks left in {job.index_dir}",
        highlight=False,
        markup=False,
    )
    if missing:
        err.print(f"not found: {', '.join(missing)}", highlight=False, markup=False)
        raise typer.Exit(1)


# Documents a folder needs before `plm eval --synthetic` can tell recipes apart: fewer give
# too few queries (one per document at most) for a paired test to say much.
SYNTHETIC_TIP_DOCS = 200


def synthetic_tip(report: Any, paths: list[Path], config: Path | None) -> str:
    """A line suggesting `plm eval --synthetic` after an ingest that added documents to a folder
    big enough to evaluate on; "" otherwise (a sync with nothing new says nothing)."""
    total = len(report.added) + len(report.updated) + report.unchanged
    if not report.added or total < SYNTHETIC_TIP_DOCS or len(paths) != 1 or not paths[0].is_dir():
        return ""
    n = min(300, total // 2)
    cfg = f" -c {config}" if config is not None else ""
    return (
        f"tip: no judged queries? compare recipes on {n} queries made from these {total} documents: "
        f"plm eval{cfg} -c OTHER.toml --dataset {paths[0]} --corpus . --synthetic {n}"
    )


def _print_sync(report: Any, job: Job) -> None:
    out.print(report.summary(), highlight=False, markup=False)
    model = f" (model {report.model})" if report.model else ""  # BM25 alone embeds nothing
    out.print(f"index: {report.chunks} chunks in {job.index_dir}{model}", highlight=False, markup=False)
    for failure in report.failed:
        err.print(failure_line(failure), highlight=False, markup=False)
    for note in report.notes:
        err.print(note, highlight=False, markup=False)
    print_timings("ingest", report.timings)


def print_query_result(payload: dict[str, Any]) -> None:
    """The hit list `plm query` prints, from the JSON data (local or from a server)."""
    if payload.get("fired"):
        out.print(f"expanded ({', '.join(payload['fired'])}): {payload['expanded']}", highlight=False)
    # A list, not a table: ids and heading paths are long and must not be cut.
    for h in payload["hits"]:
        title = str(h["metadata"].get("title", ""))
        shown = f"  {escape(title)}" if title and title != h["doc_id"] else ""
        # Each retriever's rank and score: a fused score (RRF's 1/(k+rank) sums) is the same
        # for every rank-1 hit and means nothing to a reader; --json keeps it.
        srcs = ", ".join(f"{s} #{v['rank']} {v['score']:.3g}" for s, v in h["sources"].items())
        score = f"({escape(srcs)})" if srcs else f"{h['score']:.4f}"
        out.print(f"[bold]{h['rank']}.[/bold] [cyan]{escape(h['doc_id'])}[/cyan]{shown}  {score}", highlight=False)
        if h["heading_path"]:
            out.print("   " + " > ".join(h["heading_path"]), markup=False, highlight=False)
        if facts := _metadata_line(h["metadata"]):
            out.print("   " + facts, markup=False, highlight=False)
        out.print("   " + " ".join(h["text"].split())[:200], markup=False, highlight=False)
    if not payload["hits"]:
        out.print(payload.get("note") or no_match(payload.get("filters")), highlight=False, markup=False)


def _metadata_line(metadata: dict[str, Any], width: int = 60) -> str:
    """A hit's short metadata (a paper's year, authors, bibtex_key; a page's team, tags), one
    line; the loader's `path` and the title shown above are left out, long values cut."""

    def short(value: Any) -> str | None:
        if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
            value = ", ".join(map(str, value))
        if isinstance(value, (dict, list)) or value is None or value == "":
            return None
        text = " ".join(str(value).split())
        return text if len(text) <= width else text[: width - 3] + "..."

    pairs = [(k, short(v)) for k, v in metadata.items() if k not in ("path", "title")]
    return "; ".join(f"{k}: {v}" for k, v in pairs if v is not None)


ServerOpt = Annotated[
    str | None,
    typer.Option("--server", help="Ask a running `plm serve` at this URL (default: PLM_SERVER) instead of an index."),
]
WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait",
        metavar="SECONDS",
        min=0,
        help="With a server: wait up to this long for it to be ready (it may still be starting).",
    ),
]


def query(
    text: str,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Job config (TOML).")] = None,
    k: Annotated[int, typer.Option("-k", help="Hits to return.")] = 5,
    set_: SetOpt = None,
    dataset: DatasetOpt = None,
    index: IndexOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="Keep only chunks whose metadata matches; repeat to AND: team=storage, tags=db,backup "
            "(one of), 'version>=2', 'updated<2024-06-01', 'team!=search'. Quote a value to keep it "
            "a string: id='\"007\"'.",
        ),
    ] = None,
    weight: Annotated[
        list[str] | None,
        typer.Option(
            "--weight",
            help="Fusion weight of a source for this query, e.g. --weight dense=0.3 --weight bm25=1 "
            "(replaces the fuser profile's weight of that source).",
        ),
    ] = None,
    server: ServerOpt = None,
    wait: WaitOpt = 0,
) -> None:
    """Query an index built by `plm ingest` or `plm run`, or a running `plm serve` (--server)."""
    from plm_index import remote
    from plm_index.cli_values import parse_filter_args, parse_weight_args

    filters = parse_filter_args(filter_ or [])  # bad syntax fails before the index is opened
    weights = parse_weight_args(weight or [])
    url = remote.server_url(server) if config is None or server else None
    if url:
        body = {"text": text, "k": k, "filters": filters or None, **({"weights": weights} if weights else {})}
        if wait:
            remote.wait_ready(url, wait)
        payload = remote.call(url, "POST", "/query", body)
        payload.pop("corpus_version", None)
    else:
        if config is None:
            raise typer.BadParameter("give the job config, or --server URL (or PLM_SERVER)", param_hint="'--config'")
        job = open_job(config, set_, dataset, index)
        ranking, timings = job.search(text, k=k, filters=filters or None, weights=weights or None)
        payload = query_payload(text, ranking, timings, filters)
    if as_json:
        print(json.dumps(payload, indent=1, default=str))
    else:
        print_query_result(payload)


def status(
    server: ServerOpt = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Job config (TOML): the local index's status, no server.")
    ] = None,
    set_: SetOpt = None,
    dataset: DatasetOpt = None,
    index: IndexOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    wait: WaitOpt = 0,
) -> None:
    """What a running `plm serve` holds and does (--server or PLM_SERVER), or a local index
    (--config: counts, model, sizes and problems, as `plm index stats`)."""
    from plm_index import remote

    url = remote.server_url(server) if config is None or server else None
    if not url:
        if config is None:
            raise PlmUserError(
                "plm status needs --config FILE (a local index) or --server URL (a running server; or set PLM_SERVER)"
            )
        _local_stats(open_job(config, set_, dataset, index), as_json)
        return
    if wait:
        remote.wait_ready(url, wait)
    payload = remote.call(url, "GET", "/status")
    if as_json:
        print(json.dumps(payload, indent=1, default=str))
        return
    for key, value in payload.items():
        shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else value
        out.print(f"{key:>16}: {shown}", highlight=False, markup=False)


@index_app.command("stats")
def index_stats(
    config: ConfigOpt,
    set_: SetOpt = None,
    dataset: DatasetOpt = None,
    index: IndexOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Counts, model, dimensions and sizes of an index, and any damage or inconsistency."""
    _local_stats(open_job(config, set_, dataset, index), as_json)


def _local_stats(job: Job, as_json: bool) -> None:
    """Print an index's stats and problems; exit 1 when it has any."""
    job = job.open(create=False)
    stats = job.store.stats()
    problems = [*job.store.integrity_problems(), *map(str, job.store.consistency_problems())]
    if not problems:  # the builds are made from the store: check them once it is sound
        problems = job.searcher.build_problems()
    stats["problems"] = problems
    if problems:
        stats["repair"] = repair_command(job)
    stats["index_dir"] = str(job.index_dir)
    stats["index_dir_bytes"] = sum(p.stat().st_size for p in job.index_dir.rglob("*") if p.is_file())
    if as_json:
        print(json.dumps(stats, indent=1, default=str))
    else:
        for key, value in stats.items():
            shown = "; ".join(value) or "none" if key == "problems" else value
            out.print(f"{key:>16}: {shown}", highlight=False, markup=False)
    if problems:
        err.print(
            f"the index is damaged or inconsistent: run `{repair_command(job)}`, or delete the index folder "
            "and run `plm ingest` again",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(1)


def repair_command(job: Job) -> str:
    """The command that repairs a damaged index of this job, with its config."""
    return f"plm index rebuild --config {shlex.quote(str(job.config.path))}"


@index_app.command("rebuild")
def index_rebuild(config: ConfigOpt, set_: SetOpt = None, dataset: DatasetOpt = None, index: IndexOpt = None) -> None:
    """Regenerate everything derived from the store: missing or damaged vectors (re-embedded)
    and every retrieval index (BM25, ...)."""
    job = open_job(config, set_, dataset, index)
    report = job.rebuild()
    for note in report.notes:
        out.print(note, highlight=False, markup=False)
    out.print(f"rebuilt from {report.chunks} stored chunks in {report.seconds:.1f}s", highlight=False)
    print_timings("rebuild", report.timings)
    problems = job.store.consistency_problems()
    if problems:
        raise PlmUserError(f"the store in {job.index_dir} is still inconsistent: {'; '.join(map(str, problems))}")


@hookimpl(tryfirst=True)  # the index commands head `plm --help`
def plm_register_commands(app: Any) -> None:
    """`ingest`, `delete`, `query`, `status` and the `plugins`, `config` and `index` groups."""
    app.info.cls = PlainHelpGroup  # help as written for every command, whichever package adds it
    for command in (ingest, delete, query, status):
        app.command()(command)
    app.add_typer(plugins_app, name="plugins")
    app.add_typer(config_app, name="config")
    app.add_typer(index_app, name="index")
