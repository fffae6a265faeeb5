"""The embedder check (`check_embedder`): texts -> one float32 row each, the same every time
and whatever else is in the batch, a model name known before the weights load."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plm.testing.corpus import TEXTS
from plm.testing.rules import Rules, checking
from plm_core.interfaces import Embedder

# Texts of several lengths, a repeat, non-ASCII; no empty text (a chunk always has some).
SAMPLE_TEXTS = [t for t in TEXTS if t] + ["Ünïcode café naïve résumé", "pod memory limits", "x"]


def check_embedder(embedder: Embedder, texts: Sequence[str] | None = None, atol: float = 1e-4) -> None:
    """`texts` (default: short texts of several lengths, one repeated): `embed(texts)` is a
    float32 matrix, one finite row per text, every row of one dimension (L2-normalised when
    the Config's `normalize` is on); the same every time, a text's row the same (within
    `atol`: batching pads) alone as in a batch; `run` is `embed`; `embed_query` a vector of
    that dimension; `model_name` a non-empty string that `expected_model_name` foretells
    and a new instance with the same config shares; `model_version` a string."""
    with checking("embedders") as rules:
        given = list(texts if texts is not None else SAMPLE_TEXTS)
        expected = embedder.expected_model_name  # before warming up: what an index is checked against
        embedder.ensure_warm()
        name = embedder.model_name
        rules.expect(isinstance(name, str) and name, "model_name is a non-empty string", repr(name))
        rules.expect(
            expected == name,
            "expected_model_name, found before the model loads, is the model_name it loads",
            f"{expected!r} vs {name!r}",
        )
        rules.expect(isinstance(embedder.model_version, str), "model_version is a string", repr(embedder.model_version))
        matrix = _matrix(rules, embedder.embed(given), len(given), "embed(texts)")
        with rules.part("embedding again"):
            _check_again(rules, embedder, given, matrix, atol)
        _check_empty(rules, embedder)
        with rules.part("embedding a query"):
            vector = np.asarray(embedder.embed_query(given[0]))
            rules.expect(
                vector.dtype == np.float32 and vector.shape == (matrix.shape[1],),
                "embed_query(text) is a float32 vector of the embedder's dimension",
                f"dtype {vector.dtype}, shape {vector.shape}",
            )
        with rules.part("a new instance"):
            rules.expect(type(embedder)(embedder.config).expected_model_name == name, "a new instance, the same model")


def _matrix(rules: Rules, got: Any, n: int, what: str) -> Any:
    rules.require(hasattr(got, "shape") and hasattr(got, "dtype"), f"{what} is a numpy matrix", repr(type(got)))
    matrix = np.asarray(got)
    rules.require(matrix.ndim == 2 and matrix.shape[0] == n, f"{what} has one row per text", f"shape {matrix.shape}")
    rules.expect(matrix.dtype == np.float32, f"{what} is float32", f"dtype {matrix.dtype}")
    rules.expect(matrix.shape[1] > 0 and np.isfinite(matrix).all(), f"{what}: rows of finite numbers")
    return matrix


def _check_again(rules: Rules, embedder: Embedder, given: list[str], matrix: Any, atol: float) -> None:
    if getattr(embedder.config, "normalize", False):
        norms = np.linalg.norm(matrix, axis=1)
        rules.expect(np.allclose(norms, 1.0, atol=1e-3), "rows are L2-normalised when `normalize` is on", f"{norms}")
    again = np.asarray(embedder.embed(given))
    rules.expect(
        again.shape == matrix.shape and np.allclose(again, matrix, atol=atol),
        "the same texts give the same vectors",
    )
    alone = np.stack([np.asarray(embedder.embed([t]))[0] for t in given])
    worst = float(np.abs(alone - matrix).max()) if alone.shape == matrix.shape else float("inf")
    rules.expect(
        worst <= atol,
        "a text's vector does not depend on the other texts of the batch",
        f"largest difference {worst:.2g}, allowed {atol}",
    )
    rules.expect(np.allclose(np.asarray(embedder.run(list(given))), matrix, atol=atol), "run(texts) is embed(texts)")


def _check_empty(rules: Rules, embedder: Embedder) -> None:
    try:
        empty: Any = embedder.embed([])
    except Exception as err:  # noqa: BLE001 - the rule is "no error"
        empty = err
    rules.expect(
        hasattr(empty, "__len__") and len(empty) == 0,
        "no texts give no rows (and no error: a sync may embed an empty batch)",
        f"got {empty!r}"[:200],
    )
