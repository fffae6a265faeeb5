"""Markdown as people write it, measured on a real docs tree (issue 48): how many chunks get a
wrong heading path with the recipe's old reading (`markdown_dir`, the POC's `#` rule) and
with the new one (`folder` + `headings = "commonmark"`).

A heading path is wrong when one of its titles is not a heading of the page as CommonMark
reads it (a `# comment` in fenced code), or still carries a `{ #id }` attribute list. The
truth is CommonMark's headings (`plm_plugins.commonmark.atx_headings`, attributes split off,
and setext headings), checked independently against markdown-it-py's parser.

    python bench/bench_markdown_headings.py /path/to/fastapi/docs/en/docs
"""

from __future__ import annotations

import sys
from pathlib import Path

from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker
from plm_plugins.loaders.folder import FolderLoader
from plm_plugins.loaders.markdown_dir import MarkdownLoader

CHUNKING = dict(target_words=400, min_words=50, max_words=800, overlap_sentences=1, max_heading_level=4,
                setext_headings=True)  # fmt: skip


def true_headings(text: str) -> set[str]:
    """Every heading title of a page as markdown-it-py (CommonMark) parses it, `{ #id }` off."""
    from markdown_it import MarkdownIt

    from plm_plugins.commonmark import heading_attributes

    tokens = MarkdownIt("commonmark").parse(text)
    return {
        heading_attributes(" ".join(tokens[i + 1].content.split()))[0]
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    }


def count(docs: list, chunker: MarkdownSemanticChunker, raw: dict[str, str]) -> dict[str, int]:
    chunks = chunker.run(docs)
    wrong = attrs = from_code = 0
    pages, code_pages = set(), set()
    truths = {doc_id: true_headings(text) for doc_id, text in raw.items()}
    for c in chunks:
        truth = truths[c.doc_id]
        bad = [t for t in c.heading_path if t not in truth]
        if bad:
            wrong += 1
            pages.add(c.doc_id)
        attrs += any("{" in t and "#" in t for t in c.heading_path)
        if any("{" not in t for t in bad):  # not a real heading at all: a line of code
            from_code += 1
            code_pages.add(c.doc_id)
    return {"chunks": len(chunks), "wrong_heading_path": wrong, "pages_with_one": len(pages), "with_attributes": attrs,
            "from_code": from_code, "pages_from_code": len(code_pages)}  # fmt: skip


def main() -> None:
    root = Path(sys.argv[1])
    raw = {p.relative_to(root).with_suffix("").as_posix(): p.read_text() for p in sorted(root.rglob("*.md"))}
    before = MarkdownLoader(setext_title=True).run(str(root))
    after = [d for d in FolderLoader(pattern="**/*.md").run(str(root))]
    print("pages:", len(raw))
    print("before (markdown_dir, POC headings):", count(before, MarkdownSemanticChunker(**CHUNKING), raw))
    print(
        "after (folder, commonmark headings): ",
        count(after, MarkdownSemanticChunker(headings="commonmark", **CHUNKING), raw),
    )
    titles_with_attrs = sum("{" in d.title and "#" in d.title for d in before)
    print("titles with an attribute list: before", titles_with_attrs, "after",
          sum("{" in d.title and "#" in d.title for d in after))  # fmt: skip


if __name__ == "__main__":
    main()
