"""Every built-in executor keeps the executors contract (`plm.testing.check_executor`):
`local` here, `ray` on a local Ray cluster it starts (the kit's recipe is built in workers)."""

from __future__ import annotations

import pytest

import plm
import plm.testing


def test_local_keeps_the_contract() -> None:
    plm.testing.check_executor(plm.default_registry().get("local", "executors").cls())


@pytest.mark.slow  # starts a local Ray cluster
def test_ray_keeps_the_contract() -> None:
    ray = pytest.importorskip("ray")
    try:
        plm.testing.check_executor(plm.default_registry().get("ray", "executors").cls(workers=1), n_batches=4)
    finally:
        ray.shutdown()
