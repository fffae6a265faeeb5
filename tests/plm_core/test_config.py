from __future__ import annotations

from pathlib import Path

import pytest

from plm_core.config import apply_overrides, load_job
from plm_core.errors import ConfigError
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[2]
POC = REPO / "configs" / "poc_parity.toml"


@pytest.fixture(scope="module")
def registry():
    return build_registry(autoload=False)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(POC.read_text() + text if text.startswith("#+") else text)
    return path


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = POC.read_text()
    assert old in text
    path = tmp_path / "job.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_poc_parity_config_is_valid(registry) -> None:
    job = load_job(POC, registry)
    assert [s.use for s in job.index] == ["markdown_dir", "markdown_semantic", "yake", "spacy_entities", "poc_enricher"]
    assert [s.use for s in job.query] == ["dictionary", "embed_query", "hybrid"]
    retrieve = job.query[-1]
    assert set(retrieve.nested["retrievers"]) == {"dense", "bm25"}
    assert retrieve.nested["fuser"].use == "rrf"
    from plm_index.commands import describe

    assert "hybrid" in describe(job)


def test_unknown_stage_name_gives_closest_match(registry, tmp_path) -> None:
    path = _variant(tmp_path, 'use = "rrf"', 'use = "rff"')
    with pytest.raises(ConfigError) as info:
        load_job(path, registry)
    msg = str(info.value)
    assert str(path) in msg and "[query.retrieve.fuser]" in msg and "Did you mean 'rrf'?" in msg


def test_unknown_key_names_table_key_and_allowed(registry, tmp_path) -> None:
    path = _variant(tmp_path, "target_words = 400", "target_wrds = 400")
    with pytest.raises(ConfigError) as info:
        load_job(path, registry)
    msg = str(info.value)
    assert "[index.chunk]" in msg and "'target_wrds'" in msg and "target_words" in msg


def test_wrong_type_is_reported(registry, tmp_path) -> None:
    path = _variant(tmp_path, "target_words = 400", 'target_words = "many"')
    with pytest.raises(ConfigError, match=r"\[index.chunk\].*target_words"):
        load_job(path, registry)


def test_out_of_range_value_is_reported(registry, tmp_path) -> None:
    path = _variant(tmp_path, "k1 = 1.5", "k1 = -1.0")
    with pytest.raises(ConfigError, match=r"\[query.retrieve.retrievers.bm25\].*k1"):
        load_job(path, registry)


def test_missing_file_and_malformed_toml(registry, tmp_path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_job(tmp_path / "nope.toml", registry)
    bad = tmp_path / "bad.toml"
    bad.write_text("[job\nname = 1")
    with pytest.raises(ConfigError, match="malformed TOML"):
        load_job(bad, registry)


def test_overrides_set_nested_values(registry) -> None:
    job = load_job(POC, registry, ["query.retrieve.fuser.default.k=30", "job.name=other"])
    assert job.job.name == "other"
    assert job.query[-1].nested["fuser"].config.default.k == 30


def test_override_parsing_keeps_strings() -> None:
    raw: dict = {}
    apply_overrides(raw, ["a.b=hello", "a.c=3", "a.d=[1, 2]"])
    assert raw == {"a": {"b": "hello", "c": 3, "d": [1, 2]}}


@pytest.mark.parametrize("label", ["bm\\nx", "bm\\u202ex", "a/b", "a\\\\b", "..", "a b", "", "x" * 65])
def test_a_table_label_that_cannot_be_a_folder_name_is_a_config_error(registry, tmp_path, label: str) -> None:
    # Labels name folders (bm25_<label>/) and appear in messages and metrics: no newline, no
    # bidirectional override, no path separator, no dot.
    path = _variant(tmp_path, "[query.retrieve.retrievers.bm25]", f'[query.retrieve.retrievers."{label}"]')
    with pytest.raises(ConfigError, match="letters, digits") as info:
        load_job(path, registry)
    message = str(info.value)
    assert "\n" not in message and "\u202e" not in message


def test_ordinary_labels_are_accepted(registry, tmp_path) -> None:
    path = _variant(tmp_path, "[query.retrieve.retrievers.bm25]", '[query.retrieve.retrievers."bm25_v2-ä"]')
    text = path.read_text().replace("bm25 = ", '"bm25_v2-ä" = ').replace('"bm25"', '"bm25_v2-ä"')
    path.write_text(text)
    load_job(path, registry)


def test_a_label_misspelling_its_stage_is_said(registry, tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 45 item 17: `[query.colapse] use = "collapse"` passed `plm config check` silently."""
    text = POC.read_text() + '\n[query.colapse]\nuse = "collapse"\nper_doc = 1\n'
    (tmp_path / "job.toml").write_text(text)
    load_job(tmp_path / "job.toml", registry)
    assert "'colapse' looks like a misspelling of its stage 'collapse'" in caplog.text
    caplog.clear()
    load_job(POC, registry)  # labels unlike their stage (retrieve, expand...) say nothing
    assert "misspelling" not in caplog.text
