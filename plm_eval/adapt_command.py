"""`plm adapt`: fine-tune the config's sentence-transformers embedder on its own index's
chunks, with no labels, and write the model folder plus a config that uses it.

    plm adapt --config configs/recommended.toml --out adapted/ --budget-minutes 10

A rerun with the same config, out folder and settings continues from the last checkpoint
of a killed or budget-stopped run. See `plm_eval.adaptation` for how pairs are built.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from plm_core.config import load_job
from plm_core.errors import PlmUserError
from plm_eval import adaptation, tuning
from plm_eval.outputs import check_output_folder
from plm_eval.tune_command import _relocate
from plm_index.cli_kit import ConfigOpt, IndexOpt, SetOpt, open_job, out
from plm_index.plugins import default_registry


def adapt(
    config: ConfigOpt,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (default: adapted/<job name>).")] = None,
    budget_minutes: Annotated[
        float | None, typer.Option("--budget-minutes", help="Stop training after this long, saving the model.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the pairs, batches and training.")] = 0,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training pairs.")] = 1,
    batch_size: Annotated[int, typer.Option(min=2, help="Pairs per step (the others are negatives).")] = 16,
    learning_rate: Annotated[float, typer.Option(help="AdamW learning rate.")] = 2e-5,
    max_pairs: Annotated[int | None, typer.Option(min=2, help="Use at most this many pairs (a random subset).")] = None,
    hard_negatives: Annotated[bool, typer.Option(help="Mine a hard negative per pair with BM25.")] = True,
    max_seq_length: Annotated[
        int, typer.Option(min=8, help="Tokens read per text while training (memory and time grow with it).")
    ] = 256,
    checkpoint_steps: Annotated[int, typer.Option(min=1, help="Save a resumable checkpoint every N steps.")] = 50,
    set_: SetOpt = None,
    index: IndexOpt = None,
) -> None:
    """Adapt the embedder to the index's corpus (no labels needed); writes OUT/model and a config using it."""
    check_arguments(budget_minutes, learning_rate, seed)
    job = open_job(config, set_, None, index)
    target = out_dir or Path("adapted") / job.config.job.name
    check_output_folder(target)  # before any work: a bad --out fails in a second, not after the training
    spec = job.config.embedder
    # What adapt trains is a sentence-transformers model folder: an embedder that has one
    # (`model_path`) can be adapted, whatever its name.
    if spec is None or not isinstance(getattr(spec.cls, "model_path", None), property):
        found = "no [embedder]" if spec is None else f"[embedder] use = {spec.use!r}, whose weights are no model folder"
        raise PlmUserError(
            f"{config}: {found}; plm adapt fine-tunes an embedder whose weights are a sentence-transformers "
            'model folder: set [embedder] use = "sentence_transformers" and a model'
        )
    job.open(create=False)
    try:
        chunks = job.store.chunks()
    finally:
        job.close()
    if not chunks:
        raise PlmUserError(f"the index at {job.index_dir} has no chunks: ingest documents first (`plm ingest`)")
    settings = adaptation.AdaptSettings(
        seed=seed,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_pairs=max_pairs,
        hard_negatives=hard_negatives,
        checkpoint_steps=checkpoint_steps,
        max_seq_length=max_seq_length,
    )
    pairs = adaptation.build_pairs(chunks, settings)
    kinds = {k: sum(p.kind == k for p in pairs) for k in ("title", "ict", "keywords")}
    out.print(
        f"{len(pairs)} training pairs from {len(chunks)} chunks "
        f"({', '.join(f'{n} {k}' for k, n in kinds.items() if n)})",
        highlight=False,
    )
    embedder = job.embedder
    base = Path(getattr(embedder, "model_path"))  # noqa: B009 - an embedder with a model folder, checked above
    result = adaptation.train(
        base,
        pairs,
        target,
        settings,
        budget_s=None if budget_minutes is None else 60 * budget_minutes,
        progress=job.settings.progress,
        log=lambda msg: out.print(msg, highlight=False, markup=False),
    )
    written = write_config(config, target, result.model_dir, set_ or [])
    state = "finished" if result.finished else "stopped at the budget (rerun to continue)"
    out.print(
        f"{state}: {result.steps}/{result.total_steps} steps in {result.seconds:.0f}s; "
        f"model {result.model_dir}; config {written}",
        highlight=False,
        markup=False,
    )


def check_arguments(budget_minutes: float | None, learning_rate: float, seed: int) -> None:
    """The numbers typer does not bound, checked before any work."""
    if budget_minutes is not None and not (math.isfinite(budget_minutes) and budget_minutes > 0):
        raise PlmUserError(
            f"--budget-minutes {budget_minutes}: give a number of minutes above 0 (e.g. 10), or leave it out to "
            "train to the end"
        )
    if not (math.isfinite(learning_rate) and 0 < learning_rate < 1):
        raise PlmUserError(f"--learning-rate {learning_rate}: give a number above 0 and below 1 (e.g. 2e-5)")
    if not 0 <= seed < 2**32:
        raise PlmUserError(f"--seed {seed}: give a whole number from 0 to {2**32 - 1}")


def write_config(config: Path, target: Path, model_dir: Path, overrides: list[str]) -> Path:
    """The input config (with --set applied) whose embedder is the adapted model, its paths
    relocated for `target`; the index gets its own name (its vectors are new)."""
    registry = default_registry()
    original = load_job(config, registry, overrides)
    raw = _relocate(original.raw, config.parent, target)
    # Absolute: the model locator reads a relative folder from the working directory.
    raw["embedder"]["model"] = str(model_dir.resolve())
    raw.setdefault("job", {})["name"] = f"{original.job.name}.adapted"[:100]
    raw["job"]["description"] = f"{original.job.description} [embedder adapted by plm adapt]".strip()
    header = "\n".join(
        [
            f"Written by `plm adapt` from {config} on {time.strftime('%Y-%m-%d')}:",
            f"  {' '.join(['plm', *sys.argv[1:]]) if sys.argv[1:] else 'plm adapt'}",
            "Paths are relative to this file.",
        ]
    )
    path = target / f"{config.stem}.adapted.toml"
    path.write_text(tuning.dump_toml(raw, header))
    load_job(path, registry)  # what we wrote must load
    return path


def register(app: typer.Typer) -> None:
    app.command("adapt")(adapt)
