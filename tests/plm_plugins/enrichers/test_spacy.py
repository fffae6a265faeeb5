"""spaCy entities: shape, pipe selection, and parity with the POC's reference."""

from __future__ import annotations

import pydantic
import pytest
from plm_needs import needs

from plm_core.errors import ModelNotFoundError
from plm_core.records import Chunk
from plm_core.registry import Registry
from plm_plugins.enrichers import spacy_entities
from plm_plugins.enrichers.spacy_entities import POC_LABELS, SpacyEntityExtractor

pytestmark = needs("spacy", extra="spacy")

TEXT = (
    "Google and Microsoft opened offices in Paris and London. "
    "Barack Obama met Angela Merkel in Berlin before Google moved to Paris."
)

# Chunks where the NER alone (without the parser's sentence starts) differs from the POC:
# an entity would run across a sentence boundary ("Node N. This field").
SENTENCE_SENSITIVE = {
    "concepts_scheduling-eviction_pod-priority-preemption_mdsem_8",
    "concepts_storage_projected-volumes_mdsem_4",
    "concepts_workloads_pods__index_mdsem_8",
    "concepts_workloads_pods_pod-lifecycle_mdsem_2",
    "contribute__index_mdsem_0",
}


@pytest.fixture(scope="module")
def extractor() -> SpacyEntityExtractor:
    ex = SpacyEntityExtractor()
    try:
        ex.warm_up()
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))
    return ex


def test_defaults_are_the_pocs() -> None:
    cfg = SpacyEntityExtractor().config
    assert cfg.model == "en_core_web_sm" and cfg.labels == POC_LABELS
    assert (cfg.max_chars, cfg.max_per_label, cfg.n_process, cfg.min_chars, cfg.code_ratio) == (5000, 5, 1, 50, 0.3)


def test_entities_grouped_by_label_in_first_seen_order(extractor: SpacyEntityExtractor) -> None:
    out = extractor.run([Chunk(id="a", doc_id="d", text=TEXT)])[0]
    assert out.entities == {
        "ORG": ("Google", "Microsoft"),
        "GPE": ("Paris", "London", "Berlin"),
        "PERSON": ("Barack Obama", "Angela Merkel"),
    }
    assert list(out.entities) == ["ORG", "GPE", "PERSON"]


def test_labels_and_cap_are_applied() -> None:
    ex = SpacyEntityExtractor(labels=["GPE"], max_per_label=2)
    assert ex.extract([TEXT]) == [{"GPE": ("Paris", "London")}]


def test_short_chunks_get_none_and_only_max_chars_are_read(extractor: SpacyEntityExtractor) -> None:
    late = "x " * 2600 + TEXT  # the entities start after character 5,000
    assert extractor.extract(["Google in Paris.", late]) == [{}, {}]
    assert SpacyEntityExtractor(max_chars=6000).extract([late])[0] != {}


def test_minimal_pipes_keep_the_parser_for_sentence_starts(extractor: SpacyEntityExtractor) -> None:
    assert extractor._nlp.pipe_names == ["tok2vec", "parser", "ner"]
    full = SpacyEntityExtractor(minimal_pipes=False)
    full.warm_up()
    assert "lemmatizer" in full._nlp.pipe_names
    assert full.extract([TEXT]) == extractor.extract([TEXT])


def test_missing_model_names_it() -> None:
    with pytest.raises(ModelNotFoundError, match="xx_no_such_model"):
        SpacyEntityExtractor(model="xx_no_such_model").warm_up()


def test_config_is_validated() -> None:
    with pytest.raises(pydantic.ValidationError):
        SpacyEntityExtractor(labels=[])
    with pytest.raises(pydantic.ValidationError):
        SpacyEntityExtractor(max_char=10)


def test_registers_as_spacy_entities() -> None:
    registry = Registry()
    spacy_entities.plm_register_components(registry=registry)
    assert registry.get("spacy_entities").cls is SpacyEntityExtractor


@pytest.mark.dataset
def test_entities_match_the_reference_on_a_sample(
    reference_enriched: list[dict], extractor: SpacyEntityExtractor, reference_text
) -> None:
    # Every 25th chunk plus the sentence-sensitive ones keeps this under a minute; the
    # full corpus was checked once by hand: 0 mismatches.
    sample = [r for i, r in enumerate(reference_enriched) if i % 25 == 0 or r["chunk_id"] in SENTENCE_SENSITIVE]
    assert len(sample) > 290
    chunks = [Chunk(id=r["chunk_id"], doc_id=r["doc_id"], text=reference_text(r)) for r in sample]
    out = extractor.run(chunks)
    bad = [
        c.id
        for c, r in zip(out, sample, strict=True)
        # Label order matters too: the enricher takes values label by label.
        if [(k, list(v)) for k, v in c.entities.items()] != list(r["entities"].items())
    ]
    assert bad == []
