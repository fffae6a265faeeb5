"""The Prometheus metrics one `plm serve` app keeps, in its own registry (two apps in one
process, as in the tests, count apart): requests and their latency per route (counted by
plm_serve/request_guard.py), the corpus version served (set on every reload of the index)
and the syncs applied through `POST`/`DELETE /documents`. `GET /metrics` writes them out."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plm_index.sync import IngestReport
    from plm_serve.service import Service


class ServerMetrics:
    """One app's counters, gauges and histograms; prometheus_client loads when one is made."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry()
        self.requests_total = Counter("plm_requests_total", "HTTP requests", ["path", "status"], registry=registry)
        self.latency = Histogram("plm_request_seconds", "HTTP request latency", ["path"], registry=registry)
        self.corpus_version = Gauge("plm_corpus_version", "Corpus version being served", registry=registry)
        self.syncs = Counter("plm_syncs_total", "Syncs applied by this process", ["kind"], registry=registry)
        self.synced_docs = Counter(
            "plm_synced_documents_total", "Documents changed by syncs", ["change"], registry=registry
        )

    def follow(self, service: Service) -> None:
        """Keep the corpus version gauge at the version `service` serves, now and after each reload."""
        service.on_reload = lambda v: self.corpus_version.set(v.counter if v is not None else 0)
        if service.generation is not None and service.generation.version is not None:
            self.corpus_version.set(service.generation.version.counter)

    def request(self, path: str, status: int, seconds: float) -> None:
        """One answered request, under its route's path template."""
        self.requests_total.labels(path, str(status)).inc()
        self.latency.labels(path).observe(seconds)

    def sync(self, report: IngestReport, kind: str) -> None:
        """One sync applied (`documents`: a POST, `delete`: a DELETE) and what it changed."""
        self.syncs.labels(kind).inc()
        for change in ("added", "updated", "deleted"):
            self.synced_docs.labels(change).inc(len(getattr(report, change)))

    def text(self) -> str:
        """The exposition text, as Prometheus scrapes it."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()
