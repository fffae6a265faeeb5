"""`plm.testing.check_store` can fail: DictStore (tests/support/dict_store.py, a store written
from the contract alone) passes, and one broken in one way fails, naming the rule it breaks.
A store that forgets on close fails the reopen rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from dict_store import DISKS, DictStore, _make

import plm
import plm.testing


def test_a_store_written_from_the_contract_passes() -> None:
    plm.testing.check_store(_make(DictStore))


class ChunkIdsReversed(DictStore):
    name = "chunk_ids_reversed"

    def chunk_ids(self) -> list[str]:
        return super().chunk_ids()[::-1]


class FilterKeepsAll(DictStore):
    name = "filter_keeps_all"

    def filter_mask(self, filters: Mapping[str, Any]) -> Any:
        return np.ones(len(self.chunk_ids()), dtype=bool)


class VersionStandsStill(DictStore):
    name = "version_stands_still"

    def version(self) -> plm.CorpusVersion:
        return plm.CorpusVersion("dict", 0)


class DeleteEchoes(DictStore):
    name = "delete_echoes"

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        super().delete_documents(doc_ids)
        return list(doc_ids)


class OrderKeysMove(DictStore):
    name = "order_keys_move"

    def _order(self) -> dict[str, int]:
        return {row[1].id: i for i, row in enumerate(self._all())}


class ForgetsRemovals(DictStore):
    name = "forgets_removals"

    def removed_since(self, position: int) -> list[int] | None:
        return []


class ReplaceMovesToTheEnd(DictStore):
    name = "replace_moves_to_the_end"

    def replace_documents(self, documents, chunks, matrix=None, model=None, fingerprints=None) -> None:  # type: ignore[no-untyped-def]
        for doc in documents:
            self.docs.pop(doc.id, None)
        super().replace_documents(documents, chunks, matrix, model, fingerprints)


class VectorsSinceMixesModels(DictStore):
    name = "vectors_since_mixes_models"

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:  # no model check
        rows = sorted((r for r in self._all() if r[0] > position and r[2] is not None), key=lambda r: r[0])
        return [r[0] for r in rows], np.stack([r[2] for r in rows]) if rows else None, rows[0][3] if rows else None


class ForgetsOnClose(DictStore):
    name = "forgets_on_close"

    def close(self) -> None:
        pass


class MetaOnlyInMemory(DictStore):
    name = "meta_only_in_memory"

    def close(self) -> None:
        super().close()
        DISKS[self.location]["meta"] = {k: v for k, v in self.meta.items() if k == "model"}


class VectorsLostOnClose(DictStore):
    name = "vectors_lost_on_close"

    def close(self) -> None:
        for row in self._all():
            row[2] = None
        super().close()


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (VectorsSinceMixesModels, r"vectors_since\(p\) refuses rows whose vector comes from another model"),
        (ChunkIdsReversed, r"stores contract .*chunk_ids\(\) lists chunks in index order"),
        (FilterKeepsAll, r"filter_mask\(spec\) is a boolean mask .*\n  filter \{'team': 'a'\}"),
        (VersionStandsStill, r"a write moves version\(\) forward"),
        (DeleteEchoes, r"delete_documents\(ids\) returns the ids that were there"),
        (ForgetsRemovals, r"a replica of an earlier state, less removed_since"),
        (OrderKeysMove, r"a chunk's order key never changes"),
        (ReplaceMovesToTheEnd, r"a replaced document keeps its place in index order"),
        (ForgetsOnClose, r"get_meta\(\) reads what set_meta\(\) wrote, also after close\(\) and a reopen"),
        (MetaOnlyInMemory, r"get_meta\(\) reads what set_meta\(\) wrote, also after close\(\)"),
        (VectorsLostOnClose, r"vectors\(\) after a reopen gives the ids, rows and model stored before it"),
    ],
)
def test_a_broken_store_fails_naming_the_contract(broken: type[DictStore], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_store(_make(broken))
    assert "docs/contracts/stores.md" in str(err.value)


def test_a_store_that_opens_a_new_location_each_time_fails_the_reopen_rule() -> None:
    def fresh() -> DictStore:
        return _make(DictStore)()

    with pytest.raises(AssertionError, match=r"survive close\(\) and a reopen") as err:
        plm.testing.check_store(fresh)
    assert "make_store() again (or reopen) must open where the first store was" in str(err.value)


def test_reopen_opens_the_store_again_where_make_store_cannot() -> None:
    opened: list[str] = []

    def reopen(store: plm.Store) -> plm.Store:
        assert isinstance(store, DictStore)
        opened.append(store.location)
        again = DictStore()
        again.open(store.location)
        return again

    make = _make(DictStore)
    plm.testing.check_store(lambda: make(), reopen=reopen)
    assert len(opened) == 1
