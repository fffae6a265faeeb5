"""Files of a `plm eval` comparison: JSON, CSV, Markdown and a PNG chart (matplotlib, Agg).

Each writer takes the dict `ComparisonReporter.compare` returns and one path, and returns
the path. Kept apart from the statistics so either can change alone.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plm_core.errors import MissingDependencyError
from plm_eval.synthetic import options_line


def _dump(obj: Any, path: Path) -> Path:
    path.write_text(json.dumps(obj, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def write_summary_json(comparison: Mapping[str, Any], path: Path) -> Path:
    """Everything but the per-query rows and the runs: configs, ingest work, values, deltas, p-values."""
    sets = [{k: v for k, v in s.items() if k not in ("per_query", "runs")} for s in comparison["sets"]]
    return _dump({**comparison, "sets": sets}, path)


def write_runs(comparison: Mapping[str, Any], folder: Path) -> Path | None:
    """Each config's doc ranking of each query set as a TREC run file, `<set>/<config>.trec`
    (`qid Q0 docid rank score tag`, the tag the config's label): what trec_eval, ranx or
    another fusion read. The score is the one plm's doc measures give each place (n - rank + 1,
    n the docs ranked), so that equal retrieval scores cannot be reordered by a tool that
    sorts by score: the tools reproduce the report's numbers. A run whose query or doc ids
    hold whitespace, which the format cannot, is not written (a warning says so). None when
    no run was kept."""
    kept = [(s["set"], label, run) for s in comparison["sets"] for label, run in s.get("runs", {}).items()]
    if not kept:
        return None
    for name, label, run in kept:
        tag = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
        spaced = next((i for q, docs in run.items() for i in (q, *docs) if not i or any(c.isspace() for c in i)), None)
        if spaced is not None:
            print(
                f"warning: no TREC run for {label} on {name}: the id {spaced!r} holds whitespace, which a run "
                "file's columns cannot (per_query.json has the rankings)",
                file=sys.stderr,
            )
            continue
        lines = [
            f"{qid} Q0 {doc} {rank} {len(docs) - rank + 1} {tag}\n"
            for qid, docs in run.items()
            for rank, doc in enumerate(docs, 1)
        ]
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / f"{tag}.trec").write_text("".join(lines), encoding="utf-8")
    return folder


def rankings_differ(set_cmp: Mapping[str, Any]) -> dict[str, int]:
    """The configs of one set's comparison whose chunk view and doc view ranked the top
    chunks differently for some queries: label -> how many."""
    return {label: n for label, n in (set_cmp.get("rankings_differ") or {}).items() if n}


def write_per_query_json(comparison: Mapping[str, Any], path: Path) -> Path:
    return _dump({s["set"]: s["per_query"] for s in comparison["sets"]}, path)


def write_per_query_csv(comparison: Mapping[str, Any], path: Path) -> Path:
    """Long format, one line per (set, query, config): easy to pivot in a spreadsheet or pandas."""
    metrics: list[str] = list(dict.fromkeys(m for s in comparison["sets"] for m in s["metrics"]))
    header = ["set", "query_id", "config", "query", "relevant", "chunk_rank", "doc_rank", *metrics]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for s in comparison["sets"]:
            for entry in s["per_query"]:
                for label, run in entry["configs"].items():
                    writer.writerow(
                        [
                            s["set"],
                            entry["query_id"],
                            label,
                            entry["query"],
                            " ".join(entry["relevant"] or []),
                            _blank(run.get("rank")),
                            _blank(run.get("doc_rank")),
                            *(_blank(run.get(m)) for m in metrics),
                        ]
                    )
    return path


def _blank(value: Any) -> Any:
    return "" if value is None else value


def format_p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


# How a correction is named in the report; "none" has no corrected column.
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni"}


def format_ci(ci: Sequence[float]) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def corrected_p(row: Mapping[str, Any], metric: str) -> float:
    """The corrected p-value of a compared row (the raw one in comparisons made before corrections)."""
    p = (row.get("p_corrected") or {}).get(metric)
    return float(row["p"][metric] if p is None else p)


def survives(row: Mapping[str, Any], metric: str, alpha: float) -> bool:
    verdict = (row.get("significant") or {}).get(metric)
    return bool(corrected_p(row, metric) < alpha if verdict is None else verdict)


def survivors(set_cmp: Mapping[str, Any], alpha: float) -> list[str]:
    """ "config metric +delta" for every difference that survives the correction, table order."""
    return [
        f"{row['config']} {m} {row['delta'][m]:+.3f}"
        for row in set_cmp["rows"]
        for m in set_cmp["metrics"]
        if row["delta"][m] is not None and survives(row, m, alpha)
    ]


def _cell(row: Mapping[str, Any], metric: str, test: Mapping[str, Any]) -> str:
    value = f"{row['values'][metric]:.3f}"
    if row["delta"][metric] is None:
        return value
    star = "\\*" if survives(row, metric, test["alpha"]) else ""
    name = CORRECTION_NAMES.get(test.get("correction", "none"))
    p = format_p(row["p"][metric])
    stats = f"{p}, {name} {format_p(corrected_p(row, metric))}{star}" if name else f"{p}{star}"
    ci = (row.get("ci") or {}).get(metric)
    interval = f", 95% CI {format_ci(ci)}" if ci is not None else ""
    return f"{value} ({row['delta'][metric]:+.3f}, {stats}{interval})"


def _md(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rank(value: Any) -> str:
    return "-" if value is None else str(value)


def _work(ingest: Mapping[str, Any]) -> str:
    if ingest.get("skipped"):
        return "index up to date: nothing computed"
    work = ingest.get("work") or {}
    if not work:
        return "no cached stages"
    return "; ".join(f"{stage} {w['computed']} computed / {w['cached']} cached" for stage, w in work.items())


def write_markdown(comparison: Mapping[str, Any], diffs: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> Path:
    test, configs = comparison["test"], comparison["configs"]
    base = comparison["baseline"]
    how = (
        f"paired randomisation (permutation) test ({test['n_resamples']} resamples, seed {test['seed']})"
        if test["name"] == "permutation"
        else "paired t-test"
    )
    names = " vs ".join(f"`{c['label']}`" for c in configs)
    name = CORRECTION_NAMES.get(test.get("correction", "none"))
    boot = test.get("bootstrap")
    parts = [f"the delta vs `{base}`", f"the two-sided p-value of a {how} over the queries' paired scores"]
    if name:
        parts.append(f"that p-value after {name}'s correction")
    if boot:
        parts.append("the delta's 95% confidence interval")
    cell = "Each cell: mean over the queries; for the other configs, " + ", ".join(parts[:-1]) + f" and {parts[-1]}."
    if name:
        cell += (
            f" \\* marks a difference that survives the correction (corrected p < {test['alpha']}). Correction "
            f"family: per query set and metric, the {len(configs) - 1} config(s) compared with `{base}`, as "
            "PyTerrier's Experiment corrects each measure across systems; metrics and query sets are not pooled, "
            "so adding one changes no other's verdict."
        )
    else:
        cell += f" \\* p < {test['alpha']}; p-values are not corrected for multiple comparisons (`--correction none`)."
    if boot:
        cell += (
            f" 95% CI: paired percentile bootstrap of the delta, {boot['n_resamples']} resamples of the queries "
            f"drawn with replacement, seed {boot['seed']}."
        )
    lines = [
        f"# plm eval: {names}",
        "",
        f"Dataset: `{configs[0].get('dataset')}`. Baseline: `{base}`.",
        "",
        cell + " Doc view: nDCG@10, R@100 (recall), RR@10 (MRR@10) via ir-measures on the doc ranking; chunk "
        "view (the POC's): Hit@1, Hit@k and MRR over the top k chunks.",
        "",
    ]
    made = comparison.get("provenance")
    if made:
        sets = "".join(f" `--set {o}`" for o in made["overrides"]) or " none"
        hashes = ", ".join(f"`{label}` {c['sha256'][:12]}" for label, c in made["configs"].items())
        lines += [
            f"Made by `{made['command']}` (plm {made['plm']}, {made['created']}). Overrides:{sets}. "
            f"Config SHA-256: {hashes}.",
            "",
        ]
    for s in comparison["sets"]:
        differ = rankings_differ(s)
        if differ:
            which = ", ".join(f"`{label}` {n}" for label, n in differ.items())
            lines += [
                f"Set `{s['set']}`: the chunk view's search (at its k) and the doc view's deeper search ranked the "
                f"top chunks differently for some of the {s['queries']} queries ({which}): fusion candidates grow "
                "with k, so the two views score two rankings. `one_ranking = true` in `[job] evaluator` scores one.",
                "",
            ]
    judged = comparison.get("judgments")
    if judged:  # `plm eval --synthetic N`: the report must say the judgments were made, not given
        given = judged.get("generator_options", {})
        made = ", ".join(f"{n} by `{g}`{options_line(given, g)}" for g, n in judged.get("by_generator", {}).items())
        lines += [
            f"**Synthetic judgments**: {judged['queries']} queries made from the corpus ({made}), each judged "
            f"relevant to one document; {judged['how'].split(';', 1)[-1].strip()} "
            f"({judged['documents_cut']} of {judged['documents']} documents changed). Seed {judged['seed']}. "
            "A choice among recipes, not a measure of real quality: see docs/evaluation.md.",
            "",
        ]
        if judged.get("choice"):
            lines += [judged["choice"]["line"][0].upper() + judged["choice"]["line"][1:] + ".", ""]
    for s in comparison["sets"]:
        lines += [
            f"## Query set `{s['set']}` ({s['queries']} queries)",
            "",
            "| config | " + " | ".join(s["metrics"]) + " |",
            "|---" * (len(s["metrics"]) + 1) + "|",
        ]
        for row in s["rows"]:
            cells = " | ".join(_cell(row, m, test) for m in s["metrics"])
            lines.append(f"| `{row['config']}` | {cells} |")
        lines.append("")
        if len(s["rows"]) > 1:
            kept = survivors(s, test["alpha"])
            rule = f"{name}'s correction, p < {test['alpha']}" if name else f"p < {test['alpha']}, uncorrected"
            lines += [
                f"Differences vs `{base}` that survive ({rule}): " + ("; ".join(kept) if kept else "none") + ".",
                "",
            ]
    lines += [
        "## Ingest and cache reuse",
        "",
        "Work per cached stage: texts computed vs served by the shared content cache "
        "(PLM_DATA_DIR/cache.sqlite); a config after the first pays only for what differs.",
        "",
        "| config | job | model | documents | chunks | ingest s | work |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in configs:
        ing = c.get("ingest") or {}
        lines.append(
            f"| `{c['label']}` | {c.get('job')} | {c.get('model') or '-'} | {ing.get('documents')} | "
            f"{ing.get('chunks')} | {ing.get('wall_s')} | {_work(ing)} |"
        )
    lines.append("")
    for set_name, rows in diffs.items():
        if not rows:
            continue
        a, b = rows[0]["a"]["config"], rows[0]["b"]["config"]
        metric = rows[0]["metric"]
        lines += [
            f"## Queries where `{a}` and `{b}` differ most (set `{set_name}`, by {metric})",
            "",
            "Ranks are 1-based: doc rank in the doc ranking, chunk rank of the first relevant chunk "
            "in the top chunks; - means not found.",
            "",
            f"| query | relevant | doc rank {a} | doc rank {b} | chunk rank {a} | chunk rank {b} | "
            f"{metric} {a} | {metric} {b} |",
            "|---" * 8 + "|",
        ]
        for d in rows:
            rel = ", ".join(d["relevant"][:2]) + (f" (+{len(d['relevant']) - 2})" if len(d["relevant"]) > 2 else "")
            lines.append(
                f"| {_md(d['query'])} | {_md(rel)} | {_rank(d['a']['doc_rank'])} | "
                f"{_rank(d['b']['doc_rank'])} | {_rank(d['a']['rank'])} | {_rank(d['b']['rank'])} | "
                f"{d['a'][metric]:.3f} | {d['b'][metric]:.3f} |"
            )
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_chart(comparison: Mapping[str, Any], path: Path) -> Path:
    """Grouped bars: one panel per query set, metrics on x, one bar per config."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "eval") from None
    sets = comparison["sets"]
    labels = [c["label"] for c in comparison["configs"]]
    width_in = max(6.0, 1.1 * max(len(s["metrics"]) for s in sets) * max(1, len(labels)) ** 0.5)
    fig, axes = plt.subplots(len(sets), 1, figsize=(width_in, 3.8 * len(sets)), squeeze=False)
    bar = 0.8 / len(labels)
    for ax, s in zip(axes[:, 0], sets, strict=True):
        for i, row in enumerate(s["rows"]):
            xs = [j + (i - (len(labels) - 1) / 2) * bar for j in range(len(s["metrics"]))]
            ys = [row["values"][m] for m in s["metrics"]]
            bars = ax.bar(xs, ys, bar, label=row["config"])
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
        ax.set_xticks(range(len(s["metrics"])), s["metrics"])
        # Headroom above 1.0 keeps the legend row clear of the bars.
        ax.set_ylim(0, 1.22)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_title(f"query set {s['set']} ({s['queries']} queries)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", ncol=min(len(labels), 4), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
