"""The TREC run files of `plm eval`: one per config and query set, the format's six columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm_eval.evaluators.report_writers import write_runs


def test_runs_are_written_per_set_and_a_run_the_format_cannot_hold_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    comparison = {
        "sets": [
            {"set": "test", "runs": {"a.b": {"q1": ["d1", "d2"], "q2": []}, "spaced": {"q1": ["disaster recovery"]}}},
            {"set": "b.test", "runs": {"a": {"q1": ["d2"]}}},  # would clash with a.b's test run in one folder
        ]
    }
    folder = write_runs(comparison, tmp_path / "runs")
    assert folder == tmp_path / "runs"
    assert (folder / "test" / "a.b.trec").read_text() == "q1 Q0 d1 1 2 a.b\nq1 Q0 d2 2 1 a.b\n"
    assert (folder / "b.test" / "a.trec").read_text() == "q1 Q0 d2 1 1 a\n"
    assert not (folder / "test" / "spaced.trec").exists()
    assert "no TREC run for spaced on test: the id 'disaster recovery' holds whitespace" in capsys.readouterr().err
    assert write_runs({"sets": [{"set": "test"}]}, tmp_path / "none") is None
