"""bench/bench_languages.py runs: its tiny mode (two languages, multilingual BM25, a tenth of
the pages) through real `plm eval` runs, so a change that breaks the benchmark fails here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs

REPO = Path(__file__).resolve().parents[2]

pytestmark = [needs("py3langid", "Stemmer", extra="languages"), pytest.mark.slow]


def test_the_language_benchmark_runs_in_its_tiny_mode(tmp_path: Path) -> None:
    out = tmp_path / "languages.json"
    cmd = [sys.executable, str(REPO / "bench/bench_languages.py"), "--tiny", "--work", str(tmp_path / "w")]
    res = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    table = json.loads(out.read_text())["ndcg@10"]
    assert set(table) == {"en", "zh"}
    assert all(0.5 < table[lang]["bm25_multilingual"] <= 1.0 for lang in table), table
