"""The contextual enricher: title and heading path before the indexed text, raw text kept."""

from __future__ import annotations

from plm_core.records import Chunk
from plm_plugins.enrichers.contextual import ContextualText, context_prefix
from plm_plugins.enrichers.poc_enricher import PocEnricher


def _chunk(text: str = "Set it to 30 seconds.", **kw: object) -> Chunk:
    fields: dict[str, object] = {"heading_path": ("Probes", "Liveness", "Timeouts"), "metadata": {"title": "Probes"}}
    fields.update(kw)
    return Chunk(id="c", doc_id="d", text=text, **fields)  # type: ignore[arg-type]


def test_prefix_is_title_then_headings_with_repeats_written_once() -> None:
    [out] = ContextualText().run([_chunk()])
    assert out.enriched == "Probes > Liveness > Timeouts\n\nSet it to 30 seconds."
    assert out.text == "Set it to 30 seconds." and out.index_text == out.enriched


def test_options_blanks_and_cut() -> None:
    assert context_prefix("  A  title ", ("", "a title", "Sub\nsection"), " / ", 300) == "A title / Sub section"
    assert context_prefix("", (), " > ", 300) == ""
    assert context_prefix("x" * 50, ("y",), " > ", 10) == "x" * 10
    [no_headings] = ContextualText(headings=False).run([_chunk()])
    assert no_headings.enriched == "Probes\n\nSet it to 30 seconds."
    [no_title] = ContextualText(title_key="").run([_chunk(metadata={})])
    assert no_title.enriched == "Probes > Liveness > Timeouts\n\nSet it to 30 seconds."
    bare = _chunk(heading_path=(), metadata={})
    assert ContextualText().run([bare]) == [bare]  # nothing to add: the chunk is unchanged


def test_chained_after_an_enricher_it_prefixes_that_text() -> None:
    chunk = _chunk(keywords=("probe timeout",), entities={})
    [enriched] = PocEnricher().run([chunk])
    [out] = ContextualText().run([enriched])
    assert out.enriched == "Probes > Liveness > Timeouts\n\nprobe timeout\n\nSet it to 30 seconds."
