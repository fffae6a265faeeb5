"""Incremental sync on poc_needle with configs/poc_parity.toml, through the real CLI.

Steps, each a fresh `plm ingest --json` process (so times include start-up and model
load, as a user sees them), on a temporary copy of the corpus and an empty cache:
  1. first ingest            everything computed
  2. unchanged re-run        nothing to do: the "done when" asks < 5% of step 1
  3. one file edited         one sentence changed: only the chunks whose text changed
                             are re-enriched and re-embedded (counters from the summary)
  4. one file removed        `--prune` deletes it
  5. one file added back     added, its vectors come from the cache

  python bench/bench_sync.py [--dataset ../shared/datasets/poc_needle] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "poc_parity.toml"
EDITED = "concepts_workloads_pods_pod-lifecycle.md"  # a long page with many chunks
REMOVED = "tasks_access-application-cluster_web-ui-dashboard.md"


def ingest(corpus: Path, index: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "plm_index.cli", "ingest", str(corpus), "--config", str(CONFIG)]
    cmd += ["--index", str(index), "--json", *extra]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    report = json.loads(res.stdout)
    report["process_wall_s"] = round(wall, 2)
    return report


def edit_one_sentence(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    marker = "Pods follow a defined lifecycle"
    if marker in text:
        new = text.replace(marker, "Pods always follow a well defined lifecycle", 1)
    else:  # any sentence in the middle of the page
        mid = text.index(". ", len(text) // 2) + 2
        new = text[:mid] + "This sentence was added by the sync benchmark. " + text[mid:]
    path.write_text(new, encoding="utf-8")
    return marker if marker in text else "inserted sentence"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "poc_needle")
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temp folder, removed)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sync.json")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="plm-bench-sync-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus, index, data = work / "kubernetes", work / "index", work / "data"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.copytree(args.dataset / "kubernetes", corpus)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0", "PLM_DATA_DIR": str(data)}
    steps: dict[str, Any] = {}
    steps["first"] = ingest(corpus, index, env)
    steps["unchanged"] = ingest(corpus, index, env)
    steps["edited"] = {"edit": edit_one_sentence(corpus / EDITED), **ingest(corpus, index, env)}
    removed = (corpus / REMOVED).read_bytes()
    (corpus / REMOVED).unlink()
    steps["pruned"] = ingest(corpus, index, env, "--prune")
    (corpus / REMOVED).write_bytes(removed)
    steps["re_added"] = ingest(corpus, index, env)
    first, again = steps["first"]["process_wall_s"], steps["unchanged"]["process_wall_s"]
    summary = {
        "first_ingest_s": first,
        "unchanged_rerun_s": again,
        "unchanged_over_first": round(again / first, 4),
        "edited_work": steps["edited"]["work"],
        "edited_s": steps["edited"]["process_wall_s"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "steps": steps}, indent=1))
    print(json.dumps(summary, indent=1))
    for name, step in steps.items():
        keys = ("added", "updated", "unchanged", "deleted", "chunks", "process_wall_s")
        print(name, {k: step[k] for k in keys}, "work:", step["work"])
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
