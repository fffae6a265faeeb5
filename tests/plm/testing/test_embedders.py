"""`plm.testing.check_embedder` passes an embedder written from the contract alone and fails,
naming the rule, for one broken in one way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import plm
import plm.testing


class Letters(plm.Embedder):
    """Counts of a few letters, L2-normalised."""

    name = "kit_letters"

    class Config(plm.ComponentConfig):
        normalize: bool = True

    config: Config

    @property
    def model_name(self) -> str:
        return "letters-v1"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        rows = np.array([[t.count(c) + 0.5 for c in "aeiou"] for t in texts], dtype=np.float32).reshape(-1, 5)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True) if self.config.normalize else rows


def test_an_embedder_written_from_the_contract_passes() -> None:
    plm.testing.check_embedder(Letters())
    plm.testing.check_embedder(Letters(normalize=False))


class Float64(Letters):
    name = "kit_float64"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        return np.asarray(super().embed(texts), dtype=np.float64)


class BatchNormalised(Letters):
    name = "kit_batch_normalised"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        rows = super().embed(texts)
        return (rows - rows.mean(axis=0) * 0.5).astype(np.float32) if len(rows) else rows


class NameChangesOnLoad(Letters):
    name = "kit_name_changes"
    warm = False

    def warm_up(self) -> None:
        self.warm = True

    @property
    def expected_model_name(self) -> str:
        return "letters"

    @property
    def model_name(self) -> str:
        return "letters-v1" if self.warm else "letters"


class NotNormalised(Letters):
    name = "kit_not_normalised"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        return np.asarray(super().embed(texts)) * 2


class NoTextsFails(Letters):
    name = "kit_no_texts_fails"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        rows = np.array([[t.count(c) + 0.5 for c in "aeiou"] for t in texts], dtype=np.float32)  # (0,) for none
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (NoTextsFails, r"no texts give no rows \(and no error"),
        (Float64, r"embed\(texts\) is float32"),
        (BatchNormalised, r"a text's vector does not depend on the other texts of the batch"),
        (NameChangesOnLoad, r"expected_model_name, found before the model loads, is the model_name it loads"),
        (NotNormalised, r"rows are L2-normalised when `normalize` is on"),
    ],
)
def test_a_broken_embedder_fails_naming_the_contract(broken: type[Letters], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_embedder(broken())
    assert str(err.value).startswith("embedders contract (docs/contracts/embedders.md)")
