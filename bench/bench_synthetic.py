"""Does a choice made on synthetic judgments predict the choice real judgments make? (issue 34)

A menu of recipes is evaluated twice on one dataset: on its judged queries (the real
judgments) and on N synthetic queries made from its corpus by `plm eval --synthetic`'s
machinery (`plm_eval.synthetic.build`: generators, the copied text cut from the indexed
corpus). Reported: each recipe's nDCG@10 under both, Kendall's tau-b between the two
orderings (overall and per generator), and the real nDCG@10 of the recipe the synthetic
queries choose against the real best and against `recommended` (`--reference`), with a paired permutation
test on the real queries.

    HF_HUB_OFFLINE=1 PLM_PROGRESS=0 PLM_DATA_DIR=/tmp/synth-bench/data \\
    python bench/bench_synthetic.py --menu scifact --dataset ../shared/datasets/scifact \\
        --queries train,test --synthetic 400 --out /tmp/synth-bench/scifact \\
        --json bench/results/synthetic_scifact.json

`--strip FOLDER` evaluates a copy of the dataset with no structure instead (issue 45 item 18:
abstracts, tickets, transcripts): written into FOLDER (never into the repository) with every
title dropped and every character of the text that is not a letter or a digit made a space
(whitespace collapsed, case kept); queries and qrels are copied unchanged. There the default
generators make no query and fall back to `spans`:

    python bench/bench_synthetic.py --menu scifact --dataset ../shared/datasets/scifact \
        --strip /tmp/synth-bench/scifact-stripped --queries train,test --synthetic 400 \
        --generators spans --out /tmp/synth-bench/stripped-spans \
        --json bench/results/synthetic_scifact_spans_stripped.json

Every recipe with an embedder is run with the recommended recipe's (MiniLM on ONNX
Runtime: the same vectors as torch, BENCHMARKS.md 18), so the menu embeds each corpus once,
and a model loaded once serves every recipe. Recipes that differ only in query stages share
one index (as `plm tune` trials do).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from plm_core.config import JobConfig, load_job
from plm_core.settings import load_settings
from plm_eval import synthetic
from plm_eval.dataset import resolve_corpus, resolve_dataset
from plm_eval.evaluators.significance import paired_p_value
from plm_eval.runner import run_job
from plm_index.job import Job, settings_for
from plm_index.plugins import default_registry

REPO = Path(__file__).resolve().parents[1]
ONNX = ["embedder.backend=onnx"]
K = "query.retrieve.fuser.default.k"
RM3 = "query.retrieve.retrievers.bm25.use=bm25_rm3"
ROCCHIO = "query.retrieve.retrievers.dense.use=dense_rocchio"

# label -> (config, overrides); "recommended" is the reference the issue compares with.
MENUS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "scifact": {
        "bm25_whitespace": ("configs/scifact/bm25_whitespace.toml", []),
        "bm25_stemmed": ("configs/scifact/bm25_stemmed.toml", []),
        "bm25_identifiers": ("configs/scifact/bm25_identifiers.toml", []),
        "bm25_rm3": ("configs/scifact/bm25_rm3.toml", []),
        "dense_minilm": ("configs/scifact/dense_minilm.toml", ONNX),
        "dense_rocchio": ("configs/scifact/dense_minilm.toml", [*ONNX, ROCCHIO]),
        "hybrid_rrf_k10": ("configs/scifact/hybrid_rrf.toml", [*ONNX, f"{K}=10"]),
        "hybrid_rrf_k30": ("configs/scifact/hybrid_rrf.toml", [*ONNX, f"{K}=30"]),
        "hybrid_rrf_k60": ("configs/scifact/hybrid_rrf.toml", ONNX),
        "hybrid_dbsf": ("configs/scifact/hybrid_dbsf.toml", ONNX),
        "recommended": ("configs/scifact/recommended.toml", []),
        "recommended_rm3": ("configs/scifact/recommended.toml", [RM3]),
        "recommended_rocchio": ("configs/scifact/recommended.toml", [ROCCHIO]),
    },
    "poc_needle": {
        "bm25_whitespace": ("configs/experiments/bm25_whitespace.toml", []),
        "bm25_stemmed": ("configs/experiments/bm25_stemmed.toml", []),
        "bm25_identifiers": ("configs/experiments/bm25_identifiers.toml", []),
        "bm25_rm3": ("configs/experiments/bm25_rm3.toml", []),
        "dense_minilm": ("configs/experiments/dense_minilm.toml", ONNX),
        "hybrid_rrf_k30": ("configs/recommended.toml", [f"{K}=30"]),
        "hybrid_rrf_k60": ("configs/recommended.toml", [f"{K}=60"]),
        "recommended": ("configs/recommended.toml", []),  # RRF k = 10
        "recommended_rm3": ("configs/recommended.toml", [RM3]),
        "recommended_rocchio": ("configs/recommended.toml", [ROCCHIO]),
    },
    # BM25 only, for a smoke run on examples/sample_corpus (no model): --reference bm25_stemmed
    "sample": {
        "bm25_whitespace": ("configs/experiments/bm25_whitespace.toml", []),
        "bm25_stemmed": ("configs/experiments/bm25_stemmed.toml", []),
        "bm25_identifiers": ("configs/experiments/bm25_identifiers.toml", []),
        "bm25_rm3": ("configs/experiments/bm25_rm3.toml", []),
    },
}


def strip_text(text: str) -> str:
    """Letters and digits only: any other character a space, whitespace collapsed, case kept."""
    return " ".join("".join(c if c.isalnum() else " " for c in text).split())


def write_if_changed(path: Path, text: str) -> None:
    """Write unless the file already holds `text` (an unchanged corpus keeps its indexes)."""
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def strip_dataset(dataset: Path, folder: Path) -> Path:
    """A copy of a BEIR dataset without structure: no title, the text letters, digits and single
    spaces only; queries.jsonl and qrels/ copied as they are. Returns the folder."""
    if folder.resolve().is_relative_to(REPO):
        raise SystemExit(f"--strip {folder}: write the copy outside the repository (e.g. /tmp/...)")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    rows = []
    for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            rows.append(json.dumps({"_id": record["_id"], "title": "", "text": strip_text(record.get("text") or "")}))
    write_if_changed(folder / "corpus.jsonl", "\n".join(rows) + "\n")
    for name in ["queries.jsonl", *(f"qrels/{p.name}" for p in sorted((dataset / "qrels").glob("*.tsv")))]:
        write_if_changed(folder / name, (dataset / name).read_text(encoding="utf-8"))
    how = "titles dropped; every character but a letter or digit a space, whitespace collapsed, case kept"
    about = {"from": str(dataset.resolve()), "how": how, "documents": len(rows)}
    write_if_changed(folder / "stripped.json", json.dumps(about, indent=1) + "\n")
    return folder


def kendall_tau(a: list[float], b: list[float]) -> float:
    from scipy import stats

    return float(stats.kendalltau(a, b).statistic)  # tau-b: ties in either ordering allowed


def index_dir(data_dir: str, dataset: Path, cfg: JobConfig) -> Path:
    """One index per distinct index (index stages, embedder, store), per dataset."""
    spec = {k: cfg.raw.get(k) for k in ("index", "embedder", "store")}
    spec["dataset"] = str(dataset.resolve())
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return Path(data_dir) / f"bench-synthetic-{dataset.resolve().name}-{digest}"


def evaluate(
    menu: dict[str, tuple[str, list[str]]],
    dataset: Path,
    corpus: str | None,
    query_sets: list[str],
    extra: list[str],
    shared: dict[str, Any],
    settings: Any,
    registry: Any,
) -> dict[str, dict[str, dict[str, float]]]:
    """set -> label -> {query id: nDCG@10}, each recipe over `dataset` and its `query_sets`."""
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in query_sets}
    for label, (path, overrides) in menu.items():
        cfg = load_job(REPO / path, registry, [*overrides, *extra])
        key = json.dumps(cfg.raw.get("embedder"), sort_keys=True, default=str)
        t0 = time.perf_counter()
        job = Job(cfg, index_dir(settings.data_dir, dataset, cfg), settings, registry, embedder=shared.get(key))
        try:
            result = run_job(job, dataset=dataset, corpus=corpus, query_sets=query_sets)
            if job.embedder is not None:
                shared.setdefault(key, job.embedder)
        finally:
            job.close()
        for name, one in zip(query_sets, result["sets"], strict=True):
            out[name][label] = {str(r["query_id"]): float(r["nDCG@10"]) for r in one["per_query"]}
        means = " ".join(f"{n} {sum(out[n][label].values()) / len(out[n][label]):.4f}" for n in query_sets)
        ing = result["ingest"]
        work = ", ".join(f"{s} {w['computed']}/{w['cached']}" for s, w in ing["work"].items())
        done = "up to date" if ing["skipped"] else f"ingest {ing['wall_s']:.0f} s" + (f" ({work})" if work else "")
        print(
            f"  {label:<20} nDCG@10 {means}  ({time.perf_counter() - t0:.0f} s; {done})",
            flush=True,
        )
    return out


def mean(values: dict[str, float], ids: list[str] | None = None) -> float:
    keys = list(values) if ids is None else ids
    return sum(values[k] for k in keys) / len(keys) if keys else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--menu", choices=sorted(MENUS), required=True)
    ap.add_argument("--dataset", type=Path, required=True)
    ap.add_argument("--queries", required=True, help="the judged query sets, a,b (e.g. train,test)")
    ap.add_argument("--corpus", help="what the loaders read inside the dataset (default: the configs')")
    ap.add_argument("--synthetic", type=int, default=400, help="how many synthetic queries")
    ap.add_argument("--generators", default=",".join(synthetic.DEFAULT_GENERATORS))
    ap.add_argument(
        "--generator-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a setting of one of --generators, as plm eval takes it (repeat it)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="a,b: run these recipes of the menu only (and the reference)")
    ap.add_argument("--reference", default="recommended", help="the recipe the choice is compared with")
    ap.add_argument("--out", type=Path, required=True, help="folder for the synthetic set")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument(
        "--strip",
        type=Path,
        metavar="FOLDER",
        help="evaluate a copy of --dataset written here without titles or punctuation (letters, digits, "
        "spaces; case kept), queries and qrels unchanged",
    )
    args = ap.parse_args()

    registry = default_registry()
    menu = dict(MENUS[args.menu])
    if args.only:
        keep = {s.strip() for s in args.only.split(",")} | {args.reference}
        menu = {k: v for k, v in menu.items() if k in keep}
    ref = args.reference
    first = REPO / menu[ref][0]
    settings = settings_for(first, load_settings())
    cfg = load_job(first, registry)
    ds = resolve_dataset(cfg, args.dataset)
    assert ds is not None
    if args.strip:
        ds = strip_dataset(ds, args.strip)
    source = resolve_corpus(cfg, ds, args.corpus)
    t0 = time.perf_counter()
    names = [g.strip() for g in args.generators.split(",") if g.strip()]
    options = synthetic.generator_options(args.generator_option, names)
    folder, summary = synthetic.build(
        cfg, source, args.out, args.synthetic, names, registry, settings, args.seed, options
    )
    made_s = time.perf_counter() - t0
    print(f"synthetic set: {summary['queries']} queries {summary['by_generator']} in {made_s:.1f} s -> {folder}")
    kinds: dict[str, str] = {}
    for line in (folder / "queries" / f"{synthetic.SET_NAME}.jsonl").read_text().splitlines():
        row = json.loads(line)
        kinds[row["_id"]] = row["kind"]

    shared: dict[str, Any] = {}
    real_sets = [q.strip() for q in args.queries.split(",") if q.strip()]
    print(f"real judgments ({', '.join(real_sets)}):")
    real_all = evaluate(menu, ds, args.corpus, real_sets, [], shared, settings, registry)
    print("synthetic judgments:")
    syn = evaluate(
        menu, folder, "corpus.jsonl", [synthetic.SET_NAME], [synthetic.LOADER_OVERRIDE], shared, settings, registry
    )[synthetic.SET_NAME]

    labels = list(menu)
    syn_mean = {k: mean(syn[k]) for k in labels}
    choice = max(labels, key=lambda k: syn_mean[k])
    result: dict[str, Any] = {
        "menu": args.menu,
        "dataset": str(ds),
        **({"stripped_from": str(args.dataset.resolve())} if args.strip else {}),
        "synthetic": summary,
        "synthetic_choice": choice,
        "reference": ref,
        "recipes": {k: {"synthetic": syn_mean[k]} for k in labels},
        "sets": {},
    }
    print()
    print("| recipe | synthetic nDCG@10 | " + " | ".join(f"real {n} nDCG@10" for n in real_sets) + " |")
    print("|---|---:|" + "---:|" * len(real_sets))
    for k in sorted(labels, key=lambda k: -syn_mean[k]):
        cells = " | ".join(f"{mean(real_all[n][k]):.3f}" for n in real_sets)
        print(f"| {k} | {syn_mean[k]:.3f} | {cells} |")
    for name in real_sets:
        real = real_all[name]
        real_mean = {k: mean(real[k]) for k in labels}
        by_kind = {}
        for kind in sorted(set(kinds.values())):
            ids = [q for q, k in kinds.items() if k == kind]
            means = {k: mean(syn[k], ids) for k in labels}
            by_kind[kind] = {
                "queries": len(ids),
                "nDCG@10": means,
                "tau": kendall_tau([real_mean[k] for k in labels], [means[k] for k in labels]),
                "choice": max(labels, key=lambda k: means[k]),
            }
        tau = kendall_tau([real_mean[k] for k in labels], [syn_mean[k] for k in labels])
        best = max(labels, key=lambda k: real_mean[k])
        qids = list(real[ref])
        p_vs_ref = paired_p_value([real[choice][q] for q in qids], [real[ref][q] for q in qids])
        p_vs_best = paired_p_value([real[choice][q] for q in qids], [real[best][q] for q in qids])
        for k in labels:
            result["recipes"][k][name] = real_mean[k]
        result["sets"][name] = {
            "queries": len(qids),
            "kendall_tau": tau,
            "by_generator": by_kind,
            "real_best": best,
            "choice_real": real_mean[choice],
            "best_real": real_mean[best],
            "reference_real": real_mean[ref],
            "choice_minus_best": real_mean[choice] - real_mean[best],
            "choice_minus_reference": real_mean[choice] - real_mean[ref],
            "p_choice_vs_reference": p_vs_ref,
            "p_choice_vs_best": p_vs_best,
        }
        print(f"\n{name} ({len(qids)} queries): Kendall tau-b, real vs synthetic order: {tau:.3f}")
        for kind, r in by_kind.items():
            print(f"  {kind} only ({r['queries']} queries): tau {r['tau']:.3f}, would choose {r['choice']}")
        print(
            f"  synthetic choice: {choice} (real {real_mean[choice]:.3f}); real best: {best} "
            f"({real_mean[best]:.3f}, delta {real_mean[choice] - real_mean[best]:+.3f}, p={p_vs_best:.3f}); "
            f"{ref} {real_mean[ref]:.3f} (delta {real_mean[choice] - real_mean[ref]:+.3f}, p={p_vs_ref:.3f})"
        )
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"total {result['seconds']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
