"""Cross-encoder reranking: a sentence-transformers `CrossEncoder` reads (query, chunk text)
pairs together and rescores the top `candidates` hits of retrieval.

    [query.rerank]
    use = "cross_encoder"
    model = "balanced"      # or "fast", "accurate", any model name or a local folder
    candidates = 30

It asks retrieval for max(k, candidates) hits (`depth`), rescores the first `candidates`
with the ORIGINAL query text (what the user typed, not an expander's rewrite: the model
judges relevance to the question, and expansion terms are retrieval aids), orders them by
the cross-encoder's score (ties keep their retrieval order), puts the hits it did not
rescore after them in their order, and renumbers ranks from 1; the core then cuts to k.

What each hit carries afterwards (`Hit.sources` maps a name to `{"rank": 1-based rank, "score": score}`):
- `score`: the cross-encoder's score (the model's own output: a sigmoid in (0, 1) for
  the ms-marco models) for rescored hits; hits past `candidates` keep the score they came
  with, so a score's scale tells which kind a hit is (and so does the next entry).
- `sources[<stage label>]` (e.g. "rerank"): its rank and score among the rescored hits;
  only rescored hits have it.
- `sources["fused"]`: the rank and score the hit had in the ranking retrieval passed on
  (fused when hybrid, the retriever's own when single), on every hit. A second reranker
  keeps the first one's "fused" entry: the rank it received is in the first one's entry.
- the retrievers' entries (`bm25`, `dense`, ...) are unchanged.

The model is found through the shared model locator (`plm.models`) on first use, so
`plm config check` loads nothing; offline, an absent model fails within seconds naming
the model and how to get it.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import (
    BEFORE,
    ComponentConfig,
    ConfigError,
    MissingDependencyError,
    Ranking,
    Reranker,
    Settings,
    hookimpl,
    load_settings,
    models,
    rescore,
)

if TYPE_CHECKING:
    from plm import Registry

logger = logging.getLogger(__name__)

PROFILES = {
    "fast": "cross-encoder/ms-marco-TinyBERT-L2-v2",
    "balanced": "cross-encoder/ms-marco-MiniLM-L6-v2",
    "accurate": "cross-encoder/ms-marco-MiniLM-L12-v2",
}
# A cross-encoder runs the whole model once per pair: beyond ~100 candidates a query
# costs seconds on a CPU for little gain, so larger settings are capped (with a warning).
MAX_CANDIDATES = 100


def fix_hint(model: str) -> str:
    return (
        f"To fix: download {model!r} once where a hub is reachable (unset PLM_OFFLINE and HF_HUB_OFFLINE and run a "
        f"query, or `hf download {model}`), which puts it in the Hugging Face cache; or set `model` to a local "
        "folder holding a cross-encoder (e.g. one written by CrossEncoder.save_pretrained)."
    )


class CrossEncoderReranker(Reranker):
    """Rescores the top `candidates` hits with a cross-encoder; the rest keep their order after them."""

    name = "cross_encoder"
    needs = ("settings",)
    settings: Settings | None

    class Config(ComponentConfig):
        model: str = "balanced"
        """A profile ("fast": ms-marco-TinyBERT-L2-v2, "balanced": ms-marco-MiniLM-L6-v2, "accurate":
        ms-marco-MiniLM-L12-v2, all from the cross-encoder org), any model name, or a local folder."""
        candidates: int = Field(30, ge=1)
        """How many of the hits retrieval passes on are rescored (at most 100: more is capped, with a
        warning); retrieval is asked for max(k, candidates) hits."""
        max_chars: int = Field(2000, ge=1)
        """The query and each hit's text are cut to this many characters before scoring (the model
        also truncates the pair to its own token limit)."""
        batch_size: int = Field(32, ge=1)
        """Pairs per forward pass."""
        device: str | None = None
        """The torch device, e.g. "cpu" or "cuda"; unset: the PLM_DEVICE setting (default cpu)."""
        timeout_ms: float | None = Field(None, gt=0)
        """When rescoring one query takes longer, log a warning with the measured docs/s (the
        rerank still completes: it is a budget to watch, not a cut-off)."""

        @field_validator("model")
        @classmethod
        def _not_empty(cls, value: str) -> str:
            if not value.strip():
                raise ValueError('give a profile ("fast", "balanced", "accurate"), a model name or a folder')
            return value

    config: Config

    @property
    def model_name(self) -> str:
        """The model the config names, with a profile resolved to its hub name."""
        return PROFILES.get(self.config.model, self.config.model)

    @property
    def candidates(self) -> int:
        """Hits rescored per query: `candidates`, capped at MAX_CANDIDATES (warned once)."""
        if self.config.candidates > MAX_CANDIDATES and not self.__dict__.get("_warned_cap"):
            self._warned_cap = True
            logger.warning(
                "reranker %r: candidates = %d is capped at %d (a cross-encoder scores every pair with the whole model)",
                self.label,
                self.config.candidates,
                MAX_CANDIDATES,
            )
        return min(self.config.candidates, MAX_CANDIDATES)

    def check(self) -> None:
        if self.label == BEFORE:
            raise ConfigError(f"[query.{BEFORE}]: a reranker's table cannot be named {BEFORE!r} (hits use that name)")
        _ = self.candidates  # `plm config check` shows the cap warning

    def depth(self, k: int) -> int:
        return max(k, self.candidates)

    def _settings(self) -> Settings:
        return self.settings if isinstance(self.settings, Settings) else load_settings()

    def warm_up(self) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingDependencyError("sentence-transformers", "embed")
        settings = self._settings()
        models.locate(
            [self.model_name],
            models.hub_offline(settings.offline),
            lambda name, path: self._load(path, settings),
            f"reranker {self.label!r}",
            fix_hint(self.model_name),
        )

    def _load(self, path: Path, settings: Settings) -> str | None:
        """None when the cross-encoder at `path` loaded, else why not."""
        from sentence_transformers import CrossEncoder

        if not settings.progress:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        try:
            model = CrossEncoder(str(path), device=self.config.device or settings.device, local_files_only=True)
        except Exception as err:  # noqa: BLE001 - reported by the locator with the model's name
            return f"{type(err).__name__}: {err}"
        outputs = getattr(model, "num_labels", 1)
        if outputs != 1:
            return f"it gives {outputs} scores per pair; a reranker needs a model with one (num_labels = 1)"
        self._model, self.model_path = model, path
        return None

    def score(self, query: str, texts: list[str]) -> list[float]:
        """The cross-encoder's score of each (query, text) pair, both cut to `max_chars`."""
        self.ensure_warm()
        cut = self.config.max_chars
        scores: Any = self._model.predict(
            [(query[:cut], text[:cut]) for text in texts],
            batch_size=self.config.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(s) for s in scores.reshape(-1)]

    def run(self, data: Ranking) -> Ranking:
        head = data.hits[: self.candidates]
        if not head:
            return data
        t0 = time.perf_counter()
        scores = self.score(data.query.original or data.query.text, [hit.text for hit in head])
        elapsed = time.perf_counter() - t0
        if self.config.timeout_ms is not None and elapsed * 1000 > self.config.timeout_ms:
            logger.warning(
                "reranker %r: %d candidates took %.0f ms (timeout_ms = %g): %.1f docs/s; lower candidates or "
                "max_chars, or pick a faster model",
                self.label,
                len(head),
                elapsed * 1000,
                self.config.timeout_ms,
                len(head) / elapsed,
            )
        return rescore(data, scores, self.label)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(CrossEncoderReranker)
