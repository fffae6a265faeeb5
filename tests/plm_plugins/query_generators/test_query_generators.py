"""The built-in query generators keep the family's contract, make the queries they say, and
never leave a query findable as a copy of the text it is evaluated on."""

from __future__ import annotations

from dataclasses import replace

import pytest

import plm
import plm.testing
from plm.synthetic import cut, found_in, leaks, rewrite
from plm_plugins.query_generators.headings import HeadingQueries
from plm_plugins.query_generators.inverse_cloze import InverseClozeQueries
from plm_plugins.query_generators.links import LinkQueries, link_keys
from plm_plugins.query_generators.text import render

DOCS = list(plm.testing.MARKDOWN_DOCS)
GENERATORS = [HeadingQueries, InverseClozeQueries, LinkQueries]


@pytest.mark.parametrize("cls", GENERATORS, ids=lambda c: c.name)
def test_each_generator_keeps_the_contract(cls: type[plm.QueryGenerator]) -> None:
    plm.testing.check_query_generator(cls())


@pytest.mark.parametrize("cls", GENERATORS, ids=lambda c: c.name)
def test_no_query_is_found_verbatim_in_the_indexed_text_of_its_target(cls: type[plm.QueryGenerator]) -> None:
    queries = cls().generate(DOCS)
    rewritten = {d.id: d for d in rewrite(DOCS, queries)[0]}
    for q in queries:
        target = rewritten[q.doc_id]
        assert not found_in(q.text, target.title + "\n\n" + target.text), (q.kind, q.text, q.doc_id)


def test_the_leakage_check_fails_on_a_corpus_left_as_it_was() -> None:
    """The checks above can fail: the same queries over the corpus before the cut are found,
    in their source as a reader sees it (a link's sentence: its anchor text, not its URL)."""
    for cls in GENERATORS:
        queries = cls().generate(DOCS)
        shown = [replace(d, text=render(d.text)) for d in DOCS]
        assert len(leaks([(str(i), q) for i, q in enumerate(queries)], shown)) == len(queries), cls.name


def test_the_kit_rejects_a_generator_whose_copied_span_is_not_in_its_source() -> None:
    class Misplaced(plm.QueryGenerator):
        name = "misplaced"

        def generate(self, documents):  # type: ignore[no-untyped-def]
            # Says it copied from the first document what the last one holds: the cut would miss it.
            last = documents[-1].text.split("\n\n")[1]
            return [plm.SyntheticQuery("volumes and claims", documents[0].id, self.name, remove=(last,))]

    with pytest.raises(AssertionError, match="verbatim in its source document"):
        plm.testing.check_query_generator(Misplaced())


def test_headings_are_queries_for_their_document_and_shared_ones_are_left_out() -> None:
    made = {(q.text, q.doc_id) for q in HeadingQueries().generate(DOCS)}
    assert ("Pod lifecycle and restart policy", "concepts_pods") in made
    assert ("Services and stable network addresses", "concepts_services") in made
    assert ("Mounting a volume read only", "concepts_storage") in made
    assert not any(text == "Overview" for text, _ in made)  # two pages share it; and too short
    assert not any(text == "Pods" for text, _ in made)  # one word: too vague


def test_a_heading_shared_by_two_documents_names_neither() -> None:
    docs = [replace(DOCS[1], text=DOCS[1].text + "\n## Pod lifecycle and restart policy\n")] + DOCS[::2]
    assert not any(q.text == "Pod lifecycle and restart policy" for q in HeadingQueries().generate(docs))


def test_inverse_cloze_takes_one_sentence_per_document_and_keeps_the_rest() -> None:
    queries = InverseClozeQueries().generate(DOCS)
    assert sorted(q.doc_id for q in queries) == sorted(d.id for d in DOCS)
    rewritten = {d.id: d for d in rewrite(DOCS, queries)[0]}
    for q in queries:
        (span,) = q.remove
        assert span in next(d.text for d in DOCS if d.id == q.doc_id)
        assert span not in rewritten[q.doc_id].text
        assert len(rewritten[q.doc_id].text.split()) >= 40  # what it must be found by


def test_links_are_queries_for_the_page_they_point_to() -> None:
    made = {(q.doc_id, q.source_doc, q.text) for q in LinkQueries().generate(DOCS)}
    assert (
        "concepts_services",
        "concepts_pods",
        "You can read about how services expose pods to clients outside the cluster when they need a stable address.",
    ) in made
    assert ("concepts_pods", "concepts_storage") in {(t, s) for t, s, _ in made}


def test_link_targets_become_document_ids() -> None:
    assert "concepts_workloads_pods" in link_keys("/docs/concepts/workloads/pods/#lifecycle", ["docs"])
    assert "concepts__index" in link_keys("/docs/concepts/", ["docs"])
    assert link_keys("https://example.com/docs/x", ["docs"]) == []
    assert link_keys("#section", ["docs"]) == []


def test_the_cut_takes_every_copy_whatever_the_case_and_punctuation() -> None:
    text = "Pod Lifecycle, and restart   policy. Then pod lifecycle and restart-policy again."
    assert found_in("pod lifecycle and restart policy", text)
    cut_text = cut(text, "pod lifecycle and restart policy")
    assert not found_in("pod lifecycle and restart policy", cut_text)
    assert "Then" in cut_text and "again" in cut_text
    assert not found_in("pod life", "podlife cycle")  # words, not characters


def test_the_generators_are_registered() -> None:
    registry = plm.default_registry()
    for cls in GENERATORS:
        assert registry.get(cls.name, "query_generators").cls is cls


def test_inverse_cloze_never_takes_the_title_line_for_a_sentence() -> None:
    title = "Microarray analysis of pneumococcal gene expression during invasive disease."
    body = " ".join(f"Sentence number {i} says something different about the bacteria here." for i in range(12))
    doc = plm.Document(id="d", text=f"{title}\n\n{body}", title=title)
    for seed in range(5):
        (q,) = InverseClozeQueries().generate([replace(doc, id=f"d{seed}")])
        assert q.text != title and q.text.startswith("Sentence number")
