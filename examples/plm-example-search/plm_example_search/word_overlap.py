"""A retriever: a chunk scores the share of the query's distinct words it contains."""

import json
import re
from pathlib import Path

import numpy as np

import plm


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class WordOverlap(plm.Retriever, plm.SavedIndex):
    name = "word_overlap"

    class Config(plm.ComponentConfig):
        min_share: float = 0.0
        """Leave out chunks holding less than this share of the query's words."""

    def index(self, snapshot: plm.Snapshot) -> None:
        self.ids = list(snapshot.chunk_ids)
        self.words = [words(text) for text in snapshot.index_texts]

    def save(self, folder: Path) -> None:
        rows = {"ids": self.ids, "words": [sorted(w) for w in self.words]}
        (folder / "words.json").write_text(json.dumps(rows))

    def open_saved(self, folder: Path, snapshot: plm.Snapshot) -> None:
        rows = json.loads((folder / "words.json").read_text())
        self.ids, self.words = rows["ids"], [set(w) for w in rows["words"]]

    def search(self, query: plm.ExpandedQuery, n: int, allowed=None) -> list[plm.ScoredChunk]:
        wanted = words(query.text)
        shares = np.array([len(wanted & w) / max(1, len(wanted)) for w in self.words])
        shares[shares < self.config.min_share] = 0.0
        return plm.top_n(shares, n, self.ids, self.label, allowed, drop_zero=True)


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(WordOverlap)
