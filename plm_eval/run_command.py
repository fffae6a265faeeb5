"""`plm run`: ingest a job's dataset (skipped when unchanged) and evaluate its query sets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from plm_core.config import load_job
from plm_eval.dataset import resolve_dataset
from plm_eval.selection import selection_suffix
from plm_eval.settings import eval_settings
from plm_index.cli_kit import ConfigOpt, DatasetOpt, IndexOpt, SetOpt, err, open_job, out, print_table, print_timings
from plm_index.plugins import default_registry
from plm_index.sync import summary_line


def run(
    config: ConfigOpt,
    set_: SetOpt = None,
    dataset: DatasetOpt = None,
    corpus: Annotated[str | None, typer.Option(help="What the loader reads inside the dataset.")] = None,
    queries: Annotated[
        str | None, typer.Option(help="Comma-separated query sets (default: the config's job.queries).")
    ] = None,
    index: IndexOpt = None,
    force: Annotated[bool, typer.Option(help="Re-ingest even when unchanged.")] = False,
    report: Annotated[Path | None, typer.Option(help="Where to write the JSON report.")] = None,
) -> None:
    """Ingest the job's dataset (skipped when unchanged) and evaluate its query sets."""
    from plm_eval.runner import run_job, write_report

    # The dataset's own index (PLM_DATA_DIR/<job>-<dataset>), never the one `plm ingest`
    # fills with a user's documents: those must not change the evaluation.
    loaded = load_job(config, default_registry(), set_ or [])
    dataset = resolve_dataset(loaded, dataset)
    if index is None and dataset is not None and selection_suffix(loaded, corpus):  # another selection's own
        from plm_core.settings import load_settings
        from plm_eval.eval_command import eval_index_dirs
        from plm_index.job import settings_for

        index = eval_index_dirs([loaded], settings_for(config, load_settings()).data_dir, dataset, corpus)[0]
    job = open_job(config, set_, dataset, index)
    sets = [s.strip() for s in queries.split(",") if s.strip()] if queries else None
    result = run_job(job, dataset=dataset, corpus=corpus, query_sets=sets, force=force)
    ing = result["ingest"]
    status = "index up to date" if ing["skipped"] else "synced"
    model = f"; model {result['model']}" if result["model"] else ""  # BM25 alone embeds nothing
    out.print(f"{status}: {summary_line(ing)}; {ing['chunks']} chunks{model}", highlight=False)
    for failure in ing["failed"]:
        err.print(f"failed: {failure['path']}: {failure['error']}", highlight=False, markup=False)
    for warning in result["warnings"]:
        err.print(f"warning: {warning}", highlight=False, markup=False)
    print_timings("ingest", ing["timings_s"])
    table = Table(
        "set", "queries", *result["sets"][0]["metrics"].keys(), title=f"{result['job']} on {result['dataset']}"
    )
    for s in result["sets"]:
        table.add_row(s["set"], str(s["queries"]), *(f"{v:.3f}" for v in s["metrics"].values()))
    print_table(out, table)
    for s in result["sets"]:
        per = ", ".join(f"{k} {v:.1f}" for k, v in s["ms_per_query"].items())
        warm = f" (after {s['warm_up_s']:.1f} s loading the model and indexes)" if s.get("warm_up_s") else ""
        out.print(f"{s['set']}: ms per query by stage: {per}{warm}", highlight=False)
    if report is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        report = (
            Path(eval_settings(job.config).report_dir) / f"{result['job']}-{Path(result['dataset']).name}-{stamp}.json"
        )
    out.print(f"report: {write_report(result, report)}", highlight=False)
