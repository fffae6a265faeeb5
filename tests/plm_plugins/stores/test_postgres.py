"""The postgres store against a real Postgres (pgserver, a fresh database per test): the
Store contract, schemas side by side, upgrades, errors, and the `plm pg` command.

The sync, crash and concurrent-reader guarantees are tested on both stores by the shared
suites (tests/plm_index/test_sync.py, test_crash_safety.py via the `store_table` fixture).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plm_needs import needs

from plm_core.errors import StoreError
from plm_core.records import Chunk, Document, StoreProblem

pytestmark = needs("psycopg", extra="postgres")
from plm_plugins.stores.postgres import PostgresStore, redact  # noqa: E402


def store(dsn: str, **config: object) -> PostgresStore:
    s = PostgresStore(PostgresStore.Config(dsn=dsn, **config))
    s.open("/nonexistent-folder-is-not-used")
    return s


def docs_and_chunks(n_docs: int, per_doc: int = 2) -> tuple[list[Document], list[Chunk]]:
    docs = [Document(id=f"d{i}", text=f"document {i}", title=f"T{i}", metadata={"n": i}) for i in range(n_docs)]
    chunks = [
        Chunk(
            id=f"d{i}_{j}",
            doc_id=f"d{i}",
            text=f"chunk {j} of document {i} about cats" if i % 2 else f"chunk {j} of document {i} about dogs",
            enriched=f"enriched {i} {j}",
            heading_path=("T", str(i)),
            start_char=j,
            end_char=j + 5,
            stable_id=f"s{i}{j}",
            keywords=("k1", "k2"),
            entities={"ORG": ("acme",)},
            metadata={"n": i, "tags": ["a", "b"], "when": "2024-05-01"},
        )
        for i in range(n_docs)
        for j in range(per_doc)
    ]
    return docs, chunks


def unit(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_the_store_round_trips_documents_chunks_and_vectors(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(3)
    v0 = s.version()
    s.replace_documents(docs, chunks, unit(len(chunks)), "toy", ["f0", "f1", "f2"])
    assert s.version().counter == v0.counter + 1 and s.version().store_id == v0.store_id
    assert s.chunk_ids() == [c.id for c in chunks]
    assert s.chunks() == chunks  # every field, heading path, entities and metadata included
    assert s.get_chunks(["d1_0", "nope"]) == {"d1_0": chunks[2]}
    assert s.doc_fingerprints() == {"d0": "f0", "d1": "f1", "d2": "f2"}
    assert s.doc_fingerprints(["d1", "missing"]) == {"d1": "f1"}  # only those asked for
    assert s.get_document("d1") == docs[1] and s.get_document("missing") is None
    ids, matrix, model = s.vectors()
    assert ids == s.chunk_ids() and model == "toy"
    np.testing.assert_array_equal(matrix, unit(len(chunks)))
    assert s.stats()["dimension"] == 8 and s.stats()["vectors"] == 6 and s.stats()["bytes"] > 0
    # An update keeps the document's place in index order; its chunks are replaced whole.
    new = Chunk(id="d0_new", doc_id="d0", text="replaced", heading_path=(), metadata={})
    s.replace_documents([docs[0]], [new], unit(1, seed=5), "toy", ["f0b"])
    assert s.chunk_ids() == ["d0_new", "d1_0", "d1_1", "d2_0", "d2_1"]
    assert s.delete_documents(["d1", "zz", "d1"]) == ["d1"]
    assert s.chunk_ids() == ["d0_new", "d2_0", "d2_1"]
    before = s.version()
    assert s.delete_documents(["zz"]) == [] and s.version() == before  # nothing changed, same version
    s.clear()
    assert s.chunk_ids() == [] and s.vectors() == ([], None, None)


def test_vectors_written_later_skip_chunks_whose_text_changed(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(2)
    s.replace_documents(docs, chunks)
    assert [c.id for c in s.chunks_needing_vectors("toy")] == [c.id for c in chunks]
    texts = [c.index_text for c in chunks]
    texts[1] = "what another process replaced"
    assert s.write_vectors([c.id for c in chunks], unit(4), "toy", texts) == 3
    assert [c.id for c in s.chunks_needing_vectors("toy")] == ["d0_1"]
    assert [p.kind for p in s.consistency_problems()] == [StoreProblem.MISSING_VECTORS]
    s.write_vectors(["d0_1"], unit(1, seed=3), "other")
    assert StoreProblem.MIXED_MODELS in [p.kind for p in s.consistency_problems()]
    assert len(s.chunks_needing_vectors("other")) == 3


def test_a_new_dimension_does_not_break_inserts_and_is_reported(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(2)
    s.replace_documents(docs, chunks, unit(4, dim=8), "m8")
    s.replace_documents(docs[:1], chunks[:2], unit(2, dim=4), "m4")  # a model change mid-sync
    assert [c.id for c in s.chunks_needing_vectors("m4")] == ["d1_0", "d1_1"]
    with pytest.raises(StoreError, match="several dimensions"):
        s.vectors()


def test_schemas_share_a_database_without_seeing_each_other(pg_dsn: str) -> None:
    a, b = store(pg_dsn, schema="index_a"), store(pg_dsn, schema="index_b")
    docs, chunks = docs_and_chunks(2)
    a.replace_documents(docs, chunks)
    assert len(a.chunk_ids()) == 4 and b.chunk_ids() == [] and a.version().store_id != b.version().store_id


def test_opening_read_only_where_nothing_is_says_to_ingest(pg_dsn: str) -> None:
    s = PostgresStore(PostgresStore.Config(dsn=pg_dsn, schema="absent"))
    with pytest.raises(StoreError, match="no index in schema absent .* run `plm ingest`"):
        s.open("x", create=False)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    s = PostgresStore(PostgresStore.Config(dsn="postgresql://plm:s3cret@127.0.0.1:9/plm"))
    with pytest.raises(StoreError) as err:
        s.open("x")
    message = str(err.value)
    assert "s3cret" not in message and "cannot connect to Postgres at postgresql://plm:***@127.0.0.1:9/plm" in message
    assert redact("host=x password=abc user=u") == "host=x password=*** user=u"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:Secr3tPw@[::1",  # malformed: libpq quotes it whole
        "postgresql://u:Secr3tPw@127.0.0.1:9/plm",
        "postgresql://u@127.0.0.1:9/plm?password=Secr3tPw&sslmode=disable",
        "host=127.0.0.1 port=9 user=u password='my Secr3tPw pass'",
        "host=127.0.0.1 port=9 user=u password = 'it\\'s Secr3tPw'",
        "host=127.0.0.1 port=9 password=Secr3tPw bogus_option=1",
        "host=127.0.0.1 port=9 sslpassword=Secr3tPw",
        "postgresql://u:Secr3tPw@127.0.0.1:9/plm?bogus_option=1",
    ],
)
def test_no_credential_form_libpq_accepts_reaches_a_message(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for configured, env in ((dsn, None), ("", dsn)):  # [store] dsn, or PLM_DATABASE_URL
        if env is not None:
            monkeypatch.setenv("PLM_DATABASE_URL", env)
        with pytest.raises(StoreError) as err:
            PostgresStore(PostgresStore.Config(dsn=configured)).open("x")
        message = str(err.value)
        assert "Secr3tPw" not in message and "pass'" not in message and "***" in message, message
    assert "Secr3tPw" not in redact(f"connection to {dsn!r} failed", dsn)
    # nor what `plm config check` and a component's repr print (a config dump)
    configured = PostgresStore(PostgresStore.Config(dsn=dsn))
    assert "Secr3tPw" not in repr(configured) and "Secr3tPw" not in str(configured.config.model_dump())
    assert configured.config.dsn == dsn  # the store itself still connects with the password


def test_an_unencoded_at_in_the_password_is_said_without_its_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45 C10: libpq took the password's tail for the host and printed it."""
    dsn = "postgresql://u:Pw@r3tPwTail@127.0.0.1:9/plm"
    for configured, env in ((dsn, None), ("", dsn)):
        if env is not None:
            monkeypatch.setenv("PLM_DATABASE_URL", env)
        with pytest.raises(StoreError, match="unencoded '@': write it as %40") as err:
            PostgresStore(PostgresStore.Config(dsn=configured)).open("x")
        assert "r3tPwTail" not in str(err.value) and "Pw@" not in str(err.value)
    message = redact('could not translate host name "r3tPwTail@127.0.0.1" to address', dsn)
    assert "r3tPwTail" not in message


def test_no_dsn_says_where_to_put_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLM_DATABASE_URL", raising=False)
    with pytest.raises(StoreError, match="PLM_DATABASE_URL"):
        PostgresStore(PostgresStore.Config()).open("x")


def test_the_dsn_comes_from_the_environment(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLM_DATABASE_URL", pg_dsn)
    s = PostgresStore(PostgresStore.Config())
    s.open("x")
    assert s.chunk_ids() == []


def test_changing_the_text_search_configuration_regenerates_the_tsvector(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(2)
    s.replace_documents(docs, chunks)
    lexemes = lambda st: st.conn.execute("SELECT tsv::text FROM plm.chunks ORDER BY row LIMIT 1").fetchone()[0]  # noqa: E731
    assert "'enrich'" in lexemes(s)  # english stems
    s.close()
    simple = store(pg_dsn, fulltext_config="simple")
    assert "'enriched'" in lexemes(simple) and simple.chunk_ids() == [c.id for c in chunks]


def test_filter_mask_is_computed_in_sql(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(4)
    s.replace_documents(docs, chunks)
    assert s.filter_mask({"n": {"gte": 2}}).tolist() == [False] * 4 + [True] * 4
    assert s.filter_mask({"tags": "b", "when": {"lte": "2024-05-01"}}).all()


@pytest.mark.postgres
@pytest.mark.slow
def test_plm_pg_start_status_stop(tmp_path: Path) -> None:
    pytest.importorskip("pgserver")
    data = Path(os.environ.get("TMPDIR", "/tmp")) / f"plm-pg-cli-{os.getpid()}"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    plm = [sys.executable, "-m", "plm_index.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*plm, "pg", *args, "--data", str(data)], capture_output=True, text=True, env=env)

    try:
        started = run("start")
        assert started.returncode == 0, started.stderr
        dsn = started.stdout.strip().splitlines()[-1]
        assert dsn.startswith("postgresql://")
        s = store(dsn, schema="cli")  # the printed DSN is usable, with pgvector
        s.replace_documents(*docs_and_chunks(1))
        s.close()
        assert run("status").stdout.strip().splitlines()[-1] == dsn
        stopped = run("stop", "--delete")
        assert stopped.returncode == 0, stopped.stderr
        assert not data.exists()
        assert run("status").returncode == 1
    finally:
        run("stop", "--delete")


def test_a_store_from_another_plm_is_upgraded_in_place_on_open(pg_dsn: str) -> None:
    s = store(pg_dsn)
    docs, chunks = docs_and_chunks(2)
    s.replace_documents(docs, chunks)
    s.conn.execute("DROP FUNCTION plm.rrf_score(bigint, integer)")  # as if made before it existed
    s.set_meta("schema_version", "older")
    version = s.version()
    s.close()
    again = PostgresStore(PostgresStore.Config(dsn=pg_dsn))
    again.open("x", create=False)  # even a reader upgrades: the DDL is idempotent
    assert again.conn.execute("SELECT plm.rrf_score(1, 60)").fetchone()[0] == pytest.approx(1 / 61)
    assert again.version() == version and again.chunks() == chunks  # the data is untouched


def test_the_postgres_store_keeps_the_store_contract(pg_dsn: str) -> None:
    import plm.testing

    plm.testing.check_store(lambda: store(pg_dsn))  # a new database: empty
