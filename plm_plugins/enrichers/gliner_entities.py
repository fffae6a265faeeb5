"""GLiNER zero-shot named entities per chunk: the port plan's replacement for spaCy.

Same text preparation and output shape as `spacy_entities` (label -> values, labels in
first-seen order), so `poc_enricher` and the store treat both alike. Labels are plain
words GLiNER matches against, not spaCy's codes.

Loading never waits on the network when it cannot succeed: a local folder is tried
first, then the Hugging Face cache (no network), and the hub only when neither
`HF_HUB_OFFLINE=1` nor plm's `offline` setting forbids it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import MissingDependencyError, ModelNotFoundError
from plm_plugins.enrichers.text_prep import EntityConfig, EntityExtractor

if TYPE_CHECKING:
    from plm import Registry

# spacy_entities' default labels (ORG, PRODUCT, GPE, PERSON, WORK_OF_ART, LAW, EVENT, FAC, NORP)
# in words GLiNER understands.
DEFAULT_LABELS = [
    "organization",
    "product",
    "location",
    "person",
    "work of art",
    "law",
    "event",
    "facility",
    "nationality or group",
]


class GlinerEntityExtractor(EntityExtractor):
    """Sets `chunk.entities` (label -> values) from a GLiNER model."""

    name = "gliner_entities"
    needs = ("settings",)
    settings: Any  # plm's runtime settings (offline), when built by a job

    class Config(EntityConfig):
        model: str = "urchade/gliner_multi-v2.1"
        """A Hugging Face hub name or a local folder saved with GLiNER.save_pretrained (tried
        first as a folder, then in the HF cache, then on the hub unless offline)."""
        labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), min_length=1)
        """Entity labels GLiNER looks for, in plain words (at least one); the default is the
        nine labels spacy_entities keeps by default, in words."""
        threshold: float = Field(0.5, ge=0.0, le=1.0)
        """Minimum span score (0 to 1) for an entity to be kept."""
        batch_size: int = Field(8, ge=1)
        """Texts per GLiNER inference batch. GLiNER itself reads at most its max_len (384 for
        v2.1) words of each text, within max_chars."""
        device: str = "cpu"
        """The torch device the model runs on, e.g. "cpu", "cuda" or "cuda:1"."""

    config: Config
    _model: Any  # a gliner.GLiNER, set by warm_up

    def _offline(self) -> bool:
        return os.environ.get("HF_HUB_OFFLINE") == "1" or bool(getattr(self.settings, "offline", False))

    def _cached_snapshot(self, model: str) -> Path | None:
        """The cached snapshot folder of a hub model, found without any network call."""
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            return None
        try:
            found = try_to_load_from_cache(model, "gliner_config.json")
        except Exception:  # noqa: BLE001 - an invalid repo id is simply "not cached"
            return None
        return Path(found).parent if isinstance(found, str) else None

    def _sources(self) -> tuple[list[tuple[str, Path]], list[str]]:
        """Folders to load from (local, then cached), and what was looked at in vain."""
        model = self.config.model
        local = Path(model).expanduser()
        if local.is_dir():
            return [(f"local folder {local}", local)], []
        tried = [f"local folder {local} (missing)"]
        snapshot = self._cached_snapshot(model)
        if snapshot is not None:
            return [(f"HF cache {snapshot}", snapshot)], tried
        tried.append("Hugging Face cache (not cached)")
        return [], tried

    def warm_up(self) -> None:
        model, device = self.config.model, self.config.device
        sources, tried = self._sources()
        use_hub = not sources and not self._offline()
        if not sources and not use_hub:
            # Decided before importing torch, so a missing model fails in well under a second.
            tried.append("Hugging Face hub (skipped: offline, HF_HUB_OFFLINE=1 or PLM_OFFLINE=1)")
            raise self._not_found(tried)
        try:
            from gliner import GLiNER
        except ImportError as exc:
            raise MissingDependencyError("GLiNER", "gliner") from exc
        for what, folder in sources:
            try:
                self._model = GLiNER.from_pretrained(str(folder), local_files_only=True, map_location=device)
                return
            except Exception as exc:  # noqa: BLE001 - report every failed source together
                tried.append(f"{what} ({type(exc).__name__}: {exc})")
        if use_hub:
            try:
                self._model = GLiNER.from_pretrained(model, map_location=device)
                return
            except Exception as exc:  # noqa: BLE001
                tried.append(f"Hugging Face hub ({type(exc).__name__}: {exc})")
        raise self._not_found(tried)

    def _not_found(self, tried: list[str]) -> ModelNotFoundError:
        model = self.config.model
        return ModelNotFoundError(
            f"GLiNER model {model!r} could not be loaded; tried: {'; '.join(tried)}. "
            "Set `model` to a folder saved with GLiNER.save_pretrained, or download it once with "
            f"`huggingface-cli download {model}` while online."
        )

    def find(self, texts: list[str]) -> list[Iterable[tuple[str, str]]]:
        cfg = self.config
        predictions = self._model.inference(
            texts, list(cfg.labels), flat_ner=True, threshold=cfg.threshold, batch_size=cfg.batch_size
        )
        # Document order, so that "first seen" means the same as for spaCy.
        return [
            [(s["label"], s["text"]) for s in sorted(spans, key=lambda s: (s["start"], s["end"]))]
            for spans in predictions
        ]


from plm import hookimpl  # noqa: E402 - registration lives at the end by convention


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(GlinerEntityExtractor)
