"""A test-only chunk stage that passes its chunks through unchanged after sleeping `seconds`
per batch: an ingest of a small corpus then lasts long enough for a fault to land in the
middle of it (bench/bench_faults.py removes a Ray node). Imported by Ray workers from this
folder (the bench and the tests put it on PYTHONPATH)."""

from __future__ import annotations

import time

from plm_core.component import ComponentConfig
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import ChunkTransform
from plm_core.records import Chunk
from plm_core.registry import Registry


class SlowPassThrough(ChunkTransform):
    name = "slow_pass"

    class Config(ComponentConfig):
        seconds: float = 0.1
        """Sleep per batch of chunks."""

    config: Config

    def run(self, data: list[Chunk]) -> list[Chunk]:
        time.sleep(self.config.seconds)
        return data


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(SlowPassThrough)
