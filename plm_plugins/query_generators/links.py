"""Markdown links as queries for the page they point to: the sentence around a link, the
link shown as its anchor text, is what someone who wanted that page might type. The
sentence is removed from the page it came from (the linking page must not win by holding
the query verbatim) and from every other document."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import Field

from plm import ComponentConfig, Document, QueryGenerator, SyntheticQuery, hookimpl
from plm_plugins.query_generators.text import LINK, paragraphs, render, sentences, words

if TYPE_CHECKING:
    from plm import Registry


def link_keys(target: str, prefixes: Sequence[str]) -> list[str]:
    """Document ids a link target may name: its path with the site prefix, fragment and
    extension dropped, as itself, flattened with `_` (poc_needle's file names) or as a
    section index (`<path>/_index`, `<path>__index`)."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path:
        return []
    path = parts.path.strip("/")
    for prefix in prefixes:
        if path.startswith(prefix.strip("/") + "/"):
            path = path[len(prefix.strip("/")) + 1 :]
    path = posixpath.normpath(path) if path else ""
    if path.endswith((".md", ".html")):
        path = path.rsplit(".", 1)[0]
    if not path or path.startswith(".."):
        return []
    flat = path.replace("/", "_")
    return [path, f"{path}/_index", f"{path}/index", flat, f"{flat}__index", f"{flat}_index"]


class LinkQueries(QueryGenerator):
    """Each sentence holding a link to another document of the corpus -> a query judged
    relevant to the linked document. Links are matched to document ids by path
    (`link_keys`); links to pages outside the corpus, to the same page or to fragments
    only are skipped; a sentence with links to two documents is skipped (which one would
    it be a query for?)."""

    name = "links"

    class Config(ComponentConfig):
        min_words: int = Field(5, ge=1)
        """Shorter sentences (a bare "See Pods.") say too little."""
        max_words: int = Field(40, ge=1)
        """Longer sentences are passages, not queries."""
        prefixes: list[str] = ["docs"]
        """Site path prefixes dropped from link targets before they are matched to ids (/docs/...)."""
        per_target: int = Field(3, ge=1)
        """Queries for one linked document at most (a popular page is linked from everywhere)."""

    config: Config

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        c = self.config
        ids = {d.id for d in documents}
        count: dict[str, int] = {}
        out: list[SyntheticQuery] = []
        for doc in documents:
            for para in paragraphs(doc.text):
                for raw in sentences(para):
                    targets = set()
                    for m in LINK.finditer(raw):
                        if m.group(1):  # an image
                            continue
                        hit = next((k for k in link_keys(m.group(3), c.prefixes) if k in ids), None)
                        if hit is not None and hit != doc.id:
                            targets.add(hit)
                    if len(targets) != 1:
                        continue
                    (target,) = targets
                    text = render(raw.strip().lstrip("-*+> ").strip())
                    if not c.min_words <= len(words(text)) <= c.max_words or count.get(target, 0) >= c.per_target:
                        continue
                    count[target] = count.get(target, 0) + 1
                    out.append(SyntheticQuery(text, target, self.name, remove=(raw,), source_doc=doc.id))
        return out


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LinkQueries)
