"""Sanity checks for the multilingual FastAPI-docs test set in this folder (stdlib only).

For each language it reports the number of pages and characters in ``corpus/<lang>.jsonl.gz``,
checks that every question id is the same across languages, that every judged page exists in
that language's corpus, that each question's language-independent answer terms (numbers,
identifiers, from ``checks.json``) occur in its relevant page, and reports the fraction of
questions whose key term (a term taken from the question's own text) is found as a
case-insensitive substring of the relevant page.  It also checks that every translated page has
the same heading anchors and the same number of code fences, admonitions and code-include lines
as the English page (a sign that no section is missing).  Exits non-zero on a hard failure.

Usage::

    python bench/languages/check_set.py
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANGUAGES: tuple[str, ...] = ("en", "zh", "ja", "ko", "de", "ru", "fr", "es")


def load_corpus(lang: str) -> dict[str, str]:
    """Return ``{_id: text}`` for one language."""
    with gzip.open(HERE / "corpus" / f"{lang}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return {d["_id"]: d["text"] for d in map(json.loads, fh)}


_ANCHOR = re.compile(r"^#+ .*\{ *#([^}\s]+) *\}", re.M)


def structure(text: str) -> tuple[list[str], int, int, int]:
    """Heading anchors, and counts of code fences, admonition lines and code includes."""
    return (
        _ANCHOR.findall(text),
        text.count("```"),
        len(re.findall(r"^///", text, re.M)),
        len(re.findall(r"^\{\*", text, re.M)),
    )


def load_queries(lang: str) -> dict[str, dict[str, object]]:
    """Return ``{_id: query record}`` for one language."""
    lines = (HERE / "queries" / f"{lang}.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["_id"]: q for q in map(json.loads, filter(None, lines))}


def load_qrels() -> dict[str, tuple[str, str]]:
    """Return ``{query-id: (corpus-id, split)}`` from both qrels files."""
    out: dict[str, tuple[str, str]] = {}
    for split in ("dev", "test"):
        lines = (HERE / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        assert lines[0] == "query-id\tcorpus-id\tscore", lines[0]
        for line in lines[1:]:
            qid, cid, score = line.split("\t")
            assert score == "1" and qid not in out, line
            out[qid] = (cid, split)
    return out


def main() -> int:
    """Run the checks, print a report, return the exit status."""
    qrels = load_qrels()
    checks = {c["_id"]: c for c in json.loads((HERE / "checks.json").read_text(encoding="utf-8"))["questions"]}
    failures: list[str] = []
    ids: set[str] | None = None
    english = {k: structure(v) for k, v in load_corpus(LANGUAGES[0]).items()}
    print("lang\tpages\tchars\tsame_structure\tqueries\tjudged_page_found\tanswer_terms_found\tkey_term_found")
    for lang in LANGUAGES:
        corpus = load_corpus(lang)
        queries = load_queries(lang)
        ids = ids or set(corpus)
        if set(corpus) != ids:
            failures.append(f"{lang}: corpus ids differ from {LANGUAGES[0]}")
        if set(queries) != set(qrels):
            failures.append(f"{lang}: query ids differ from the qrels")
        partial = [k for k, v in corpus.items() if k in english and structure(v) != english[k]]
        for k in partial:
            print(f"  note: {lang} {k}: structure differs from the English page (partial translation?)")
        found = answers = keys = 0
        for qid, q in queries.items():
            meta = q["metadata"]
            assert isinstance(meta, dict)
            cid, split = qrels[qid]
            if meta.get("split") != split or meta.get("language") != lang:
                failures.append(f"{lang} {qid}: metadata {meta} does not match split {split}")
            page = corpus.get(cid)
            if page is None:
                failures.append(f"{lang} {qid}: judged page {cid} not in corpus")
                continue
            found += 1
            missing = [t for t in checks[qid]["answer_terms"] if t not in page]
            if missing:
                failures.append(f"{lang} {qid}: answer terms {missing} not in {cid}")
            else:
                answers += 1
            key = checks[qid]["key_term"][lang]
            if key.lower() not in str(q["text"]).lower():
                failures.append(f"{lang} {qid}: key term {key!r} not in the question text")
            if key.lower() in page.lower():
                keys += 1
            else:
                print(f"  note: {lang} {qid}: key term {key!r} not found in {cid}")
        n = len(queries)
        chars = sum(len(t) for t in corpus.values())
        same = len(corpus) - len(partial)
        print(f"{lang}\t{len(corpus)}\t{chars}\t{same}\t{n}\t{found}/{n}\t{answers}/{n}\t{keys}/{n} ({keys / n:.0%})")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
