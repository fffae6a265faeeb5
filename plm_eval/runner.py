"""`plm run`: ingest a job's dataset (skipped when unchanged), evaluate its query sets,
and write a JSON report. Kept out of the CLI so Python users can call it too."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from plm_core.errors import PlmUserError
from plm_eval.dataset import load_query_set, resolve_corpus, resolve_dataset
from plm_index.job import Job


def run_job(
    job: Job,
    dataset: str | Path | None = None,
    corpus: str | None = None,
    query_sets: list[str] | None = None,
    force: bool = False,
    evaluator_name: str | None = None,
) -> dict[str, Any]:
    ds = resolve_dataset(job.config, dataset)
    if ds is None:
        raise PlmUserError(f"{job.config.path}: no dataset: set [job].dataset or pass --dataset DIR")
    source = resolve_corpus(job.config, ds, corpus)
    sets = query_sets or job.config.job.queries
    qsets = [load_query_set(ds, name) for name in sets]  # a bad set fails before the ingest
    t0 = time.perf_counter()
    ingest = job.ingest([source], force=force)
    ingest_s = time.perf_counter() - t0
    reg = job.registry.get(evaluator_name or job.config.job.evaluator, "evaluators")
    evaluator = reg.cls()
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
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def write_report(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str))
    return path
