"""A test-only chunk stage that kills the process it runs in, once: the first time it sees
a chunk of `doc_id` and `marker` does not exist yet, it creates `marker` and SIGKILLs its
own process. Imported by Ray workers from this folder (the test puts it on PYTHONPATH)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from plm_core.component import ComponentConfig
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import ChunkTransform
from plm_core.records import Chunk
from plm_core.registry import Registry


class CrashOnce(ChunkTransform):
    name = "crash_once"

    class Config(ComponentConfig):
        doc_id: str
        """The document whose chunks trigger the crash."""
        marker: str
        """A file created just before the crash; while it exists, nothing crashes."""

    config: Config

    def run(self, data: list[Chunk]) -> list[Chunk]:
        marker = Path(self.config.marker)
        if any(c.doc_id == self.config.doc_id for c in data) and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return data


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(CrashOnce)
