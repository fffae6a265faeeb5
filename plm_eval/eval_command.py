"""`plm eval`: several configs over one BEIR-layout dataset, side by side.

Each config is ingested (skipped when its index is unchanged) and evaluated by
`plm_eval.runner.run_job`; work the configs share (chunk keywords, entities, vectors of the
same model) comes from the content cache, so a config costs only what differs. The
comparison (deltas, paired significance tests, report files) is done by the registered
`comparison_report` reporter, so the core imports neither scipy nor matplotlib.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from plm_core import __version__
from plm_core.config import JobConfig, format_validation, load_job
from plm_core.errors import ConfigError, PlmUserError
from plm_core.registry import Registry
from plm_core.settings import Settings, load_settings
from plm_eval.dataset import resolve_dataset
from plm_eval.evaluators.report_writers import rankings_differ
from plm_eval.outputs import check_output_folder
from plm_eval.selection import selection_suffix
from plm_eval.settings import eval_settings
from plm_eval.synthetic import DEFAULT_GENERATORS, LOADER_OVERRIDE, SET_NAME, GeneratorOptions, options_line
from plm_index.cli_kit import print_table, setup_logging
from plm_index.job import Job, index_dir_for, settings_for
from plm_index.plugins import default_registry
from plm_index.sync import summary_line

out = Console()


def config_labels(paths: Sequence[Path]) -> list[str]:
    """Row labels: config file stems; a stem used twice becomes parent/stem, then numbered."""
    stems = [p.stem for p in paths]
    labels = [f"{p.parent.name}/{p.stem}" if stems.count(p.stem) > 1 else p.stem for p in paths]
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return unique


def eval_index_dirs(
    configs: Sequence[JobConfig], data_dir: str, dataset: Path | None, corpus: str | None = None
) -> list[Path]:
    """One index folder per config file and corpus selection. `[job].name` alone could
    collide (two variants of one recipe often keep the name), so the file stem joins it when
    they differ, and a hash of the file's path settles two different files that still agree
    on both; a selection other than the config's own is named too (`selection_suffix`)."""
    dirs = [
        index_dir_for(cfg.job.name, data_dir, dataset, cfg.path.stem + selection_suffix(cfg, corpus)) for cfg in configs
    ]
    owners: dict[Path, Path] = {}
    for i, (cfg, d) in enumerate(zip(configs, dirs, strict=True)):
        path = cfg.path.resolve()
        if owners.setdefault(d, path) != path:
            digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
            dirs[i] = d.with_name(f"{d.name}.{digest}")
    return dirs


def run_configs(
    paths: Sequence[Path],
    dataset: Path | None = None,
    corpus: str | None = None,
    query_sets: list[str] | None = None,
    overrides: Sequence[str] = (),
    force: bool = False,
    settings: Settings | None = None,
    registry: Registry | None = None,
    on_done: Callable[[str, dict[str, Any]], None] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """(label, run_job report) per config, in order; every config is validated before any runs."""
    from plm_eval.runner import evaluator_for, run_job

    if not paths:
        raise PlmUserError("give at least one --config")
    # One data folder for the whole comparison: PLM_DATA_DIR, else .plm beside the first config.
    settings = settings_for(paths[0], settings or load_settings())
    registry = registry or default_registry()
    configs = [load_job(p, registry, list(overrides)) for p in paths]
    for cfg in configs:
        evaluator_for(cfg, registry)  # its settings fail before any config runs
    datasets = [resolve_dataset(cfg, dataset) for cfg in configs]
    missing = [str(cfg.path) for cfg, ds in zip(configs, datasets, strict=True) if ds is None]
    if missing:
        raise PlmUserError(f"no dataset for {', '.join(missing)}: pass --dataset DIR (a BEIR-layout folder)")
    if len({ds.resolve() for ds in datasets if ds is not None}) > 1:
        raise PlmUserError("the configs name different datasets ([job].dataset); pass --dataset DIR to compare them")
    ds = datasets[0]
    sets = query_sets or list(eval_settings(configs[0]).queries)
    runs = []
    # The resolved dataset, as `plm run` uses it: with --dataset left out, the raw None would
    # name the job's default index, the one `plm ingest` fills with the user's documents.
    index_dirs = eval_index_dirs(configs, settings.data_dir, ds, corpus)
    for label, cfg, index_dir in zip(config_labels(paths), configs, index_dirs, strict=True):
        job = Job(cfg, index_dir, settings, registry)
        try:
            result = run_job(job, dataset=ds, corpus=corpus, query_sets=sets, force=force)
        finally:
            job.close()
        runs.append((label, result))
        if on_done is not None:
            on_done(label, result)
    return runs


def _reporter(registry: Registry, name: str, **params: Any) -> Any:
    reg = registry.get(name, "reporters")
    takes = reg.cls.Config.model_fields  # type: ignore[attr-defined]
    try:  # plm eval's options, those its config has (a third party's may take none)
        return reg.cls(**{k: v for k, v in params.items() if k in takes})
    except ValidationError as err:
        raise ConfigError(format_validation(err, f"plm eval: reporter {name!r}", reg.cls.Config)) from None  # type: ignore[attr-defined]


def _work_line(label: str, result: dict[str, Any]) -> str:
    ing = result["ingest"]
    work = ", ".join(f"{s} {w['computed']} computed/{w['cached']} cached" for s, w in ing["work"].items())
    what = "index up to date" if ing["skipped"] else "synced"
    return (
        f"{label}: {what}: {summary_line(ing)}; {ing['chunks']} chunks"
        + (f" ({work})" if work else "")
        + (f"; model {result['model']}" if result["model"] else "")
        + "".join(f"\nwarning: {label}: {w}" for w in result.get("warnings", []))
    )


def _p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _signed(x: float) -> str:
    """+.123 / -.045: no leading zero, so an interval is as narrow as the other lines of a cell."""
    digits = f"{abs(x):.3f}"
    return ("-" if x < 0 and digits != "0.000" else "+") + (digits[1:] if digits.startswith("0.") else digits)


# Short names of the corrections in the printed cells.
_CORRECTED = {"holm": ("Holm", "Holm"), "bonferroni": ("Bonf", "Bonferroni")}


def _cell(row: dict[str, Any], m: str, test: dict[str, Any]) -> str:
    """value / delta / raw p / corrected p / 95% CI; * on the p that decides (the corrected one)."""
    value = f"{row['values'][m]:.3f}"
    short = _CORRECTED.get(test.get("correction", "none"), ("", ""))[0]
    if row["delta"][m] is None:
        return "\n".join([value, "-", "-", *(["-"] if short else []), "-"])
    corrected = row.get("p_corrected", {}).get(m, row["p"][m])
    star = "*" if row.get("significant", {}).get(m, corrected < test["alpha"]) else ""
    lines = [value, f"{row['delta'][m]:+.3f}", _p(row["p"][m]) + ("" if short else star)]
    if short:
        lines.append(f"{short} {_p(corrected)}{star}")
    ci = row.get("ci", {}).get(m)
    lines.append("-" if ci is None else f"[{_signed(ci[0])},{_signed(ci[1])}]")
    return "\n".join(lines)


def print_comparison(comparison: dict[str, Any]) -> None:
    test, base = comparison["test"], comparison["baseline"]
    how = "paired permutation test" if test["name"] == "permutation" else "paired t-test"
    short, name = _CORRECTED.get(test.get("correction", "none"), ("", ""))
    alpha = test["alpha"]
    compared = len(comparison["configs"]) - 1
    if short:
        verdict = f"{name}-corrected p over the {compared} config(s) vs {base}, per metric (* survives: < {alpha})"
        rule = f"{name}, p<{alpha}"
    else:
        verdict = f"not corrected (* p<{alpha})"
        rule = f"uncorrected p<{alpha}"
    width = max(len(c["label"]) for c in comparison["configs"])
    for s in comparison["sets"]:
        table = Table(
            title=f"query set {s['set']} ({s['queries']} queries)",
            box=box.SIMPLE_HEAD,
            caption=f"cell: mean / delta vs {base} / {how} p-value / {verdict} / 95% bootstrap CI of the delta"
            if compared
            else "mean over the queries (give more --config to compare them, with p-values and intervals)",
        )
        table.add_column("config", no_wrap=True, min_width=min(width, 24))
        for m in s["metrics"]:
            table.add_column(m, justify="right", no_wrap=True)
        for row in s["rows"]:
            cells = (_cell(row, m, test) if compared else f"{row['values'][m]:.3f}" for m in s["metrics"])
            table.add_row(row["config"], *cells, end_section=True)
        print_table(out, table)
        if compared:
            kept = [
                f"{row['config']} {m} {row['delta'][m]:+.3f}"
                for row in s["rows"][1:]
                for m in s["metrics"]
                if row.get("significant", {}).get(m)
            ]
            out.print(f"survive ({rule}): " + ("; ".join(kept) if kept else "none"), highlight=False)


def _ranks(run: dict[str, Any], metric: str) -> str:
    def show(v: Any) -> str:
        return "-" if v is None else str(v)

    return f"doc rank {show(run['doc_rank'])}\nchunk rank {show(run['rank'])}\n{metric} {run[metric]:.3f}"


def print_differences(reporter: Any, comparison: dict[str, Any], metric: str | None, top: int) -> None:
    a, b = (c["label"] for c in comparison["configs"][:2])
    for s in comparison["sets"]:
        rows = reporter.differing_queries(s, a, b, metric=metric, top=top)
        m = metric or s["metrics"][0]
        table = Table(
            title=f"set {s['set']}: the {len(rows)} queries where {a} and {b} differ most by {m}",
            caption="doc rank: first relevant doc in the doc ranking; chunk rank: in the top chunks; -: not found",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("query (relevant)", ratio=1)
        table.add_column(a, no_wrap=True)
        table.add_column(b, no_wrap=True)
        table.add_column("delta", justify="right", no_wrap=True)
        for d in rows:
            rel = ", ".join(d["relevant"][:3]) + (f" +{len(d['relevant']) - 3}" if len(d["relevant"]) > 3 else "")
            query = " ".join(str(d["query"]).split())
            # Text, not markup: queries may hold [brackets].
            table.add_row(
                Text(f"{query}\n({rel})"), _ranks(d["a"], m), _ranks(d["b"], m), f"{d['diff']:+.3f}", end_section=True
            )
        print_table(out, table)


def eval_command(
    config: Annotated[list[Path], typer.Option("--config", "-c", help="A job config (TOML); repeat to compare.")],
    dataset: Annotated[Path | None, typer.Option(help="BEIR-layout dataset (default: the configs' own).")] = None,
    corpus: Annotated[str | None, typer.Option(help="What the loaders read inside the dataset.")] = None,
    queries: Annotated[str | None, typer.Option(help="Query sets: a,b (default: the first config's).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE override for every config.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Report folder (default reports/eval-<time>/).")] = None,
    per_query: Annotated[
        bool, typer.Option("--per-query", help="Show the queries where the first two configs differ most.")
    ] = False,
    top: Annotated[int, typer.Option(min=1, help="How many differing queries to show and report.")] = 10,
    metric: Annotated[str | None, typer.Option(help="Metric that ranks differing queries (default nDCG@10).")] = None,
    test: Annotated[str, typer.Option(help="Significance test: permutation or ttest.")] = "permutation",
    correction: Annotated[
        str,
        typer.Option(
            help="Multiple-testing correction per query set and metric, across the configs: holm, bonferroni, none."
        ),
    ] = "holm",
    resamples: Annotated[int, typer.Option(help="Permutation test resamples.")] = 10000,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples for each delta's 95% confidence interval.")
    ] = 10000,
    seed: Annotated[int, typer.Option(help="Seed of the permutation test and the bootstrap.")] = 0,
    chart: Annotated[bool, typer.Option(help="Write metrics.png.")] = True,
    force: Annotated[bool, typer.Option(help="Re-ingest even when an index is unchanged.")] = False,
    synthetic: Annotated[
        int | None,
        typer.Option(
            "--synthetic",
            min=1,
            help="Judge on N synthetic queries made from the corpus itself (headings, sentences, links), "
            "for a corpus with no judged queries; saved under the report folder as a query set with qrels.",
        ),
    ] = None,
    generators: Annotated[
        str, typer.Option(help="Query generators for --synthetic: a,b (see `plm plugins`, family query_generators).")
    ] = ",".join(DEFAULT_GENERATORS),
    generator_option: GeneratorOptions = None,
) -> None:
    """Evaluate several configs on one dataset: metrics side by side with deltas, p-values
    (raw and corrected for the configs compared) and bootstrap confidence intervals.
    With --synthetic N, on queries made from the corpus instead of judged ones."""
    settings = load_settings()
    setup_logging(settings.log_level)
    registry = default_registry()
    if per_query and len(config) < 2:
        raise PlmUserError("--per-query compares the first two configs: give at least two --config")
    if not config:
        raise PlmUserError("give at least one --config")
    target = out_dir or Path("reports") / f"eval-{time.strftime('%Y%m%d-%H%M%S')}"
    check_output_folder(target)
    from plm_eval.runner import check_metric

    first = load_job(config[0], registry, set_ or [])
    name = eval_settings(first).reporter  # the reporter is config, as all names are
    takes = registry.get(name, "reporters", where=f"{first.path} [job] reporter").cls.Config.model_fields  # type: ignore[attr-defined]
    if "test" in takes and test not in ("permutation", "ttest"):  # a reporter's own tests: its error says
        hint = " (query sets to report on are --queries; plm tune's --test names held-out sets)"
        raise PlmUserError(f"--test {test!r}: the significance test is permutation or ttest{hint}")
    check_metric(first, registry, metric)  # before any work
    reporter = _reporter(
        registry,
        name,
        test=test,
        correction=correction,
        n_resamples=resamples,
        n_bootstrap=bootstrap,
        seed=seed,
        chart=chart,
    )
    sets = [s.strip() for s in queries.split(",") if s.strip()] if queries else None
    overrides = list(set_ or [])
    judgments = None
    if generator_option and synthetic is None:
        raise PlmUserError("--generator-option sets a query generator of --synthetic N: give --synthetic too")
    if synthetic is not None:
        if queries:
            raise PlmUserError("--synthetic makes its own query set: leave out --queries")
        dataset, corpus, judgments = synthetic_dataset(
            config[0],
            dataset,
            corpus,
            overrides,
            synthetic,
            generators,
            seed,
            target / "synthetic",
            registry,
            generator_option or [],
        )
        sets, overrides = [SET_NAME], [*overrides, LOADER_OVERRIDE]
    runs = run_configs(
        config,
        dataset,
        corpus,
        sets,
        overrides,
        force,
        settings,
        registry,
        on_done=lambda label, result: out.print(_work_line(label, result), highlight=False),
    )
    comparison = reporter.compare(runs)
    comparison["provenance"] = provenance(config, set_ or [])  # the user's --set, not --synthetic's own
    if judgments is not None:
        comparison["judgments"] = judgments
    print_comparison(comparison)
    for line in ranking_notes(comparison):
        out.print(line, highlight=False, markup=False)
    if judgments is not None:
        out.print(synthetic_note(judgments), highlight=False)
        if len(runs) > 1:
            comparison["judgments"]["choice"] = choice = synthetic_choice(runs)
            out.print(choice["line"], highlight=False)
    known = comparison["sets"][0]["metrics"]
    # An unknown --metric (one a third-party evaluator did not list) only affects the
    # per-query view: the runs are done, so write the report before saying so.
    bad_metric = metric is not None and metric not in known
    if per_query and not bad_metric:
        print_differences(reporter, comparison, metric, top)
    files = reporter.write(comparison, target, top=top, metric=None if bad_metric else metric)
    out.print("wrote: " + ", ".join(str(p) for p in files.values()), highlight=False)
    if getattr(reporter.config, "chart", False) and "chart" not in files:
        out.print(
            "note: no metrics.png: the chart needs matplotlib (pip install 'plm[eval]')", highlight=False, markup=False
        )
    if bad_metric:
        raise PlmUserError(f"unknown --metric {metric!r}; choose one of {', '.join(known)}")


def provenance(paths: Sequence[Path], overrides: Sequence[str]) -> dict[str, Any]:
    """What made a report, so that it can be made again and told apart from another: plm's
    version, the command line, the --set overrides and each config file's SHA-256."""
    configs = {}
    for label, path in zip(config_labels(paths), paths, strict=True):
        configs[label] = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        "plm": __version__,
        "command": shlex.join(["plm", *sys.argv[1:]]),
        "overrides": list(overrides),
        "configs": configs,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def ranking_notes(comparison: dict[str, Any]) -> list[str]:
    """A line per query set where a config's chunk view (Hit@k, MRR: a search at the chunk
    view's k) and doc view (a deeper search) ranked differently for some queries."""
    notes = []
    for s in comparison["sets"]:
        differ = rankings_differ(s)
        if differ:
            which = ", ".join(f"{label} {n}" for label, n in differ.items())
            notes.append(
                f"note: set {s['set']}: the chunk view's search and the doc view's deeper one ranked the top "
                f"chunks differently for some of the {s['queries']} queries ({which}): fusion candidates grow "
                'with k. For one ranking a query, set [job] evaluator = { use = "ir_metrics", one_ranking = true }'
            )
    return notes


def synthetic_dataset(
    config: Path,
    dataset: Path | None,
    corpus: str | None,
    overrides: Sequence[str],
    n: int,
    generators: str,
    seed: int,
    folder: Path,
    registry: Registry,
    options: Sequence[str] = (),
) -> tuple[Path, str, dict[str, Any]]:
    """Make the synthetic query set from the config's corpus into `folder`: (the dataset
    folder to evaluate, the corpus inside it, how it was made). `options`: the
    --generator-option assignments (NAME.KEY=VALUE)."""
    from plm_eval.dataset import resolve_corpus
    from plm_eval.synthetic import build, generator_options, generators_named

    names = [g.strip() for g in generators.split(",") if g.strip()]
    given = generator_options(options, names)
    generators_named(names, registry, given)  # a wrong or missing setting fails before anything is read
    settings = settings_for(config, load_settings())
    cfg = load_job(config, registry, list(overrides))
    ds = resolve_dataset(cfg, dataset)
    if ds is None:
        raise PlmUserError(
            f"{config}: no corpus to make queries from: pass --dataset FOLDER (and --corpus SUBPATH inside it, "
            "e.g. --corpus . for the folder itself)"
        )
    source = resolve_corpus(cfg, ds, corpus)
    made, summary = build(cfg, source, folder, n, names, registry, settings, seed, given)
    out.print(synthetic_note(summary), highlight=False)
    return made, "corpus.jsonl", summary


def synthetic_choice(runs: Sequence[tuple[str, dict[str, Any]]], metric: str = "nDCG@10") -> dict[str, Any]:
    """The config the synthetic queries would choose (the best mean), and whether its lead over
    the runner-up holds (a paired permutation test over the same queries)."""
    from plm_eval.evaluators.significance import paired_p_value

    scores = {label: {r["query_id"]: float(r[metric]) for r in run["sets"][0]["per_query"]} for label, run in runs}
    means = {label: sum(v.values()) / max(1, len(v)) for label, v in scores.items()}
    ranked = sorted(means, key=lambda k: -means[k])
    best, second = ranked[0], ranked[1]
    qids = list(scores[best])
    p = paired_p_value([scores[best][q] for q in qids], [scores[second][q] for q in qids])
    verdict = (
        "a lead the queries support" if p < 0.05 else "not a significant lead: either would do, or judge some queries"
    )
    line = (
        f"synthetic choice: {best} ({metric} {means[best]:.3f}; next {second} {means[second]:.3f}, "
        f"{means[best] - means[second]:+.3f}, p={p:.3f}: {verdict})"
    )
    return {"config": best, "runner_up": second, "metric": metric, "p": p, "line": line}


def synthetic_note(summary: dict[str, Any]) -> str:
    given = summary.get("generator_options", {})
    kinds = ", ".join(f"{n} {g}{options_line(given, g)}" for g, n in summary["by_generator"].items())
    return (
        f"synthetic judgments: {summary['queries']} queries made from {summary['corpus']} ({kinds}); "
        f"what each was copied from is cut from the indexed text ({summary['documents_cut']} of "
        f"{summary['documents']} documents changed); saved in {summary.get('folder', 'the report folder')}"
    )


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
