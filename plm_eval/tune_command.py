"""`plm tune`: search config values on a tuning query set, write the tuned config, and
evaluate it against the original on held-out query sets.

    plm tune --config configs/scifact/hybrid.toml --dataset ../shared/datasets/scifact \
        --queries train --test test \
        --param query.retrieve.fuser.default.k=10,30,60 \
        --param query.retrieve.fuser.default.weights.bm25=0.5,1,2

Every trial is the config with `--set`-style overrides, evaluated by the config's own
evaluator; its per-query scores are kept, so choosing on the set (or, with `--folds`, on
k-1 folds of it) is arithmetic. Trials that change only query stages share one index and
one loaded model (query vectors are remembered); a trial that changes an index stage gets
its own index folder, filled from the content cache, so it computes only what differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from plm_core.config import JobConfig, load_job
from plm_core.errors import PlmUserError
from plm_core.interfaces import Embedder
from plm_eval import tuning
from plm_eval.dataset import resolve_dataset
from plm_eval.eval_command import (
    _reporter,
    eval_index_dirs,
    out,
    print_comparison,
    synthetic_dataset,
    synthetic_note,
)
from plm_eval.outputs import check_output_file
from plm_eval.settings import eval_settings
from plm_eval.synthetic import DEFAULT_GENERATORS, LOADER_OVERRIDE, SET_NAME, GeneratorOptions
from plm_index.cli_kit import print_table, setup_logging
from plm_index.job import Job, settings_for
from plm_index.plugins import default_registry


def _index_dir(base: Path, cfg: JobConfig) -> Path:
    """One index folder per distinct index (what `Job.index_fingerprint` depends on + the store)."""
    spec = {k: cfg.raw.get(k) for k in ("index", "embedder", "store")}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return base.with_name(f"{base.name}.tune-{digest}")


def _relocate(raw: dict[str, Any], src: Path, dest: Path) -> dict[str, Any]:
    """Relative paths the original config resolved from its folder, rewritten for `dest`'s."""

    def fix(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (x if k == "corpus" else fix(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, str) and v and not os.path.isabs(v) and ("/" in v or v.startswith(".")):
            if (src / v).exists():
                return os.path.relpath((src / v).resolve(), dest.resolve())
        return v

    return fix(raw)


def tune_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="The job config (TOML) to tune.")],
    param: Annotated[
        list[str], typer.Option("--param", "-p", help="KEY=V1,V2,... values to try for a config key; repeat.")
    ],
    queries: Annotated[str | None, typer.Option(help="The query set to tune on (e.g. train).")] = None,
    test: Annotated[str | None, typer.Option(help="Query sets a,b to evaluate the winner on (never tuned on).")] = None,
    dataset: Annotated[Path | None, typer.Option(help="BEIR-layout dataset (default: the config's own).")] = None,
    corpus: Annotated[str | None, typer.Option(help="What the loaders read inside the dataset.")] = None,
    metric: Annotated[str, typer.Option(help="The metric to maximise (a metric of the evaluator).")] = "nDCG@10",
    search: Annotated[str, typer.Option(help="grid (every combination) or random (--trials draws).")] = "grid",
    trials: Annotated[int | None, typer.Option(help="How many combinations --search random draws.")] = None,
    folds: Annotated[
        int | None, typer.Option(help="k-fold cross-validation on the tuning set (when there is no test set).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of random draws and folds.")] = 0,
    set_: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE override for every trial.")] = None,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="The tuned config to write, a .toml file; tune.json and the --test report go in its folder "
            "(default: reports/tune-<time>/<config>.tuned.toml).",
        ),
    ] = None,
    synthetic: Annotated[
        int | None,
        typer.Option(
            "--synthetic",
            min=1,
            help="Tune on N synthetic queries made from the corpus (instead of --queries); saved beside the "
            "tuned config, in synthetic/.",
        ),
    ] = None,
    generators: Annotated[
        str, typer.Option(help="Query generators for --synthetic: a,b (see `plm plugins`).")
    ] = ",".join(DEFAULT_GENERATORS),
    generator_option: GeneratorOptions = None,
) -> None:
    """Tune config values on one query set (grid or random search, optional k-fold
    cross-validation), write the tuned config and compare it with the original on --test."""
    from plm_core.settings import load_settings
    from plm_eval.runner import check_metric, run_job

    if out_path is not None:
        check_output_file(out_path)
        if out_path.suffix != ".toml":
            raise PlmUserError(
                f"--out {out_path}: the tuned config is a TOML file: give a name ending in .toml, e.g. "
                f"{out_path / (config.stem + '.tuned.toml')} (tune.json and the reports go beside it)"
            )
    settings = settings_for(config, load_settings())
    setup_logging(settings.log_level)
    registry = default_registry()
    base_sets = list(set_ or [])
    target = out_path or Path("reports") / f"tune-{time.strftime('%Y%m%d-%H%M%S')}" / f"{config.stem}.tuned.toml"
    judgments = None
    if generator_option and synthetic is None:
        raise PlmUserError("--generator-option sets a query generator of --synthetic N: give --synthetic too")
    if synthetic is not None:
        if queries or test:
            raise PlmUserError(
                "--synthetic makes the tuning set: leave out --queries and --test (evaluate the tuned config "
                "on judged queries, if you have any, with plm eval)"
            )
        dataset, corpus, judgments = synthetic_dataset(
            config,
            dataset,
            corpus,
            base_sets,
            synthetic,
            generators,
            seed,
            target.parent / "synthetic",
            registry,
            generator_option or [],
        )
        queries, base_sets = SET_NAME, [*base_sets, LOADER_OVERRIDE]
    if not queries:
        raise PlmUserError("give --queries SET (the judged set to tune on) or --synthetic N")
    params = [tuning.parse_param(p) for p in param]
    todo = tuning.trials(params, search, trials, seed)
    # Every trial's config is validated before any work: a typo fails in a second.
    configs = [load_job(config, registry, base_sets + tuning.overrides_of(t)) for t in todo]
    base_cfg = load_job(config, registry, base_sets)
    check_metric(base_cfg, registry, metric)
    base_raw_load = load_job(config, registry, list(set_ or [])).raw["index"]["load"]
    ds = resolve_dataset(base_cfg, dataset)
    if ds is None:
        raise PlmUserError(f"{config}: no dataset: set [job].dataset or pass --dataset DIR")
    test_sets = [s.strip() for s in test.split(",") if s.strip()] if test else []
    if queries in test_sets:
        raise PlmUserError(f"--test {queries!r} is the tuning set: evaluate on queries the tuning did not see")
    base_dir = eval_index_dirs([base_cfg], settings.data_dir, ds)[0]
    out.print(f"tuning {config} on {ds.name}/{queries}: {len(todo)} trial(s), maximising {metric}", highlight=False)

    shared: dict[str, Embedder] = {}

    def evaluate(cfg: JobConfig, sets: list[str]) -> dict[str, Any]:
        """run_job over the trial's index folder, sharing a loaded model with the same settings."""
        key = json.dumps(cfg.raw.get("embedder"), sort_keys=True, default=str)
        job = Job(cfg, _index_dir(base_dir, cfg), settings, registry, embedder=shared.get(key))
        try:
            result = run_job(job, dataset=ds, corpus=corpus, query_sets=sets)
            if job.embedder is not None:
                shared.setdefault(key, job.embedder)
        finally:
            job.close()
        return result

    per_trial: list[dict[str, float]] = []
    rows: list[dict[str, Any]] = []
    for i, (trial, cfg) in enumerate(zip(todo, configs, strict=True), 1):
        t0 = time.perf_counter()
        result = evaluate(cfg, [queries])
        per_query = result["sets"][0]["per_query"]
        if per_query and metric not in per_query[0]:
            known = [k for k, v in per_query[0].items() if isinstance(v, float)]
            raise PlmUserError(f"unknown --metric {metric!r}; choose one of {', '.join(known)}")
        scores = {row["query_id"]: float(row[metric]) for row in per_query}
        per_trial.append(scores)
        value = tuning.mean(scores, list(scores))
        rows.append({"trial": i - 1, "params": trial, metric: value, "seconds": round(time.perf_counter() - t0, 2)})
        shown = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in trial.items())
        out.print(f"trial {i}/{len(todo)} {shown}: {metric} {value:.4f} ({rows[-1]['seconds']} s)", highlight=False)

    qids = list(per_trial[0])
    if not qids:
        raise PlmUserError(f"query set {queries!r} has no judged queries")
    winner = tuning.best(per_trial, qids)
    cv = tuning.cross_validate(per_trial, tuning.folds(qids, folds, seed)) if folds else None
    _print_trials(rows, metric, winner)
    margin = runner_up_margin(per_trial, qids, winner, seed)
    if margin is not None:
        out.print(margin["line"], highlight=False)
    if cv is not None:
        out.print(
            f"{folds}-fold cross-validation: {metric} on held-out folds {cv['held_out']:.4f} "
            f"(tuned on the other folds; the winner's own {rows[winner][metric]:.4f} on all of {queries} "
            "is optimistic)",
            highlight=False,
        )

    target.parent.mkdir(parents=True, exist_ok=True)
    chosen = configs[winner]
    raw = _relocate(chosen.raw, config.parent, target.parent)
    raw.setdefault("job", {})["name"] = f"{chosen.job.name}.tuned"[:100]
    # The description names what the tuning changed: the original's words may describe the old values.
    shown = ", ".join(f"{k}={v}" for k, v in todo[winner].items())
    where = f"{synthetic} synthetic queries from {judgments['corpus']}" if judgments else f"{ds.name}/{queries}"
    raw["job"]["description"] = f"{chosen.job.description} [tuned on {where}: {shown}]".strip()
    if judgments is not None:  # the tuned recipe reads the user's corpus with its own loader, not the rewrite
        raw["index"]["load"] = _relocate({"load": base_raw_load}, config.parent, target.parent)["load"]
    header = "\n".join(
        [
            f"Tuned by `plm tune` from {config} on {time.strftime('%Y-%m-%d')}:",
            f"  {' '.join(['plm', *sys.argv[1:]]) if sys.argv[1:] else 'plm tune'}",
            f"tuning set {where} ({len(qids)} queries), {len(todo)} trial(s), {search} search;",
            *([synthetic_note(judgments)] if judgments else []),
            f"chosen: {', '.join(f'{k}={v}' for k, v in todo[winner].items())} ({metric} {rows[winner][metric]:.4f})",
            *([f"{folds}-fold cross-validated {metric}: {cv['held_out']:.4f}"] if cv else []),
        ]
    )
    target.write_text(tuning.dump_toml(raw, header))
    load_job(target, registry)  # what we wrote must load
    out.print(f"wrote the tuned config: {target}", highlight=False)

    summary: dict[str, Any] = {
        "config": str(config),
        "dataset": str(ds),
        "tuning_set": queries,
        "metric": metric,
        "search": search,
        "trials": rows,
        "winner": rows[winner],
        "runner_up": margin,
        "cross_validation": cv,
        "tuned_config": str(target),
        "judgments": judgments,
    }
    if test_sets:
        name = eval_settings(base_cfg).reporter
        reporter = _reporter(registry, name, chart=False)
        # The trials' index folders and model serve the test runs too: nothing is re-ingested.
        runs = [evaluate(base_cfg, test_sets), evaluate(load_job(target, registry), test_sets)]
        comparison = reporter.compare([("original", runs[0]), ("tuned", runs[1])])
        print_comparison(comparison)
        files = reporter.write(comparison, target.parent / "test")
        summary["test"] = {s["set"]: {r["config"]: r["values"] for r in s["rows"]} for s in comparison["sets"]}
        out.print("wrote: " + ", ".join(str(p) for p in files.values()), highlight=False)
    report = target.parent / "tune.json"
    report.write_text(json.dumps(summary, indent=1, default=str))
    out.print(f"report: {report}", highlight=False)


def runner_up_margin(
    per_trial: list[dict[str, float]], qids: list[str], winner: int, seed: int
) -> dict[str, Any] | None:
    """The winner against the best other trial, on the tuning set's queries: the margin and a
    paired permutation test's p-value, so that a win within noise reads as one (None: one trial)."""
    from plm_eval.evaluators.significance import paired_p_value

    others = [i for i in range(len(per_trial)) if i != winner]
    if not others:
        return None
    second = max(others, key=lambda i: (tuning.mean(per_trial[i], qids), -i))
    a, b = [per_trial[winner][q] for q in qids], [per_trial[second][q] for q in qids]
    delta = tuning.mean(per_trial[winner], qids) - tuning.mean(per_trial[second], qids)
    p = paired_p_value(a, b, "permutation", 10000, seed)
    verdict = (
        "within noise: the tuning set cannot tell them apart"
        if p >= 0.05
        else "p < 0.05, not corrected for the trials compared"
    )
    line = f"winner vs runner-up (trial {second + 1}): {delta:+.4f}, paired permutation p={p:.3f} ({verdict})"
    return {"trial": second, "delta": delta, "p": p, "line": line}


def _print_trials(rows: list[dict[str, Any]], metric: str, winner: int, top: int = 10) -> None:
    ranked = sorted(rows, key=lambda r: (-r[metric], r["trial"]))[:top]
    table = Table(title=f"best {len(ranked)} of {len(rows)} trials by {metric}", box=box.SIMPLE_HEAD)
    for key in rows[0]["params"]:
        table.add_column(key.rsplit(".", 2)[-2] + "." + key.rsplit(".", 1)[-1] if "." in key else key)
    table.add_column(metric, justify="right")
    for r in ranked:
        mark = " *" if r["trial"] == winner else ""
        table.add_row(*r["params"].values(), f"{r[metric]:.4f}{mark}")
    print_table(out, table)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)
