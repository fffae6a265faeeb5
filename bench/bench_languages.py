"""nDCG@10 per language on the parallel set of bench/languages/ (the same pages and the same
questions in eight languages), for BM25, dense and hybrid recipes, each language alone and
all of them in one index.

    HF_HUB_OFFLINE=1 python bench/bench_languages.py --split test [--languages en,zh] \
        [--recipes bm25_stem,bm25_multilingual] [--mixed] [--json out.json] [--work DIR]
    python bench/bench_languages.py --speed      # tokenization MB/s per language, beside bm25s_stem and jieba

Each language becomes a BEIR dataset folder under --work (its corpus, its questions, the
shared qrels); `--mixed` adds one folder holding every language's pages (ids `<lang>/<path>`)
and every language's questions, each judged against its own language's page. Every recipe
is run by `plm eval` on each folder; the table gives nDCG@10 by recipe and language.
`--tiny` runs the first two languages, multilingual BM25 only, on the judged pages and a tenth of
the rest (the test suite runs it, so the script cannot rot).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "languages"
REPO = HERE.parent.parent
LANGUAGES = ["en", "zh", "ja", "ko", "de", "ru", "fr", "es"]

_COMMON = """
[job]
name = "{name}"
corpus = ["corpus.jsonl"]
[store]
use = "sqlite"
[embedder]
use = "sentence_transformers"
model = "all-MiniLM-L6-v2"
batch_size = 32
normalize = true
backend = "onnx"
[index.load]
use = "beir_corpus"
include_title = true
[index.chunk]
use = "markdown_semantic"
headings = "commonmark"
setext_headings = true
words = "{words}"
[index.context]
use = "contextual"
[query.expand]
use = "{expand}"
"""
_COLLAPSE = """
[query.collapse]
use = "collapse"
per_doc = 1
"""
_BM25 = """
[query.retrieve]
use = "bm25s"
tokenizer = "{tokenizer}"
method = "lucene"
k1 = 1.5
b = 0.75
"""
_DENSE = """
[query.retrieve]
use = "dense"
"""
_HYBRID = """
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "{tokenizer}"
method = "lucene"
k1 = 1.5
b = 0.75
[query.retrieve.fuser]
use = "rrf"
order = ["bm25", "dense"]
[query.retrieve.fuser.default]
k = 10
weights = {{ dense = 1.0, bm25 = 1.0 }}
candidates_factor = 2
[query.retrieve.fuser.profiles.other_language]
k = 10
weights = {{ dense = 0.0, bm25 = 1.0 }}
candidates_factor = 2
"""
# name -> (retrieval table, tokenizer, chunk words, expander): recommended's shape throughout.
RECIPES = {
    "bm25_stem": (_BM25, "bm25s_stem", "spaces", "none"),
    "bm25_multilingual": (_BM25, "multilingual", "script", "none"),
    "dense": (_DENSE, "", "script", "none"),
    "recommended": (_HYBRID, "bm25s_stem", "spaces", "none"),
    "multilingual_minilm": (_HYBRID, "multilingual", "script", "language_route"),
}


def read_corpus(language: str) -> list[dict[str, object]]:
    with gzip.open(HERE / "corpus" / f"{language}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_queries(language: str, split: str) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (HERE / "queries" / f"{language}.jsonl").read_text().splitlines() if line]
    return [r for r in rows if r.get("metadata", {}).get("split") == split]  # type: ignore[union-attr]


def qrels(split: str) -> list[tuple[str, str]]:
    lines = (HERE / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
    return [(q, d) for q, d, *_ in (line.split("\t") for line in lines if line.strip())]


def write_dataset(folder: Path, languages: list[str], split: str, mixed: bool, keep: float) -> None:
    """A BEIR folder: the languages' pages (ids prefixed by language when mixed), their questions."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    judged = qrels(split)
    pages_kept = sorted({d for _, d in judged})
    with (
        (folder / "corpus.jsonl").open("w", encoding="utf-8") as corpus,
        (folder / "queries.jsonl").open("w", encoding="utf-8") as queries,
    ):
        for language in languages:
            rows = read_corpus(language)
            if keep < 1:  # the judged pages and a share of the rest
                rest = [r for r in rows if r["_id"] not in pages_kept]
                rows = [r for r in rows if r["_id"] in pages_kept] + rest[: int(len(rest) * keep)]
            for r in rows:
                rid = f"{language}/{r['_id']}" if mixed else r["_id"]
                corpus.write(json.dumps({**r, "_id": rid}, ensure_ascii=False) + "\n")
            for q in read_queries(language, split):
                qid = f"{language}-{q['_id']}" if mixed else q["_id"]
                queries.write(json.dumps({**q, "_id": qid}, ensure_ascii=False) + "\n")
    rows_out = ["query-id\tcorpus-id\tscore"]
    for prefix in languages if mixed else [""]:
        for qid, doc in judged:
            rows_out.append(f"{prefix}-{qid}\t{prefix}/{doc}\t1" if mixed else f"{qid}\t{doc}\t1")
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(rows_out) + "\n")


def write_config(folder: Path, name: str) -> Path:
    table, tokenizer, words, expand = RECIPES[name]
    path = folder / f"{name}.toml"
    path.write_text(
        _COMMON.format(name=name, words=words, expand=expand) + table.format(tokenizer=tokenizer) + _COLLAPSE
    )
    return path


def evaluate(configs: list[Path], dataset: Path, split: str, out: Path, env: dict[str, str]) -> dict[str, float]:
    """nDCG@10 of each config on one dataset folder, through `plm eval`."""
    cmd = [sys.executable, "-m", "plm_index.cli", "eval", "--dataset", str(dataset), "--queries", split,
           "--out", str(out), "--no-chart", "--resamples", "200", "--bootstrap", "200"]  # fmt: skip
    for c in configs:
        cmd += ["-c", str(c)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if res.returncode != 0:
        raise SystemExit(f"plm eval failed on {dataset.name}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return ndcg_by_config(summary)


def ndcg_by_config(summary: dict[str, Any]) -> dict[str, float]:
    """Each config's nDCG@10 from a summary.json (its first query set), by config label."""
    return {row["config"]: float(row["values"]["nDCG@10"]) for row in summary["sets"][0]["rows"]}


def speed(languages: list[str], reps: int = 3) -> dict[str, dict[str, float]]:
    """MB/s of tokenizing each language's pages in pieces of about 2,000 characters (a chunk's
    size): `multilingual` beside `bm25s_stem`, and beside jieba's search mode on Chinese (when
    installed), best of `reps`, in one process."""

    from plm_plugins.tokenizers.bm25s_stem import BM25sStemTokenizer
    from plm_plugins.tokenizers.multilingual import MultilingualTokenizer

    def pieces(language: str) -> list[str]:
        text = "\n\n".join(str(r["text"]) for r in read_corpus(language))
        return [text[i : i + 2000] for i in range(0, len(text), 2000)]

    sides: dict[str, Any] = {
        "multilingual": MultilingualTokenizer().tokenize,
        "bm25s_stem": BM25sStemTokenizer().tokenize,
    }
    try:
        import jieba

        jieba.setLogLevel(60)
        sides["jieba"] = lambda texts: [list(jieba.cut_for_search(t)) for t in texts]
    except ImportError:
        pass
    out: dict[str, dict[str, float]] = {}
    for language in languages:
        texts = pieces(language)
        size = sum(len(t.encode()) for t in texts) / 1e6
        out[language] = {}
        for name, tokenize in sides.items():
            if name == "jieba" and language != "zh":
                continue
            tokenize(texts[:2])  # warm: models and stemmers loaded
            best = min(_timed(tokenize, texts) for _ in range(reps))
            out[language][name] = round(size / best, 2)
        print(language, out[language], flush=True)
    return out


def _timed(tokenize: Any, texts: list[str]) -> float:
    import time

    start = time.perf_counter()
    tokenize(texts)
    return time.perf_counter() - start


def mixed_breakdown(per_query: Path) -> dict[str, dict[str, dict[str, float]]]:
    """From the mixed index's per_query.json: by recipe and question language, the mean
    nDCG@10 and the share of questions whose first hit is a page in another language."""
    rows = json.loads(per_query.read_text())
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in next(iter(rows.values())):
        language = str(row["query_id"]).split("-")[0]
        for name, result in row["configs"].items():
            cell = out.setdefault(name, {}).setdefault(language, {"nDCG@10": 0.0, "other_first": 0.0, "n": 0.0})
            first = (result.get("docs") or [""])[0]
            cell["nDCG@10"] += float(result["nDCG@10"])
            cell["other_first"] += float(bool(first) and not str(first).startswith(language + "/"))
            cell["n"] += 1
    for cells in out.values():
        for cell in cells.values():
            n = cell.pop("n")
            cell["nDCG@10"], cell["other_first"] = round(cell["nDCG@10"] / n, 3), round(cell["other_first"] / n, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="test")
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--mixed", action="store_true", help="also one index holding every language")
    ap.add_argument("--work", type=Path, help="folder for the datasets and reports (default: a temporary one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--speed", action="store_true", help="tokenization MB/s per language instead")
    args = ap.parse_args()
    if args.speed:
        rates = speed(args.languages.split(","))
        if args.json:
            args.json.write_text(json.dumps({"MB/s": rates}, indent=1))
        return
    languages = args.languages.split(",")[:2] if args.tiny else args.languages.split(",")
    recipes = ["bm25_multilingual"] if args.tiny else args.recipes.split(",")
    keep = 0.1 if args.tiny else 1.0
    work = args.work or Path(tempfile.mkdtemp(prefix="plm-languages-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(work / "data")}
    configs = [write_config(work, name) for name in recipes]
    table: dict[str, dict[str, float]] = {}
    for language in [*languages, *(["mixed"] if args.mixed else [])]:
        dataset = work / "datasets" / language
        write_dataset(dataset, languages if language == "mixed" else [language], args.split, language == "mixed", keep)
        table[language] = evaluate(configs, dataset, args.split, work / "reports" / language, env)
        print(language, {k: round(v, 3) for k, v in table[language].items()}, flush=True)
    print("\n| recipe | " + " | ".join(table) + " |\n|---|" + "---|" * len(table))
    for name in recipes:
        print(f"| {name} | " + " | ".join(f"{table[lang].get(name, float('nan')):.3f}" for lang in table) + " |")
    result: dict[str, Any] = {"split": args.split, "ndcg@10": table}
    if args.mixed:
        result["mixed_by_language"] = mixed_breakdown(work / "reports" / "mixed" / "per_query.json")
        for name, cells in result["mixed_by_language"].items():
            print(f"mixed, {name}:", {lang: (c["nDCG@10"], c["other_first"]) for lang, c in cells.items()})
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
