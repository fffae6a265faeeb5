"""`plm run`: ingest a job's dataset (skipped when unchanged), evaluate its query sets,
and write a JSON report. Kept out of the CLI so Python users can call it too."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from plm_core.config import JobConfig, format_validation
from plm_core.errors import ConfigError, PlmUserError
from plm_core.registry import Registry
from plm_eval.dataset import load_query_set, resolve_corpus, resolve_dataset
from plm_eval.judged_ids import judged_coverage
from plm_eval.settings import eval_settings
from plm_index.job import Job

if TYPE_CHECKING:
    from plm.evaluation import Evaluator


def run_job(
    job: Job,
    dataset: str | Path | None = None,
    corpus: str | None = None,
    query_sets: list[str] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    ds = resolve_dataset(job.config, dataset)
    if ds is None:
        raise PlmUserError(f"{job.config.path}: no dataset: set [job].dataset or pass --dataset DIR")
    source = resolve_corpus(job.config, ds, corpus)
    sets = query_sets or eval_settings(job.config).queries
    qsets = [load_query_set(ds, name) for name in sets]  # a bad set fails before the ingest
    t0 = time.perf_counter()
    ingest = job.ingest([source], force=force)
    ingest_s = time.perf_counter() - t0
    judged = (doc for qset in qsets for docs in qset.qrels.values() for doc in docs)
    warning = judged_coverage(judged, job.store.doc_fingerprints())
    evaluator = evaluator_for(job.config, job.registry)
    results = []
    for qset in qsets:
        results.append(evaluator.evaluate(job, qset, progress=job.settings.progress))
    return {
        "job": job.config.job.name,
        "config": str(job.config.path),
        "dataset": str(ds),
        "corpus": str(source),
        "index_dir": str(job.index_dir),
        "model": job.store.get_meta("model"),
        # Models the embedder preferred but could not load (e.g. BGE offline), and why.
        "model_skipped": list(getattr(job.embedder, "skipped", []) or []),
        "ingest": {**ingest.as_dict(), "wall_s": round(ingest_s, 3)},
        "sets": results,
        "warnings": [warning] if warning else [],
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def evaluator_for(config: JobConfig, registry: Registry) -> Any:
    """The config's `[job] evaluator` (a name, or a table of its settings), built."""
    given = eval_settings(config).evaluator
    table = dict(given) if isinstance(given, dict) else {"use": given}
    if "use" not in table:
        raise ConfigError(
            f"{config.path} [job] evaluator: missing 'use'; its settings go in a table with the name, "
            'evaluator = { use = "ir_metrics", one_ranking = true }'
        )
    use = str(table.pop("use"))
    where = f"{config.path} [job] evaluator"
    cls = cast("type[Evaluator]", registry.get(use, "evaluators", where=where).cls)
    try:
        return cls(**table)
    except ValidationError as err:
        raise ConfigError(format_validation(err, where, cls.Config)) from None


def check_metric(config: JobConfig, registry: Registry, metric: str | None, option: str = "--metric") -> None:
    """Fail before any work when `metric` is not one the config's evaluator reports (an
    evaluator that does not list its metrics, `metric_names`, is not checked)."""
    names = getattr(evaluator_for(config, registry), "metric_names", None)
    if metric is not None and names is not None and metric not in names():
        raise PlmUserError(f"unknown {option} {metric!r}; choose one of {', '.join(names())}")


def write_report(report: dict[str, Any], path: Path) -> Path:
    """`plm run`'s JSON: every set's metrics and per-query rows, not its full doc rankings
    (`plm eval` writes those as run files)."""
    sets = [{k: v for k, v in s.items() if k != "run"} for s in report.get("sets", [])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**report, "sets": sets}, indent=1, default=str))
    return path
