"""`plm.testing.check_executor` passes executors written from the contract alone (in this
process, or from the recipe in worker processes) and fails, naming the rule, for ones
broken in one way."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator, Sequence

import pytest

import plm
import plm.testing


class InOrder(plm.Executor):
    name = "kit_in_order"

    def process(self, batches, local, recipe, read_cache):  # type: ignore[no-untyped-def]
        for batch in batches:
            yield local.process(batch, read_cache)


def _elsewhere(recipe: plm.ProcessorFactory, batch: Sequence[plm.Document], read_cache: bool) -> plm.BatchResult:
    return recipe.build().process(batch, read_cache)


class Workers(plm.Executor):
    """Batches in worker processes, each result as soon as it is ready (any order)."""

    name = "kit_workers"

    def process(self, batches, local, recipe, read_cache) -> Iterator[plm.BatchResult]:  # type: ignore[no-untyped-def]
        with concurrent.futures.ProcessPoolExecutor(2) as pool:
            futures = [pool.submit(_elsewhere, recipe, list(b), read_cache) for b in batches]
            for done in concurrent.futures.as_completed(futures):
                yield done.result()


def test_an_executor_written_from_the_contract_passes() -> None:
    plm.testing.check_executor(InOrder())
    plm.testing.check_executor(plm.default_registry().get("local", "executors").cls())


@pytest.mark.slow
def test_an_executor_of_worker_processes_passes() -> None:
    plm.testing.check_executor(Workers(), n_batches=4)


class RetriesTwice(InOrder):
    name = "kit_retries_twice"

    def process(self, batches, local, recipe, read_cache):  # type: ignore[no-untyped-def]
        yield from super().process(batches, local, recipe, read_cache)
        if batches:
            yield local.process(batches[0], read_cache)


class AlwaysReadsTheCache(InOrder):
    name = "kit_always_cache"

    def process(self, batches, local, recipe, read_cache):  # type: ignore[no-untyped-def]
        return super().process(batches, local, recipe, True)


class ReturnsAList(InOrder):
    name = "kit_returns_a_list"

    def process(self, batches, local, recipe, read_cache):  # type: ignore[no-untyped-def]
        return [local.process(b, read_cache) for b in batches]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (RetriesTwice, r"each batch's result comes once"),
        (AlwaysReadsTheCache, r"made with the read_cache given"),
        (ReturnsAList, r"process returns an iterator"),
    ],
)
def test_a_broken_executor_fails_naming_the_contract(broken: type[InOrder], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_executor(broken())
    assert str(err.value).startswith("executors contract (docs/contracts/executors.md)")
