"""Every built-in enricher that runs without model weights keeps the enrichers contract
(`plm.testing.check_chunk_transform`); spaCy's when its model is installed. GLiNER's runs
on a tiny model in test_gliner.py."""

from __future__ import annotations

import pytest

import plm
import plm.testing


@pytest.mark.parametrize("name", ["contextual", "poc_enricher", "yake"])
def test_a_built_in_enricher_keeps_the_contract(name: str) -> None:
    plm.testing.check_chunk_transform(plm.default_registry().get(name, "enrichers").cls())


@pytest.mark.slow  # loads a spaCy model (about 8 s)
def test_spacy_entities_keeps_the_contract() -> None:
    extractor = plm.default_registry().get("spacy_entities", "enrichers").cls()
    try:
        extractor.warm_up()
    except (plm.ModelNotFoundError, plm.MissingDependencyError) as err:
        pytest.skip(str(err))
    plm.testing.check_chunk_transform(extractor)
