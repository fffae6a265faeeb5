"""Every built-in loader keeps the loaders contract (`plm.testing.check_loader`): the folder
loaders on the kit's Markdown folder, the record loaders on a file of records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plm
import plm.testing

RECORDS = [
    {"_id": "r1", "id": "r1", "title": "Pods", "text": "A pod holds containers that share a network."},
    {"_id": "r2", "id": "r2", "title": "Nodes", "text": "A node runs pods and reports its memory."},
    {"_id": "r3", "id": "r3", "title": "", "text": "Services route traffic to pods.", "team": "a"},
]


def _loader(name: str) -> plm.Loader:
    return plm.default_registry().get(name, "loaders").cls()


@pytest.mark.parametrize("name", ["folder", "markdown_dir"])
def test_a_folder_loader_keeps_the_contract(name: str) -> None:
    plm.testing.check_loader(_loader(name))


def test_json_records_keeps_the_contract(tmp_path: Path) -> None:
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    plm.testing.check_loader(_loader("json_records"), tmp_path / "records.jsonl")
    (tmp_path / "records.json").write_text(json.dumps(RECORDS))
    plm.testing.check_loader(_loader("json_records"), tmp_path / "records.json")


def test_beir_corpus_keeps_the_contract(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    plm.testing.check_loader(_loader("beir_corpus"), tmp_path)
