"""The `llm` query generator against a real HTTP server on 127.0.0.1 that answers like the
OpenAI chat API (`tests/support/fake_chat.py`, the server llm_rewrite's tests use), and
`plm eval --synthetic N --generators llm` through it. Nothing here touches the network."""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_chat import FakeChatAPI, serve
from pydantic import ValidationError

import plm
import plm.testing
from plm_plugins.query_generators.llm import DEFAULT_PROMPT, LLMQueryGenerator
from plm_plugins.query_generators.text import longest_copy

REPO = Path(__file__).resolve().parents[3]
BM25 = REPO / "configs" / "experiments" / "bm25_stemmed.toml"

BACKUP = (
    "Nightly snapshots of every volume are kept for thirty days in object storage. A restore starts from the "
    "newest snapshot unless an older one is named."
)
ALERTS = (
    "An alert fires when a rule holds for five minutes, and pages the on-call engineer through the paging "
    "service. Silences mute an alert for a fixed window."
)
DOCS = [
    plm.Document(id="backup", title="Backups", text=f"---\ntitle: Backups\n---\n# Backups\n\n{BACKUP}\n"),
    plm.Document(id="alerts", title="Alerts", text=f"# Alerts\n\n{ALERTS}\n\n```\nkubectl get alerts\n```\n"),
    plm.Document(id="stub", title="Stub", text="# Stub\n\nNothing here yet.\n"),  # too few words to ask about
]


def passage_in(message: str) -> str:
    """The passage inside a rendered default prompt (it ends with "Passage:\\n...")."""
    return message.rsplit("Passage:\n", 1)[-1]


def ask_about(message: str) -> str:
    """A question a model might write: the passage's two longest words, not a copy of it."""
    found = sorted({w.lower() for w in re.findall(r"[A-Za-z]{6,}", passage_in(message))}, key=lambda w: (-len(w), w))
    return f"How do {found[0]} and {found[1]} relate?"


@pytest.fixture()
def api() -> Iterator[FakeChatAPI]:
    yield from serve()


def _generator(api: FakeChatAPI, **config: Any) -> LLMQueryGenerator:
    config.setdefault("api_key_env", "")
    return LLMQueryGenerator(base_url=api.url, model="tiny-chat", **config)


def _asked(api: FakeChatAPI) -> list[str]:
    return [passage_in(r["body"]["messages"][-1]["content"]) for r in api.requests]


def test_one_question_per_passage_judged_relevant_to_its_document(api: FakeChatAPI) -> None:
    replies = {
        BACKUP: 'Question: "How long are volume snapshots retained?"',
        ALERTS: "Here is a question a user might ask:\n1. When does an alert page someone?",
    }
    api.reply = lambda message: replies[passage_in(message)]
    queries = _generator(api).generate(DOCS)
    assert sorted(queries, key=lambda q: q.doc_id) == [
        plm.SyntheticQuery("When does an alert page someone?", "alerts", "llm", remove=(), source_doc="alerts"),
        plm.SyntheticQuery("How long are volume snapshots retained?", "backup", "llm", remove=(), source_doc="backup"),
    ]
    # the prose only (no front matter, heading or code), whole; the stub is not asked about
    sent = sorted(json.dumps(r["body"]["messages"]) for r in api.requests)
    expected = [[{"role": "user", "content": DEFAULT_PROMPT.format(passage=p, title="")}] for p in (BACKUP, ALERTS)]
    assert sent == sorted(json.dumps(m) for m in expected)
    for request in api.requests:
        assert request["path"] == "/v1/chat/completions" and "Authorization" not in request["headers"]
        assert (request["body"]["model"], request["body"]["temperature"]) == ("tiny-chat", 0.0)


def test_system_message_title_and_prompt_are_sent(api: FakeChatAPI) -> None:
    api.reply = ask_about
    prompt = "Title: {title}\nWrite a question about {{this}}:\nPassage:\n{passage}"
    _generator(api, system="You write search questions.", prompt=prompt).generate(DOCS[:1])
    (request,) = api.requests
    assert request["body"]["messages"] == [
        {"role": "system", "content": "You write search questions."},
        {"role": "user", "content": f"Title: Backups\nWrite a question about {{this}}:\nPassage:\n{BACKUP}"},
    ]
    with pytest.raises(ValidationError, match=r"must contain \{passage\}"):
        _generator(api, prompt="Write a question about {title}")
    with pytest.raises(ValidationError, match="cannot be rendered"):
        _generator(api, prompt="{passage} as {format}")


def _corpus(n: int) -> list[plm.Document]:
    filler = "which the operators describe in plain words so that every reader can follow along without help"
    return [
        plm.Document(id=f"doc{i:02d}", text=f"# Page {i}\n\nThe marker token{i:02d}x names this page, {filler}.\n")
        for i in range(n)
    ]


MARKER = re.compile(r"token\d\dx")


def _marker_question(message: str) -> str:
    return f"Which page names {MARKER.findall(message)[0]}?"


def test_the_passages_asked_about_are_seeded_bounded_and_order_free(api: FakeChatAPI) -> None:
    api.reply = _marker_question
    docs = _corpus(30)

    def asked(documents: list[plm.Document], **config: Any) -> set[str]:
        api.requests.clear()
        queries = _generator(api, passages=5, **config).generate(documents)
        ids = {re.search(r"token(\d\d)x", p).group(1) for p in _asked(api)}  # type: ignore[union-attr]
        assert {q.doc_id for q in queries} == {f"doc{i}" for i in ids}
        return ids

    first = asked(docs)
    assert len(first) == 5
    assert asked(docs) == first  # a new generator, the same passages
    assert asked(docs[::-1]) == first  # the corpus's order does not matter
    assert asked(docs, seed=1) != first


def test_a_long_document_sends_whole_paragraphs_within_max_passage_chars(api: FakeChatAPI) -> None:
    api.reply = lambda message: "What is this page about?"
    paras = [f"Paragraph {i} explains the {i}th retention setting of the archive service. " * 4 for i in range(12)]
    paras = [p.strip() for p in paras]
    long_doc = plm.Document(id="long", text="# Archive\n\n" + "\n\n".join(paras) + "\n")
    _generator(api, max_passage_chars=700).generate([long_doc])
    (sent,) = _asked(api)
    assert len(sent) <= 700
    parts = sent.split("\n\n")
    assert len(parts) in (1, 2) and "\n\n".join(parts) in "\n\n".join(paras)  # consecutive whole paragraphs
    assert all(part in paras for part in parts)

    one = plm.Document(id="one", text="word " * 2000)  # one paragraph of 10,000 characters
    api.requests.clear()
    _generator(api, max_passage_chars=500).generate([one])
    (sent,) = _asked(api)
    assert sent == ("word " * 100).strip()  # 499 characters: cut after a whole word


def test_a_reply_copying_a_long_span_of_its_passage_is_dropped(
    api: FakeChatAPI, caplog: pytest.LogCaptureFixture
) -> None:
    replies = {
        BACKUP: "Which snapshots of every volume are kept for thirty days?",  # 9 words of the passage in a row
        ALERTS: "Why page when a rule holds for five?",  # 6 in a row
    }
    assert longest_copy(replies[BACKUP], BACKUP) == 9 and longest_copy(replies[ALERTS], ALERTS) == 6
    api.reply = lambda message: replies[passage_in(message)]
    with caplog.at_level(logging.WARNING):
        queries = _generator(api).generate(DOCS)
    assert [(q.text, q.doc_id) for q in queries] == [(replies[ALERTS], "alerts")]
    assert "1 of 2 replies from tiny-chat dropped (1 copied more than max_copied_words = 6" in caplog.text
    # stricter: both are copies, and a generator with no usable reply says so in one line
    with pytest.raises(plm.PlmUserError, match="no usable question in 2 replies from tiny-chat") as err:
        _generator(api, max_copied_words=5).generate(DOCS)
    assert "\n" not in str(err.value)


def test_empty_short_long_and_repeated_replies_are_dropped(api: FakeChatAPI, caplog: pytest.LogCaptureFixture) -> None:
    docs = _corpus(5)
    replies = iter(["<think>hmm</think>", "Pods?", "why " * 50, "How is the archive kept?", "how is THE archive kept"])
    answers: dict[str, str] = {}
    api.reply = lambda message: answers.setdefault(message, next(replies))
    with caplog.at_level(logging.WARNING):
        queries = _generator(api).generate(docs)
    assert [q.text for q in queries] == ["How is the archive kept?"]
    for why in ("1 empty", "1 shorter than min_words = 3", "1 longer than max_words = 40", "1 the same question"):
        assert why in caplog.text


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("500", "answered 500 Internal Server Error: model overloaded"),
        ("malformed", "did not answer with JSON"),
        ("no_choices", "answered JSON without choices[0].message.content"),
        ("null_content", "non-text message content"),
        ("slow", "did not answer within timeout_ms = 300"),
    ],
)
def test_a_broken_endpoint_stops_with_one_line_within_seconds(api: FakeChatAPI, mode: str, why: str) -> None:
    api.mode = mode
    start = time.perf_counter()
    with pytest.raises(plm.PlmUserError) as err:
        _generator(api, timeout_ms=300).generate(DOCS)
    assert time.perf_counter() - start < 3  # the slow server holds its answer for 5 s
    message = str(err.value)
    assert why in message and "\n" not in message
    assert message.startswith("query generator 'llm' (tiny-chat), asking about document ")
    assert len(api.requests) == 1  # the first failure stops it


def test_an_unreachable_endpoint_stops_with_one_line() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = LLMQueryGenerator(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="")
    start = time.perf_counter()
    with pytest.raises(plm.PlmUserError, match=f"cannot reach http://127.0.0.1:{port}/v1/chat/completions"):
        gen.generate(DOCS)
    assert time.perf_counter() - start < 3


def test_the_key_is_sent_from_the_environment_and_never_shown(
    api: FakeChatAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLM_TEST_LLM_KEY", "sk-gen-123")
    api.reply = ask_about
    _generator(api, api_key_env="PLM_TEST_LLM_KEY").generate(DOCS[:1])
    assert api.requests[0]["headers"]["Authorization"] == "Bearer sk-gen-123"
    api.mode = "401"
    with pytest.raises(plm.PlmUserError, match="answered 401") as err:
        _generator(api, api_key_env="PLM_TEST_LLM_KEY").generate(DOCS[:1])
    assert "sk-gen-123" not in str(err.value) and "bad key ***" in str(err.value)
    with pytest.raises(plm.ConfigError, match="must name an environment variable") as bad:
        _generator(api, api_key_env="sk-live-abc").check()
    assert "sk-live-abc" not in str(bad.value)


def test_the_kit_accepts_it(api: FakeChatAPI) -> None:
    api.reply = ask_about
    plm.testing.check_query_generator(_generator(api))
    assert len(api.requests) == len(plm.testing.MARKDOWN_DOCS)  # asked once per passage: the second run remembers


# `plm eval --synthetic N --generators llm`, in this process: the registry is the installed
# plugins' plus this generator (an entry point that `pip install -e .` adds to the installed set).


@pytest.fixture()
def plm_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    from plm_eval import eval_command
    from plm_index import cli
    from plm_index.plugins import build_registry

    registry = build_registry()
    if not any(r.name == "llm" and r.family == "query_generators" for r in registry.all()):
        registry.add(LLMQueryGenerator)
    monkeypatch.setattr(eval_command, "default_registry", lambda: registry)
    monkeypatch.setenv("PLM_DATA_DIR", str(tmp_path / "data"))

    def run(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["plm", *args])
        with pytest.raises(SystemExit) as done:
            cli.main()
        return int(done.value.code or 0)

    return run


def _eval_args(url: str, out: Path, *extra: str) -> list[str]:
    return [
        "eval", "-c", str(BM25), "--dataset", str(REPO / "examples" / "sample_corpus"), "--corpus", "docs",
        "--synthetic", "4", "--generators", "llm", "--generator-option", f"llm.base_url={url}",
        "--generator-option", "llm.model=tiny-chat", "--generator-option", "llm.api_key_env=",
        "--no-chart", "--resamples", "200", "--bootstrap", "200", "--out", str(out), *extra,
    ]  # fmt: skip


def test_plm_eval_synthetic_with_the_llm_generator(
    api: FakeChatAPI, plm_cli: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.reply = ask_about
    out = tmp_path / "report"
    assert plm_cli(*_eval_args(api.url, out, "--generator-option", "llm.passages=6")) == 0
    assert len(api.requests) == 6  # the passages asked about, one call each
    printed = " ".join(capsys.readouterr().out.split())
    assert f"synthetic judgments: 4 queries made from {REPO / 'examples' / 'sample_corpus' / 'docs'}" in printed
    assert f"(4 llm (base_url={api.url}, model=tiny-chat, api_key_env=, passages=6))" in printed
    asked = {ask_about(r["body"]["messages"][-1]["content"]) for r in api.requests}
    rows = [json.loads(line) for line in (out / "synthetic" / "queries" / "synthetic.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["kind"] == "llm" and r["text"] in asked for r in rows)
    about = json.loads((out / "synthetic" / "synthetic.json").read_text())
    assert about["generators"] == ["llm"] and about["by_generator"] == {"llm": 4}
    assert about["generator_config"]["llm"]["model"] == "tiny-chat"
    assert about["generator_options"]["llm"]["model"] == "tiny-chat"
    report = (out / "report.md").read_text()
    assert "**Synthetic judgments**: 4 queries made from the corpus (4 by `llm` (base_url=" in report
    assert "model=tiny-chat" in report
    summary = json.loads((out / "summary.json").read_text())
    (s,) = summary["sets"]
    assert s["set"] == "synthetic" and s["queries"] == 4
    assert summary["judgments"]["generator_config"]["llm"]["base_url"] == api.url


def test_plm_eval_says_in_one_line_what_is_wrong(plm_cli: Any, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    assert plm_cli(*_eval_args(url, tmp_path / "r1")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: query generator 'llm' (tiny-chat), asking about document ")
    assert f"cannot reach {url}/chat/completions" in err and "Traceback" not in err

    # no endpoint configured: the missing settings, before the corpus is read
    base = ["eval", "-c", str(BM25), "--synthetic", "4"]
    assert plm_cli(*base, "--generators", "llm", "--out", str(tmp_path / "r2")) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "query generator 'llm' (--generator-option llm.KEY=VALUE)" in err
    assert "missing required key 'base_url'" in err and "missing required key 'model'" in err
    assert plm_cli(*base, "--generator-option", "llm.model=x", "--out", str(tmp_path / "r4")) == 2
    assert "'llm' is not among --generators (headings, inverse_cloze, links)" in capsys.readouterr().err
    assert plm_cli("eval", "-c", str(BM25), "--generator-option", "llm.model=x", "--out", str(tmp_path / "r3")) == 2
    assert "give --synthetic too" in capsys.readouterr().err
