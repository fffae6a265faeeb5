"""llm_rewrite against a real HTTP server on 127.0.0.1 that answers like the OpenAI chat API
(and like a broken one: slow, 500, malformed; `tests/support/fake_chat.py`). Nothing here
touches the network."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_chat import FakeChatAPI, query_in, serve
from pydantic import ValidationError

from plm_core.errors import ConfigError
from plm_core.records import EmbeddedQuery, ExpandedQuery, Query
from plm_plugins.expanders.dictionary import DictionaryExpander
from plm_plugins.expanders.llm_rewrite import DEFAULT_PROMPT, LLMRewriteExpander, parse_reply


@pytest.fixture()
def api() -> Iterator[FakeChatAPI]:
    yield from serve()


@pytest.fixture()
def other_origin() -> Iterator[FakeChatAPI]:
    yield from serve()


def _expander(api: FakeChatAPI, **config: Any) -> LLMRewriteExpander:
    config.setdefault("api_key_env", "PLM_TEST_LLM_KEY")
    return LLMRewriteExpander(base_url=api.url, model="tiny-chat", **config)


QUERY = Query(text="restore a bakup", k=3, filters={"team": "storage"}, id="q1", depth=7)


def test_rewrite_replaces_the_text_and_keeps_the_users(api: FakeChatAPI) -> None:
    q = _expander(api).run(QUERY)
    assert q.text == "restore a bakup rewritten"
    assert (q.original, q.fired, q.profile, q.alternatives) == ("restore a bakup", ("llm_rewrite",), "", ())
    assert (q.k, q.filters, q.id, q.depth) == (3, {"team": "storage"}, "q1", 7)
    assert _expander(api, profile="rewritten").run(Query(text="other")).profile == "rewritten"


def test_request_is_an_openai_chat_completion(api: FakeChatAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-test-123")
    _expander(api, system="You rewrite queries.", prompt="Rewrite: {query} (n={n})", temperature=0.2).run(QUERY)
    (request,) = api.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {
        "model": "tiny-chat",
        "messages": [
            {"role": "system", "content": "You rewrite queries."},
            {"role": "user", "content": "Rewrite: restore a bakup (n=0)"},
        ],
        "temperature": 0.2,
    }
    assert request["headers"]["Authorization"] == "Bearer sk-test-123"
    assert request["headers"]["Content-Type"] == "application/json"


def test_no_key_in_the_environment_sends_no_authorization(api: FakeChatAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLM_TEST_LLM_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-this-server")
    _expander(api).run(QUERY)
    _expander(api, api_key_env="").run(Query(text="another"))
    assert all("Authorization" not in r["headers"] for r in api.requests)
    # the default prompt, without a system message
    assert api.requests[0]["body"]["messages"] == [
        {"role": "user", "content": DEFAULT_PROMPT.format(query="restore a bakup", n=0)}
    ]


def test_alternatives_are_parsed_deduplicated_and_capped(api: FakeChatAPI) -> None:
    api.content = (
        '1. backup restore procedure\n2) "restore from a backup"\n\n- Restore a bakup\n'
        "* BACKUP RESTORE procedure\n• snapshot recovery\n- velero"
    )
    q = _expander(api, n=3).run(QUERY)
    assert q.text == q.original == "restore a bakup"  # the original is retrieved too
    # the copy of the original and the case-only duplicate are dropped, then capped at n
    assert q.alternatives == ("backup restore procedure", "restore from a backup", "snapshot recovery")
    assert q.fired == ("llm_rewrite",)
    assert "3 different search queries" in api.requests[0]["body"]["messages"][-1]["content"]

    q = _expander(api, n=2, keep_original=False).run(QUERY)
    assert (q.text, q.alternatives, q.original) == ("backup restore procedure", ("restore from a backup",), QUERY.text)


def test_parse_reply_strips_numbering_labels_quotes_and_thinking() -> None:
    reply = (
        '<think>\nthe user wants\n2. no\n</think>\nRewritten query: "kubernetes pod restart"\n'
        " 3. 3.5 release notes\n`x`"
    )
    assert parse_reply(reply) == ["kubernetes pod restart", "3.5 release notes", "x"]
    assert parse_reply("Query 2: rto of vault") == ["rto of vault"]
    assert parse_reply("2024 outage report") == ["2024 outage report"]
    assert parse_reply("\n  \n") == []


def test_a_slow_server_falls_back_within_the_budget(api: FakeChatAPI, caplog: pytest.LogCaptureFixture) -> None:
    api.mode = "slow"
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        q = _expander(api, timeout_ms=200).run(QUERY)
    assert time.perf_counter() - start < 1.5  # the server holds the answer for 5 s
    assert q == ExpandedQuery.of(QUERY) and q.fired == () and q.text == QUERY.text
    (record,) = [r for r in caplog.records if r.name == "plm_plugins.expanders.llm_rewrite"]
    assert record.levelname == "WARNING"
    assert "did not answer within timeout_ms = 200" in record.getMessage()
    assert "searching with the original query" in record.getMessage()


def test_a_trickling_server_cannot_hold_the_query_past_the_budget(api: FakeChatAPI) -> None:
    api.mode = "trickle"
    start = time.perf_counter()
    assert _expander(api, timeout_ms=300).run(QUERY) == ExpandedQuery.of(QUERY)
    assert time.perf_counter() - start < 1.5


@pytest.mark.parametrize(
    ("mode", "content", "why"),
    [
        ("500", None, "answered 500 Internal Server Error: model overloaded"),
        ("malformed", None, "did not answer with JSON"),
        ("no_choices", None, "without choices[0].message.content"),
        ("null_content", None, "non-text message content"),
        ("rewrite", "  \n ", "the reply is empty"),
        ("rewrite", "<think>hmm</think>", "the reply is empty"),
        ("rewrite", "x" * 101, "more than max_chars = 100"),
    ],
)
def test_bad_answers_fall_back_to_the_original_with_a_warning(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture, mode: str, content: str | None, why: str
) -> None:
    api.mode, api.content = mode, content
    with caplog.at_level(logging.WARNING):
        q = _expander(api, max_chars=100).run(QUERY)
    assert q == ExpandedQuery.of(QUERY)
    assert why in caplog.text and "searching with the original query" in caplog.text
    assert len(caplog.records) == 1 and "\n" not in caplog.records[0].getMessage()


def test_an_unreachable_server_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    expander = LLMRewriteExpander(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="")
    with caplog.at_level(logging.WARNING):
        assert expander.run(QUERY) == ExpandedQuery.of(QUERY)
    assert f"cannot reach http://127.0.0.1:{port}/v1/chat/completions" in caplog.text


def test_only_an_alternative_equal_to_the_query_is_a_failure(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture
) -> None:
    api.content = "Restore a  bakup"
    with caplog.at_level(logging.WARNING):
        assert _expander(api, n=2).run(QUERY) == ExpandedQuery.of(QUERY)
    assert "no query other than the original" in caplog.text


def test_the_key_never_reaches_the_log(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-secret-456")
    api.mode = "401"
    with caplog.at_level(logging.DEBUG):
        assert _expander(api).run(QUERY) == ExpandedQuery.of(QUERY)
    assert "answered 401" in caplog.text and "bad key ***" in caplog.text
    assert "sk-secret-456" not in caplog.text


def test_a_login_in_base_url_is_sent_as_basic_auth_and_never_printed(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45 C9: `llm.base_url=http://user:password@host/v1` printed the password, and such
    URLs did not work at all."""
    import base64

    monkeypatch.delenv("PLM_TEST_LLM_KEY", raising=False)
    url = api.url.replace("http://", "http://ops:s3cr%40t-pw@")  # an encoded @ in the password
    expander = LLMRewriteExpander(base_url=url, model="tiny-chat", api_key_env="PLM_TEST_LLM_KEY")
    assert "s3cr" not in str(expander.config.model_dump()) and expander.config.base_url == api.url
    assert expander.run(QUERY).text == "restore a bakup rewritten"
    sent = api.requests[0]["headers"]["Authorization"]
    assert sent == "Basic " + base64.b64encode(b"ops:s3cr@t-pw").decode()
    api.mode = "500"
    with caplog.at_level(logging.DEBUG):
        assert expander.run(Query(text="other")) == ExpandedQuery.of(Query(text="other"))
    assert "answered 500" in caplog.text and "s3cr" not in caplog.text
    from plm_core.config import format_validation

    with pytest.raises(ValidationError) as info:  # a config error echoes the value, not the password
        LLMRewriteExpander.Config(base_url="ftp://ops:s3cr@t-pw@host/v1", model="m")
    message = format_validation(info.value, "[query.expand]", LLMRewriteExpander.Config)
    assert "ftp://ops:***@host/v1" in message and "s3cr" not in message


def test_the_key_never_goes_to_another_origin(
    api: FakeChatAPI, other_origin: FakeChatAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-secret-789")
    api.mode, api.redirect_to = "redirect", f"{other_origin.url}/chat/completions"
    with caplog.at_level(logging.WARNING):
        assert _expander(api).run(QUERY) == ExpandedQuery.of(QUERY)
    assert api.requests[0]["headers"]["Authorization"] == "Bearer sk-secret-789"  # the configured origin
    assert other_origin.requests == []  # a redirect is not followed, so the key stays where it was sent
    assert "redirect" in caplog.text and "base_url" in caplog.text and "sk-secret-789" not in caplog.text


def test_a_key_with_a_trailing_newline_is_stripped_and_a_bad_one_never_printed(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-newline-123\n")  # `echo key > file` then read whole
    assert _expander(api).run(QUERY).fired == ("llm_rewrite",)
    assert api.requests[0]["headers"]["Authorization"] == "Bearer sk-newline-123"
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-two\nlines")
    with caplog.at_level(logging.DEBUG):
        assert _expander(api).run(Query(text="other")) == ExpandedQuery.of(Query(text="other"))
    assert "PLM_TEST_LLM_KEY" in caplog.text and "sk-two" not in caplog.text and "lines" not in caplog.text
    assert len(api.requests) == 1  # a key that cannot be a header is not sent at all


def test_answers_are_cached_per_text_and_failures_are_not(api: FakeChatAPI) -> None:
    expander = _expander(api)
    first = expander.run(QUERY)
    assert expander.run(QUERY) == first and len(api.requests) == 1  # the second never reached the server
    # same text, other k and id: the same answer, fitted to the new query
    again = expander.run(Query(text=QUERY.text, k=9, id="q2"))
    assert (again.text, again.k, again.id, len(api.requests)) == (first.text, 9, "q2", 1)
    expander.run(Query(text="another query"))
    assert len(api.requests) == 2

    api.mode = "500"
    assert expander.run(Query(text="third")).fired == ()
    api.mode = "rewrite"
    assert expander.run(Query(text="third")).text == "third rewritten"  # asked again, not the failure
    assert len(api.requests) == 4


def test_the_cache_is_an_lru_of_cache_size(api: FakeChatAPI) -> None:
    expander = _expander(api, cache_size=2)
    for text in ["a", "b", "a", "c", "a", "b"]:  # b is the least recently used when c arrives
        expander.run(Query(text=text))
    assert [query_in(r["body"]["messages"][-1]["content"]) for r in api.requests] == ["a", "b", "c", "b"]
    uncached = _expander(api, cache_size=0)
    uncached.run(QUERY)
    uncached.run(QUERY)
    assert len(api.requests) == 6


def test_chained_after_the_dictionary_keeps_its_triggers(api: FakeChatAPI) -> None:
    api.content = "alt one\nalt two"
    q = _expander(api, n=2).run(DictionaryExpander().run(Query(text="what is our rpo")))
    assert q.fired == ("rpo", "llm_rewrite") and q.profile == "expanded"
    assert q.original == "what is our rpo" and q.alternatives == ("alt one", "alt two")
    # and the other way round: the dictionary keeps the rewriter's alternatives
    assert DictionaryExpander().run(q).alternatives == ("alt one", "alt two")
    # the query embedder carries them on
    assert EmbeddedQuery.with_vector(q, [1.0], "m").alternatives == ("alt one", "alt two")


def test_config_is_checked() -> None:
    ok = {"base_url": "http://127.0.0.1:1/v1/", "model": "m"}
    assert LLMRewriteExpander(**ok).endpoint == "http://127.0.0.1:1/v1/chat/completions"
    full = LLMRewriteExpander(base_url="http://h/v1/chat/completions", model="m")
    assert full.endpoint == "http://h/v1/chat/completions"
    with pytest.raises(ValidationError, match=r"must contain \{query\}"):
        LLMRewriteExpander(**ok, prompt="Rewrite the query")
    with pytest.raises(ValidationError, match="cannot be rendered"):
        LLMRewriteExpander(**ok, prompt="{query} as {format}")
    with pytest.raises(ValidationError, match="cannot be rendered"):
        LLMRewriteExpander(**ok, prompt='{query} as JSON {"q": 1}')
    assert LLMRewriteExpander(**ok, prompt='{query} as JSON {{"q": 1}}').messages("x")[0]["content"] == (
        'x as JSON {"q": 1}'
    )
    with pytest.raises(ValidationError, match="http"):
        LLMRewriteExpander(base_url="127.0.0.1:8000", model="m")
    with pytest.raises(ValidationError, match="unknown|extra"):
        LLMRewriteExpander(**ok, api_key="sk-x")
    wrong = LLMRewriteExpander(**ok, api_key_env="sk-live-abc")
    with pytest.raises(ConfigError, match="must name an environment variable") as err:
        wrong.check()
    assert "sk-live-abc" not in str(err.value)


def test_alternatives_reach_the_hybrid_stage_through_a_job(api: FakeChatAPI, tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    from plm_core.config import load_job
    from plm_core.records import Chunk, Document
    from plm_core.registry import Registry
    from plm_core.settings import Settings
    from plm_index.job import Job
    from plm_plugins.fusers.rrf import RRFFuser
    from plm_plugins.retrieval.hybrid import HybridRetrieval
    from plm_plugins.retrievers.bm25s import BM25Retriever
    from plm_plugins.stores.sqlite import SQLiteStore

    registry = Registry()
    for cls in (SQLiteStore, LLMRewriteExpander, HybridRetrieval, BM25Retriever, RRFFuser):
        registry.add(cls)
    (tmp_path / "job.toml").write_text(
        f"""
[job]
name = "llm-rewrite-test"
[store]
use = "sqlite"
[query.expand]
use = "llm_rewrite"
base_url = "{api.url}"
model = "tiny-chat"
api_key_env = ""
n = 2
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.bm25]
use = "bm25s"
drop_zero_scores = true
[query.retrieve.fuser]
use = "rrf"
order = ["bm25"]
default = {{ weights = {{ bm25 = 1.0 }} }}
expanded = {{ weights = {{ bm25 = 1.0 }} }}
"""
    )
    job = Job(load_job(tmp_path / "job.toml", registry), tmp_path / "index", Settings(progress=False), registry).open()
    texts = {"a": "velero backup schedules", "b": "pod scheduling on nodes", "c": "restore a snapshot"}
    job.store.replace_documents(
        [Document(id=d, text=t) for d, t in texts.items()],
        [Chunk(id=f"{d}_0", doc_id=d, text=t) for d, t in texts.items()],
    )
    job.rebuild_indexes()
    api.content = "velero backup\nsnapshot restore"
    ranking, _ = job.search("how do I get my data back", k=3)
    # BM25 finds nothing for the user's words; the alternatives find a and c
    assert ranking.query.alternatives == ("velero backup", "snapshot restore")
    assert {h.doc_id for h in ranking.hits} == {"a", "c"}
    api.mode = "500"
    ranking, _ = job.search("how do I get my data back again", k=3)
    assert ranking.hits == ()  # the original query alone, and no failure
