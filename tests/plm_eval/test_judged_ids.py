"""An evaluation that cannot silently miss: qrels that name documents the index does not hold
(`184` judged, `184.html` indexed) are said before any metric, with the id rule that would
match them, and a run where none is indexed stops with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_core.errors import PlmUserError
from plm_eval.judged_ids import judged_coverage

REPO = Path(__file__).resolve().parents[2]


def test_enough_judged_documents_indexed_is_no_news() -> None:
    assert judged_coverage(["a", "b"], ["a", "b", "c"]) is None
    assert judged_coverage([f"d{i}" for i in range(10)], [f"d{i}" for i in range(9)]) is None  # 90%
    assert judged_coverage([], ["a"]) is None


def test_a_few_judged_documents_indexed_is_a_line_with_the_count() -> None:
    line = judged_coverage([f"d{i}" for i in range(10)], ["d0", "d1"])
    assert line is not None and line.startswith("only 2 of the 10 judged documents are in the index")


def test_no_judged_document_indexed_stops_and_names_the_id_rule_that_matches() -> None:
    with pytest.raises(PlmUserError, match=r"only 0 of the 2 .*ids = 'stem': pass --set index.load.ids=stem"):
        judged_coverage(["184", "185"], ["pages/184.html", "pages/185.html", "other.md"])
    with pytest.raises(PlmUserError, match="check the qrels against the loader's ids"):
        judged_coverage(["x1"], ["a", "b"])


def test_plm_eval_stops_with_one_line_when_no_judged_id_is_indexed(tmp_path: Path) -> None:
    data = tmp_path / "ds"
    (data / "pages").mkdir(parents=True)
    (data / "qrels").mkdir()
    for i in (1, 2):
        (data / "pages" / f"{i}.html").write_text(f"<h1>Page {i}</h1><p>zebra{i} facts</p>")
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"zebra{i}"}) + "\n" for i in (1, 2))
    )
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\t1\t1\nq2\t2\t1\n")
    config = tmp_path / "html.toml"
    config.write_text(
        '[job]\nname = "html"\ncorpus = ["pages"]\nqueries = ["test"]\n[store]\nuse = "sqlite"\n'
        '[index.load]\nuse = "folder"\n[index.chunk]\nuse = "markdown_semantic"\n'
        '[query.retrieve]\nuse = "bm25s"\ntokenizer = "bm25s_stem"\n'
    )
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "plm_index.cli", "eval", "-c", str(config), "--dataset", str(data), "--no-chart"]
    res = subprocess.run([*cmd, "--out", str(tmp_path / "r1")], capture_output=True, text=True, env=env, cwd=REPO)
    assert res.returncode == 2, res.stdout + res.stderr  # a user error: one line, no traceback
    assert "only 0 of the 2 judged documents" in res.stderr and "index.load.ids=stem" in res.stderr
    assert "Traceback" not in res.stderr
    fixed = subprocess.run(
        [*cmd, "--out", str(tmp_path / "r2"), "--set", "index.load.ids=stem", "--force"],
        capture_output=True, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "only" not in fixed.stdout + fixed.stderr


def test_two_corpus_selections_of_one_dataset_never_share_an_index(tmp_path: Path) -> None:
    data = tmp_path / "ds"
    for sub, ext, body in (("md", "md", "# Page {i}\n\nzebra{i} facts\n"), ("html", "html", "<p>zebra{i} facts</p>")):
        (data / sub).mkdir(parents=True)
        for i in (1, 2, 3):
            (data / sub / f"{i}.{ext}").write_text(body.format(i=i))
    (data / "qrels").mkdir()
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"zebra{i}"}) + "\n" for i in (1, 2))
    )
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\t1\t1\nq2\t2\t1\n")
    config = tmp_path / "sel.toml"
    config.write_text(
        '[job]\nname = "sel"\ncorpus = ["md"]\nqueries = ["test"]\n[store]\nuse = "sqlite"\n'
        '[index.load]\nuse = "folder"\nids = "stem"\n[index.chunk]\nuse = "markdown_semantic"\n'
        '[query.retrieve]\nuse = "bm25s"\ntokenizer = "bm25s_stem"\n'
    )
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "0"}
    counts = []
    for n, corpus in enumerate(["md", "html", "md"]):
        cmd = [sys.executable, "-m", "plm_index.cli", "eval", "-c", str(config), "--dataset", str(data), "--no-chart"]
        cmd += ["--corpus", corpus, "--out", str(tmp_path / f"r{n}")]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
        assert res.returncode == 0, res.stdout + res.stderr
        summary = json.loads((tmp_path / f"r{n}" / "summary.json").read_text())
        counts.append((summary["configs"][0]["ingest"]["chunks"], summary["configs"][0]["index_dir"]))
    assert [c for c, _ in counts] == [3, 3, 3]  # each selection alone, never 6
    assert counts[0][1] != counts[1][1] and counts[0][1] == counts[2][1]
    assert counts[0][1].endswith("sel-ds")  # the config's own selection keeps the plain name
