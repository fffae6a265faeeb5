"""Ingest on Ray Data: batches of documents are processed (chunked, enriched, embedded) by
a pool of actor processes on a Ray cluster, streaming; this process stays the single
writer and commits each batch as it comes back.

Each actor builds the job's stages from the config once (`ProcessorRecipe`), loading its
models and opening the content cache under the job's data folder, then processes batch
after batch. A killed actor is restarted and its batch retried; a batch is committed as
whole documents, so a retry never loses or duplicates one. A killed driver leaves every
committed batch, and the next ingest skips them, as a local one does.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import Field

from plm import (
    BatchProcessor,
    BatchResult,
    ComponentConfig,
    Document,
    Executor,
    PlmUserError,
    ProcessorFactory,
    Registry,
    hookimpl,
)


class RayExecutor(Executor):
    """Document batches -> chunks and vectors on a Ray cluster (a local one by default)."""

    name = "ray"

    class Config(ComponentConfig):
        address: str | None = None
        """The cluster: None starts a local one for this ingest (or joins `RAY_ADDRESS` when set);
        "auto" joins the one `ray start --head` started on this machine; "HOST:PORT" or
        "ray://HOST:10001" joins a remote one (every node needs plm and the job's extras)."""
        workers: int = Field(2, ge=1, le=1024)
        """Actor processes that process batches, each holding its own copy of the models."""
        cpus_per_worker: float = Field(1.0, gt=0)
        """CPUs Ray reserves for each worker (the stages' own threads share them)."""

    config: Config

    def process(
        self, batches: Sequence[Sequence[Document]], local: BatchProcessor, recipe: ProcessorFactory, read_cache: bool
    ) -> Iterator[BatchResult]:
        if not batches:
            return
        address = self.config.address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            # The local cluster this ingest starts listens on 127.0.0.1 only: Ray binds every
            # server (GCS, raylets, workers, agents) to the machine's address, or to all of
            # them, unless it runs as a single-machine cluster; read when Ray is imported.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = _import_ray()
        started = self._connect(ray, address)
        try:
            workers = self._workers(ray, address, len(batches))
            context = ray.data.DataContext.get_current()
            context.execution_options.preserve_order = True  # commits in the order a local ingest makes them
            context.enable_progress_bars = False  # the ingest has its own bar
            rows = [{"docs": pickle.dumps(list(batch))} for batch in batches]
            # Ray Data restarts a killed actor and retries its batch by default (max_restarts and
            # max_task_retries -1); tests/plm_plugins/executors/test_ray.py kills one to check.
            dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
                _BatchWorker,
                fn_constructor_args=(recipe, read_cache),
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=self.config.cpus_per_worker,
            )
            try:
                for row in dataset.iter_rows():
                    yield pickle.loads(row["result"])
            except Exception as err:  # noqa: BLE001 - unwrap a user error raised inside a worker
                cause = _user_error(err)
                if cause is not None:
                    raise cause from None
                raise
        finally:
            if started:
                ray.shutdown()

    def _workers(self, ray: Any, address: str | None, batches: int) -> int:
        """How many workers to start: as configured, as many as the cluster's CPUs hold at
        `cpus_per_worker` each (fewer said once), none: an error, not a wait without end."""
        cpus = float(ray.cluster_resources().get("CPU", 0))
        fit = int(cpus // self.config.cpus_per_worker)
        where = f"the Ray cluster at {address!r}" if address else "the local Ray cluster"
        if fit < 1:
            raise PlmUserError(
                f"{where} has {cpus:g} CPUs, and each worker needs cpus_per_worker = {self.config.cpus_per_worker:g}: "
                "add nodes with CPUs, or lower [executor] cpus_per_worker"
            )
        wanted = min(self.config.workers, batches)
        if fit < wanted:
            logging.getLogger(__name__).warning(
                "%s has %g CPUs: %d of the %d workers asked for run, at cpus_per_worker = %g",
                where, cpus, fit, wanted, self.config.cpus_per_worker,
            )  # fmt: skip
        return min(fit, wanted)

    def _connect(self, ray: Any, address: str | None) -> bool:
        """Join or start a cluster; True when this call started it (and must stop it)."""
        if ray.is_initialized():
            return False
        try:
            _answers(address)
            if address is None:
                ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except ray.exceptions.AuthenticationError:
            raise PlmUserError(
                f"the Ray cluster at {address!r} requires a token: set RAY_AUTH_MODE=token and the cluster's "
                "token in RAY_AUTH_TOKEN or a file named by RAY_AUTH_TOKEN_PATH (`ray get-auth-token` on the "
                "cluster's head prints it)"
            ) from None
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise PlmUserError(
                f"cannot reach the Ray cluster at {address!r}: {err}; start one with `ray start --head` "
                "(then use --address auto), or leave the address out to start a local one"
            ) from None
        for name in ("ray", "ray.data"):  # Ray's own INFO lines would drown the ingest's output
            logging.getLogger(name).setLevel(logging.WARNING)
        return True


# An HTTP/2 client's first bytes and an empty SETTINGS frame: every gRPC server (Ray's GCS
# and its client server) answers at once with a SETTINGS frame of its own (type 4).
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _answers(address: str | None, timeout: float = 5.0) -> None:
    """ConnectionError unless a gRPC server (as Ray's are) answers at a HOST:PORT or
    ray://HOST:PORT address within `timeout`: Ray's own client retries an address where
    nothing listens, or something else does, for minutes, silently."""
    if not address or address in ("auto", "local"):
        return
    where = address.removeprefix("ray://").rstrip("/")
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit():
        return  # a form Ray knows better (e.g. no port): left to Ray
    plain = os.environ.get("RAY_USE_TLS", "").lower() not in ("1", "true")  # with TLS: connecting is all
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout) as conn:
            conn.settimeout(timeout)
            if plain:
                conn.sendall(_HTTP2_HELLO)
                answer = conn.recv(9)
    except OSError as err:
        raise ConnectionError(f"nothing answers there ({err.strerror or type(err).__name__})") from None
    if plain and (len(answer) < 4 or answer[3] != 4):
        raise ConnectionError("something listens there, but it does not answer as a Ray cluster (gRPC) does")


class _BatchWorker:
    """One actor: builds the job's stages once, then processes one batch per call."""

    def __init__(self, recipe: ProcessorFactory, read_cache: bool) -> None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.processor, self.read_cache = recipe.build(), read_cache

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        results = [pickle.dumps(self.processor.process(pickle.loads(docs), self.read_cache)) for docs in batch["docs"]]
        return {"result": np.array(results, dtype=object)}


def _user_error(err: BaseException) -> PlmUserError | None:
    """The plm user error (a bad document setting, a model that cannot load) behind an
    error Ray raised, if any."""
    seen: set[int] = set()
    todo: list[Any] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, PlmUserError):
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise PlmUserError(
            "the ray executor needs Ray Data: pip install 'plm[ray]' (or run without --executor ray)"
        ) from None
    return ray


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(RayExecutor)
