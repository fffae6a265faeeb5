"""`plm eval --synthetic N` on text with no structure (no title, heading, sentence mark or
link): the default generators make no query there and fall back to `spans`; generators named
on the command line never fall back, and their empty result names the way out."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from plm_core.config import load_job
from plm_core.errors import PlmUserError
from plm_core.settings import Settings
from plm_eval import synthetic
from plm_index.plugins import default_registry
from plm_plugins.query_generators.headings import HeadingQueries
from plm_plugins.query_generators.inverse_cloze import InverseClozeQueries
from plm_plugins.query_generators.spans import SpanQueries

REPO = Path(__file__).resolve().parents[1].parent
CONFIG = REPO / "configs" / "experiments" / "bm25_stemmed.toml"
VOCABULARY = (
    "printer toner invoice refund vpn token laptop router backup server disk quota email calendar "
    "password badge parking kitchen heating window license upgrade release rollback migration schema "
    "report ledger payroll contract warehouse shipment label customer supplier"
).split()
GLUE = "the a of to and in on for with after before when but so".split()


def tickets(n: int, length: int = 80) -> dict[str, str]:
    """n tickets of `length` lower-case words, no punctuation, one line each."""
    rng = random.Random(7)
    return {f"t{i:02d}": " ".join(rng.choice(VOCABULARY if j % 2 else GLUE) for j in range(length)) for i in range(n)}


def corpus(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in texts.items():
        (folder / f"{name}.md").write_text(text + "\n")  # title: the file name, one word
    return folder


def build(tmp: Path, names: tuple[str, ...], n: int = 10) -> dict:
    registry = default_registry()
    cfg = load_job(CONFIG, registry)
    settings = Settings(data_dir=str(tmp / "data"), progress=False)
    source = corpus(tmp / "docs", tickets(20))
    _, summary = synthetic.build(cfg, source, tmp / "set", n, names, registry, settings, seed=1)
    return summary


def test_the_default_generators_fall_back_to_spans_on_text_without_structure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING"):
        summary = build(tmp_path, synthetic.DEFAULT_GENERATORS)
    assert summary["fallback"] == ["spans"]
    assert summary["by_generator"] == {"spans": 10} and summary["queries"] == 10
    assert summary["candidates"] == {"headings": 0, "inverse_cloze": 0, "links": 0, "spans": 20}
    assert summary["documents_cut"] >= 10  # each span cut from its ticket
    assert summary["generator_config"]["spans"]["min_words"] == 16  # the settings the fallback ran with
    assert "using spans instead" in caplog.text
    rows = [json.loads(line) for line in (tmp_path / "set" / "queries" / "synthetic.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == {"spans"}


def test_generators_named_on_the_command_line_never_fall_back(tmp_path: Path) -> None:
    with pytest.raises(PlmUserError, match="--generators spans needs no structure"):
        build(tmp_path, ("headings", "inverse_cloze"))


def test_a_corpus_the_defaults_can_use_does_not_fall_back(tmp_path: Path) -> None:
    registry = default_registry()
    cfg = load_job(CONFIG, registry)
    settings = Settings(data_dir=str(tmp_path / "data"), progress=False)
    docs = REPO / "examples" / "sample_corpus" / "docs"
    _, summary = synthetic.build(
        cfg, docs, tmp_path / "set", 20, synthetic.DEFAULT_GENERATORS, registry, settings, seed=3
    )
    assert "fallback" not in summary and "spans" not in summary["candidates"]
    assert set(summary["by_generator"]) <= set(synthetic.DEFAULT_GENERATORS)


def test_make_set_falls_back_only_when_given_a_fallback() -> None:
    from plm_core.records import Document

    docs = [Document(id=k, text=v) for k, v in tickets(6).items()]
    made = synthetic.make_set(docs, [HeadingQueries(), InverseClozeQueries()], 4, fallback=[SpanQueries()])
    assert made.fallback == ("spans",) and len(made.queries) == 4
    with pytest.raises(PlmUserError, match="made no query from these 6 documents"):
        synthetic.make_set(docs, [HeadingQueries(), InverseClozeQueries()], 4)
