"""The kernel's rules for synthetic queries: a copy is found as a tokenizer sees words."""

from __future__ import annotations

from plm.evaluation import SyntheticQuery
from plm.synthetic import leaks, normalized, rewrite
from plm_core.records import Document


def test_a_query_copied_into_another_document_is_cut_there_too() -> None:
    docs = [Document("a", "Alpha beta gamma delta. More words here."), Document("b", "x alpha  BETA gamma y")]
    q = SyntheticQuery("alpha beta gamma", "a", "t", remove=("Alpha beta gamma delta.",))
    assert leaks([("q", q)], docs) == ["q"]
    rewritten, changed = rewrite(docs, [q])
    assert changed == 2 and leaks([("q", q)], rewritten) == []
    assert rewritten[0].text.strip() == "More words here."
    assert normalized(rewritten[1].text) == " x y "


def test_a_title_is_cut_like_the_text() -> None:
    docs = [Document("a", "Body words only here.", title="The Title Of It")]
    q = SyntheticQuery("the title of it", "a", "headings", remove=("The Title Of It",))
    (doc,), _ = rewrite(docs, [q])
    assert doc.title == "" and leaks([("q", q)], [doc]) == []
