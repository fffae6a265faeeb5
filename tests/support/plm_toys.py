"""Toy stages shared by tests: exact, predictable, no model weights. `tests/conftest.py`
puts this folder on sys.path, so a test imports it as `plm_toys`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plm_core.component import ComponentConfig
from plm_core.interfaces import Embedder


def bag_of_words(vocab: Sequence[str]) -> type[Embedder]:
    """An embedder (config name `bag_of_words`) whose vector counts each word of `vocab` in
    the text, L2-normalised: enough to make dense results predictable."""
    words = list(vocab)

    class BagOfWordsEmbedder(Embedder):
        name = "bag_of_words"

        class Config(ComponentConfig):
            pass

        @property
        def model_name(self) -> str:
            return "bag-of-words"

        def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
            import numpy as np

            rows = np.array([[t.lower().split().count(w) for w in words] for t in texts], dtype=np.float32) + 1e-3
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    return BagOfWordsEmbedder
