"""`spans` and `keyphrases`: queries from text with no title, heading, sentence mark or link
(tickets, transcripts, abstracts stripped of punctuation), where the other generators make
none."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import plm
import plm.testing
from plm.synthetic import found_in, leaks, rewrite
from plm_plugins.query_generators.headings import HeadingQueries
from plm_plugins.query_generators.inverse_cloze import InverseClozeQueries
from plm_plugins.query_generators.keyphrases import KeyphraseQueries
from plm_plugins.query_generators.links import LinkQueries
from plm_plugins.query_generators.spans import SpanQueries
from plm_plugins.query_generators.stopwords import ENGLISH, is_content
from plm_plugins.query_generators.text import words

# Lower case, no punctuation, no title, one line each: what `headings`, `inverse_cloze` and
# `links` make nothing from.
TICKETS = {
    "printer": (
        "the printer on the third floor stops after every page and shows a paper jam light even when the tray "
        "is empty we replaced the toner cartridge and restarted it twice but the jam light comes back within "
        "minutes and nobody on the floor can print invoices or shipping labels so the warehouse team is waiting "
        "for a technician who can open the rear panel and check the rollers"
    ),
    "vpn": (
        "since the update last night my laptop cannot connect to the office vpn from home the client says the "
        "certificate has expired and asks for a new token but the token page rejects my password although it "
        "works for email and the calendar i tried the wired network and a phone hotspot with the same result "
        "and my manager needs the quarterly figures from the shared drive before noon"
    ),
    "invoice": (
        "a customer in rotterdam was billed twice for the march subscription and the second charge appears as "
        "a pending refund in the payment portal but their bank shows both charges as settled they want the "
        "duplicate returned to the original card rather than as account credit and they ask whether the annual "
        "plan discount still applies after the correction because the renewal date is next week"
    ),
    "meeting": (
        "transcript of the planning call we agreed to move the database migration to the weekend after the "
        "release freeze because the reporting jobs run every night during the week and cannot be paused "
        "without warning the finance department anna will draft the rollback plan and omar will rehearse the "
        "schema changes on the staging copy while the support team prepares a notice for customers"
    ),
    "short": "the coffee machine in the kitchen leaks water onto the floor whenever someone makes a large cup",
}
DOCS = [plm.Document(id=k, text=v) for k, v in TICKETS.items()]
GENERATORS = [SpanQueries, KeyphraseQueries]


@pytest.mark.parametrize("cls", GENERATORS, ids=lambda c: c.name)
def test_each_keeps_the_contract_on_markdown_and_on_text_without_structure(cls: type[plm.QueryGenerator]) -> None:
    plm.testing.check_query_generator(cls())
    plm.testing.check_query_generator(cls(**({"min_df": 1} if cls is KeyphraseQueries else {})), DOCS)


def test_the_other_generators_make_nothing_from_this_corpus() -> None:
    """Why these two exist: the corpus the tests below use defeats the structured ones."""
    for cls in (HeadingQueries, InverseClozeQueries, LinkQueries):
        assert cls().generate(DOCS) == [], cls.name


def test_spans_are_runs_of_words_picked_by_the_document_id() -> None:
    made = [(q.doc_id, q.text) for q in SpanQueries().generate(DOCS)]
    assert made == [
        (
            "printer",
            "comes back within minutes and nobody on the floor can print invoices or shipping labels so the "
            "warehouse team is waiting for a technician who can open the rear",
        ),
        (
            "vpn",
            "and asks for a new token but the token page rejects my password although it works for email and "
            "the calendar i tried the wired network and a phone",
        ),
        (
            "invoice",
            "they want the duplicate returned to the original card rather than as account credit and they ask "
            "whether the annual plan discount still applies after the",
        ),
        (
            "meeting",
            "the database migration to the weekend after the release freeze because the reporting jobs run "
            "every night during the week",
        ),
    ]
    # One document's run depends on that document alone: not on its neighbours or their order.
    alone = SpanQueries().generate([DOCS[2]])
    assert [q.text for q in alone] == [made[2][1]]
    assert SpanQueries().generate(DOCS[::-1])[::-1] == SpanQueries().generate(DOCS)


def test_a_span_is_cut_from_its_document_and_the_rest_stays() -> None:
    queries = SpanQueries().generate(DOCS)
    rewritten = {d.id: d for d in rewrite(DOCS, queries)[0]}
    for q in queries:
        (span,) = q.remove
        original = TICKETS[q.doc_id]
        assert span in original and span not in rewritten[q.doc_id].text
        assert not found_in(q.text, rewritten[q.doc_id].text)
        assert len(words(rewritten[q.doc_id].text)) == len(words(original)) - len(words(q.text)) >= 40
    assert leaks([(str(i), q) for i, q in enumerate(queries)], rewrite(DOCS, queries)[0]) == []
    # ...and the check can fail: before the cut every span is in its document.
    assert len(leaks([(str(i), q) for i, q in enumerate(queries)], DOCS)) == len(queries)


def test_spans_keep_punctuation_out_of_the_query_and_in_the_cut() -> None:
    text = "Results. " + ", ".join(f"alpha{i} beta{i}" for i in range(40)) + "."
    doc = plm.Document(id="punctuated", text=text)
    (q,) = SpanQueries(min_words=8, max_words=8, min_rest_words=10).generate([doc])
    assert "," not in q.text and len(q.text.split()) == 8
    (span,) = q.remove
    assert span in text and "," in span and span.split()[0].strip(",") == q.text.split()[0]


def test_documents_too_short_to_keep_enough_words_give_no_span() -> None:
    assert "short" not in {q.doc_id for q in SpanQueries().generate(DOCS)}
    # A run shrinks to what the document can spare, never below min_words: 56 = 16 + 40 words.
    for n, expected in ((56, [16]), (60, [20]), (55, [])):
        doc = plm.Document(id="tight", text=" ".join(f"word{i}" for i in range(n)))
        assert [len(q.text.split()) for q in SpanQueries().generate([doc])] == expected, n
    ten = {"min_words": 10, "max_words": 10, "min_rest_words": 40}
    body = " ".join(f"word{i}" for i in range(50))
    assert len(SpanQueries(**ten).generate([plm.Document(id="d", text=body)])) == 1  # 50 = 10 + 40
    assert SpanQueries(**ten).generate([plm.Document(id="d", text=body.rsplit(" ", 1)[0])]) == []  # 49


def test_a_span_is_never_only_stop_words_or_numbers() -> None:
    filler = "and the 2024 of it to 17 in a 3 is on 12 at by 9 " * 6
    doc = plm.Document(id="mostly-filler", text=filler + "sensor calibration drift recorded overnight" + filler)
    (q,) = SpanQueries(min_words=8, max_words=8, min_rest_words=0).generate([doc])
    assert sum(is_content(w) for w in q.text.split()) >= 3
    only_filler = plm.Document(id="filler", text=filler * 3)
    assert SpanQueries(min_rest_words=0).generate([only_filler]) == []
    numbers = plm.Document(id="numbers", text=" ".join(str(i) for i in range(100)))
    assert SpanQueries(min_rest_words=0, min_content_words=1, stopwords=[]).generate([numbers]) == []
    # `stopwords` replaces the built-in list: with none, "and the" are words like any other.
    assert len(SpanQueries(min_rest_words=0, stopwords=[]).generate([only_filler])) == 1


def test_several_spans_per_document_do_not_overlap_and_leave_enough() -> None:
    text = " ".join(TICKETS[k] for k in ("printer", "vpn", "invoice", "meeting"))
    queries = SpanQueries(per_document=3).generate([plm.Document(id="all", text=text)])
    assert len(queries) == 3
    # The rest must keep min_rest_words without all of them: a 69-word ticket spares one run.
    assert len(SpanQueries(per_document=3, min_words=8, max_words=8).generate(DOCS[:1])) == 3
    assert len(SpanQueries(per_document=3).generate(DOCS[:1])) == 1
    places = sorted((text.index(q.remove[0]), text.index(q.remove[0]) + len(q.remove[0])) for q in queries)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(places, places[1:], strict=False))


def test_spans_skip_a_title_line_and_markdown_headings() -> None:
    title = "Microarray analysis of pneumococcal gene expression during invasive disease"
    body = " ".join(f"finding{i} about the bacteria" for i in range(30))
    for i in range(8):
        doc = plm.Document(id=f"d{i}", text=f"{title}\n\n# A heading about nothing at all here\n\n{body}", title=title)
        (q,) = SpanQueries().generate([doc])
        assert q.text.startswith(("finding", "about", "the", "bacteria")), q.text


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_words": 12, "max_words": 8}, "min_words (12) is more than max_words (8)"),
        ({"min_words": 4, "max_words": 8, "min_content_words": 5}, "min_content_words (5) is more than min_words"),
        ({"min_words": 1}, "greater than or equal to 2"),
        ({"per_document": 0}, "greater than or equal to 1"),
    ],
)
def test_span_settings_are_checked(settings: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SpanQueries(**settings)


def test_keyphrases_are_a_documents_distinctive_words() -> None:
    queries = KeyphraseQueries(min_df=1, max_df=1.0).generate(DOCS)
    made = {q.doc_id: q.text.split() for q in queries}
    assert set(made) == {"printer", "vpn", "invoice", "meeting"}  # "short" has 17 words
    assert made["printer"][:2] == ["jam", "light"]  # twice in it, in no other document
    assert made["vpn"][0] == "token"
    for doc_id, chosen in made.items():
        assert 3 <= len(chosen) <= 6 and all(is_content(w) for w in chosen)
        assert all(w in TICKETS[doc_id].split() for w in chosen)
        assert not set(chosen) & ENGLISH
    assert all(q.remove == () for q in queries)  # nothing cut: the words are there to be matched


def test_keyphrases_leave_out_words_of_one_document_by_default() -> None:
    """A word found in one document only (a typo, an order number) names it outright."""
    made = {q.doc_id: q.text.split() for q in KeyphraseQueries().generate(DOCS)}
    for doc_id, chosen in made.items():
        assert all(sum(w in t.split() for t in TICKETS.values()) >= 2 for w in chosen), (doc_id, chosen)
    with pytest.raises(ValidationError, match="min_words"):
        KeyphraseQueries(min_words=7, max_words=6)


def test_both_are_registered() -> None:
    registry = plm.default_registry()
    for cls in GENERATORS:
        assert registry.get(cls.name, "query_generators").cls is cls
