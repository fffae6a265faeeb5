"""A reranker: hits whose title shares words with the query move up."""

import re

import plm


class TitleBoost(plm.Reranker):
    name = "title_boost"

    class Config(plm.ComponentConfig):
        boost: float = 1.0
        """Added to a hit's score for each query word in its title."""
        candidates: int = 20
        """How many of the top hits are rescored (the rest keep their order after them)."""

    def depth(self, k: int) -> int:
        return max(k, self.config.candidates)

    def run(self, data: plm.Ranking) -> plm.Ranking:
        wanted = set(re.findall(r"\w+", data.query.text.lower()))
        head = data.hits[: self.config.candidates]
        scores = []
        for hit in head:
            title = set(re.findall(r"\w+", str(hit.metadata.get("title", "")).lower()))
            scores.append(hit.score + self.config.boost * len(wanted & title))
        return plm.rescore(data, scores, self.label)


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(TitleBoost)
