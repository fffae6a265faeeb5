"""A third-party plm stage: normalise a question before expansion and retrieval."""

from __future__ import annotations

import re
from dataclasses import replace

from plm import BaseComponent, ComponentConfig, Query, hookimpl

DEFAULT_DROP = ["how", "do", "does", "i", "we", "can", "what", "is", "are", "the", "a", "an", "to", "my", "our"]


class QuestionNormalizer(BaseComponent[Query, Query]):
    """Lowercases, strips punctuation and drops boilerplate words from the query text."""

    name = "question_normalizer"
    family = "normalizers"  # a new family (a base of its own): plural, as every family is
    input_type = Query
    output_type = Query

    class Config(ComponentConfig):
        drop: list[str] = DEFAULT_DROP
        lowercase: bool = True

    def run(self, data: Query) -> Query:
        text = data.text.lower() if self.config.lowercase else data.text
        drop = {w.lower() for w in self.config.drop}
        words = [w for w in re.findall(r"[\w\-/.]+", text) if w.strip(".").lower() not in drop]
        return replace(data, text=" ".join(w.strip(".") for w in words) or data.text)


@hookimpl
def plm_register_components(registry) -> None:  # type: ignore[no-untyped-def]
    registry.add(QuestionNormalizer)
