"""`plm ingest` suggests `plm eval --synthetic` once a folder is big enough, and only then."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from plm_index.commands import SYNTHETIC_TIP_DOCS, synthetic_tip


def _report(added: int, unchanged: int = 0) -> SimpleNamespace:
    return SimpleNamespace(added=[f"d{i}" for i in range(added)], updated=[], unchanged=unchanged)


def test_a_big_folder_gets_the_command(tmp_path: Path) -> None:
    tip = synthetic_tip(_report(SYNTHETIC_TIP_DOCS + 100), [tmp_path], Path("recipe.toml"))
    assert f"--dataset {tmp_path} --corpus . --synthetic 150" in tip and "-c recipe.toml" in tip


def test_small_folders_files_and_syncs_with_nothing_new_get_none(tmp_path: Path) -> None:
    assert synthetic_tip(_report(SYNTHETIC_TIP_DOCS - 1), [tmp_path], None) == ""
    assert synthetic_tip(_report(0, unchanged=5000), [tmp_path], None) == ""
    (tmp_path / "a.md").write_text("x")
    assert synthetic_tip(_report(5000), [tmp_path / "a.md"], None) == ""
    assert synthetic_tip(_report(5000), [tmp_path, tmp_path], None) == ""
