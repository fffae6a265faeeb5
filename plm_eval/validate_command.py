"""`plm validate`: run engineers' YAML cases against a job's index and report pass/fail.

The cases file is read before any component is built, so a typo fails in a second rather
than after models load. The index is only built when it is empty (a fresh clone), the
way `plm run` builds it; otherwise validation never re-ingests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from plm_core.config import load_job
from plm_core.errors import PlmUserError
from plm_core.settings import load_settings
from plm_eval.dataset import resolve_corpus, resolve_dataset
from plm_eval.validation import CaseResult, load_cases, run_cases, summary
from plm_index.cli_kit import print_table, setup_logging
from plm_index.job import Job
from plm_index.plugins import default_registry

out = Console()
err = Console(stderr=True)

DatasetOpt = Annotated[Path | None, typer.Option(help="Dataset to ingest if the index is empty (default: the job's).")]
IndexOpt = Annotated[Path | None, typer.Option("--index", help="Index folder (default: PLM_DATA_DIR/<job>).")]
_STYLE = {"pass": ("pass", "green"), "fail": ("FAIL", "bold red"), "error": ("ERROR", "bold yellow")}


def ensure_index(job: Job, dataset: Path | None) -> None:
    """Ingest the job's dataset when the index is empty; leave a built index alone."""
    job.open()
    if int(job.store.stats().get("chunks", 0)) > 0:
        return
    ds = resolve_dataset(job.config, dataset)
    if ds is None:
        raise PlmUserError(
            f"the index at {job.index_dir} is empty and {job.config.path} names no [job].dataset: "
            "run `plm ingest` first, or pass --dataset DIR or --index FOLDER"
        )
    source = resolve_corpus(job.config, ds)
    err.print(f"index at {job.index_dir} is empty: ingesting {source} first", highlight=False, soft_wrap=True)
    report = job.ingest([source])
    err.print(
        f"ingested {report.documents} documents, {report.chunks} chunks"
        + (f" (model {report.model})" if report.model else ""),
        highlight=False,
        soft_wrap=True,
    )


def _details(result: CaseResult) -> Text:
    if result.messages:
        return Text("\n".join(f"- {m}" for m in result.messages))
    docs = list(dict.fromkeys(h.doc_id for h in result.hits))[:3]
    return Text(f"top: {', '.join(docs)}", style="dim")


def _as_json(result: CaseResult) -> dict[str, Any]:
    return {
        "name": result.case.name,
        "query": result.case.query,
        "k": result.case.top_k,
        "status": result.status,
        "messages": result.messages,
        "ms": round(1000 * result.seconds, 1),
        "hits": [h.as_dict() for h in result.hits],
    }


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        config: Annotated[Path, typer.Option("--config", "-c", help="Job config (TOML).")],
        cases: Annotated[Path, typer.Option("--cases", help="YAML file of validation cases.")],
        dataset: DatasetOpt = None,
        index: IndexOpt = None,
        set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config value.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Check retrieval against expectations in a YAML cases file; exit 1 when any case fails."""
        loaded = load_cases(cases)
        settings = load_settings()
        setup_logging(settings.log_level)
        # The config's dataset has its own index, as `plm run` uses it (a user's `plm ingest`
        # into the job's default index never changes what the cases check).
        dataset = resolve_dataset(load_job(config, default_registry(), set_ or []), dataset)
        job = Job.from_config(config, set_ or [], index_dir=index, dataset=dataset, settings=settings)
        try:
            ensure_index(job, dataset)
            results = run_cases(job, loaded)
            model = job.store.get_meta("model")
        finally:
            job.close()
        ok = all(r.passed for r in results)
        if as_json:
            print(
                json.dumps(
                    {
                        "config": str(config),
                        "cases": str(cases),
                        "index_dir": str(job.index_dir),
                        "model": model,
                        "passed": ok,
                        "summary": summary(results),
                        "results": [_as_json(r) for r in results],
                    },
                    indent=1,
                )
            )
        else:
            table = Table(
                "case",
                "status",
                "details",
                title=f"{cases} on {job.config.job.name}" + (f" (model {model})" if model else ""),
            )
            for r in results:
                label, style = _STYLE[r.status]
                table.add_row(Text(str(r.case.name)), Text(label, style=style), _details(r))
            print_table(out, table)
            out.print(Text(summary(results), style="green" if ok else "bold red"))
        if not ok:
            raise typer.Exit(1)
