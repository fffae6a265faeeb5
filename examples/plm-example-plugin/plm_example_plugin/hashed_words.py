"""A third-party embedder: each word hashed into one of `dim` buckets, counts L2-normalised.

No model and no download: vectors in microseconds, so a benchmark can fill a dense index
of a million chunks on a small machine (bench/bench_fresh.py --toy-embedder). Texts that
share words get close vectors, which is all such a measurement needs; it is no substitute
for a trained model's quality.

    [embedder]
    use = "hashed_words"
    dim = 384
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field

import plm


class HashedWordsEmbedder(plm.Embedder):
    name = "hashed_words"

    class Config(plm.ComponentConfig):
        dim: int = Field(384, ge=2, le=4096)
        """Vector dimensions (buckets words are hashed into)."""

    config: Config

    @property
    def model_name(self) -> str:
        return f"hashed-words-{self.config.dim}"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.config.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[i, int.from_bytes(digest, "little") % self.config.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(HashedWordsEmbedder)
