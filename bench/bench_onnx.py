"""The embedder's ONNX Runtime backend against its torch backend, on the same texts.

Compared: `SentenceTransformerEmbedder(model="all-MiniLM-L6-v2", backend=...)` with
backend "torch", "onnx" (fp32) and "onnx" + quantize "int8", all in one process, the order
rotated every repetition (the machine is shared and noisy: the within-run ratios are the
comparable numbers). Reported per backend: ingest throughput (`embed` over the first N
SciFact abstracts, median of the reps), single-query latency (`embed_query`, p50 over
distinct queries), the one-time export cost (a fresh data folder), and how far its vectors
are from torch's (max |diff|, min cosine). Quality on SciFact is `plm eval` (BENCHMARKS.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import load_texts  # noqa: E402  (the same first-N SciFact abstracts)

from plm_core.settings import Settings  # noqa: E402
from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder  # noqa: E402

BACKENDS = {"torch": {}, "onnx": {"backend": "onnx"}, "onnx_int8": {"backend": "onnx", "quantize": "int8"}}


def load_queries(root: Path, n: int) -> list[str]:
    return [json.loads(line)["text"] for line in (root / "queries.jsonl").open()][:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact")
    ap.add_argument("-n", type=int, default=300, help="texts per run (and queries timed)")
    ap.add_argument("--reps", type=int, default=3, help="runs per backend, order rotated; median reported")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    texts, queries = load_texts(args.dataset, args.n), load_queries(args.dataset, args.n)
    data_dir = tempfile.mkdtemp(prefix="plm-bench-onnx-")
    settings = Settings(offline=True, device="cpu", progress=False, data_dir=data_dir)

    embedders: dict[str, SentenceTransformerEmbedder] = {}
    load_s: dict[str, float] = {}
    for name, extra in BACKENDS.items():  # a fresh data folder: the onnx loads include the export
        t0 = time.perf_counter()
        embedders[name] = SentenceTransformerEmbedder(model="all-MiniLM-L6-v2", settings=settings, **extra)
        embedders[name].ensure_warm()
        load_s[name] = time.perf_counter() - t0
        embedders[name].embed(texts[:32])  # warm-up

    times: dict[str, list[float]] = {k: [] for k in BACKENDS}
    out: dict[str, Any] = {}
    names = list(BACKENDS)
    for rep in range(args.reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            t0 = time.perf_counter()
            out[name] = embedders[name].embed(texts)
            times[name].append(time.perf_counter() - t0)
    query_ms: dict[str, float] = {}
    for name in names:
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            embedders[name].embed_query(q)
            lat.append((time.perf_counter() - t0) * 1000)
        query_ms[name] = statistics.median(lat)

    ref = out["torch"]
    result: dict[str, Any] = {
        "n_texts": len(texts),
        "reps": args.reps,
        "threads": torch.get_num_threads(),
        "backends": {},
    }
    print(f"{len(texts)} SciFact abstracts, batch 32, {torch.get_num_threads()} threads, {args.reps} rotated reps")
    header = ["texts/s", "x torch", "query p50 ms", "load s", "max|diff|", "min cos"]
    print(f"{'backend':<10} " + " ".join(f"{h:>{w}}" for h, w in zip(header, (8, 8, 13, 7, 10, 8), strict=True)))
    for name in names:
        tps = len(texts) / statistics.median(times[name])
        v = out[name]
        cos = (v * ref).sum(1) / (np.linalg.norm(v, axis=1) * np.linalg.norm(ref, axis=1))
        row = {
            "texts_per_s": tps,
            "runs_s": times[name],
            "ratio_vs_torch": tps / (len(texts) / statistics.median(times["torch"])),
            "query_p50_ms": query_ms[name],
            "load_s": load_s[name],
            "max_abs_diff_vs_torch": float(np.abs(v - ref).max()),
            "min_cosine_vs_torch": float(cos.min()),
        }
        result["backends"][name] = row
        print(
            f"{name:<10} {tps:8.1f} {row['ratio_vs_torch']:8.2f} {query_ms[name]:13.1f} {load_s[name]:7.1f} "
            f"{row['max_abs_diff_vs_torch']:10.2e} {row['min_cosine_vs_torch']:8.4f}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
