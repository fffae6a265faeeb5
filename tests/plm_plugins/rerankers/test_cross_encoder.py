"""The cross-encoder reranker with a tiny CrossEncoder built and trained here (no weights
can be downloaded): a 2-layer BERT over this file's words, trained for a few steps to
score passages holding the word "gold" high. In a real Job (BM25 alone over SQLite) it
lifts the gold chunk BM25 ranks third to the top, with the cross-encoder's scores and
the pre-rerank rank and score kept on every hit; an absent model fails fast offline."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs
from typer.testing import CliRunner

from plm_core.config import load_job
from plm_core.errors import ConfigError, ModelNotFoundError
from plm_core.records import Chunk, Document, ExpandedQuery, Hit, Ranking
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job
from plm_plugins.rerankers.cross_encoder import BEFORE, MAX_CANDIDATES, CrossEncoderReranker

pytestmark = needs("bm25s", "sentence_transformers")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.stores.sqlite import SQLiteStore  # noqa: E402

BASE = """
[job]
name = "rerank-test"
[store]
use = "sqlite"
[query.retrieve]
use = "bm25s"
method = "lucene"
"""
# BM25 ranks these a, b, c, d for "backup restore"; only c holds "gold"; e matches nothing.
CHUNKS = {
    "a": "backup restore backup restore steps",
    "b": "backup restore of the vault",
    "c": "restore the gold backup copy of the cluster node",
    "d": "nightly backup of all clusters",
    "e": "unrelated node token",
}
WORDS = sorted({w for text in CHUNKS.values() for w in text.split()} | {"filler", "policy", "table"})
QUERY = "backup restore"
SETTINGS = Settings(progress=False, offline=True, device="cpu")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local CrossEncoder folder whose model scores a passage with "gold" near 1, others near 0."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizer.from_pretrained(str(folder), model_max_length=512)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    config.num_labels = 1  # one relevance score per pair
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest on a busy machine
    try:
        torch.manual_seed(0)
        model = BertForSequenceClassification(config)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        rng = random.Random(0)
        plain = [w for w in WORDS if w != "gold"]
        model.train()
        for _ in range(100):
            queries, passages, labels = [], [], []
            for _ in range(32):
                words = rng.choices(plain, k=rng.randint(3, 10))
                gold = rng.random() < 0.5
                if gold:
                    words.insert(rng.randrange(len(words) + 1), "gold")
                queries.append(" ".join(rng.choices(plain, k=rng.randint(1, 3))))
                passages.append(" ".join(words))
                labels.append(float(gold))
            batch = tokenizer(queries, passages, padding=True, return_tensors="pt")
            logits = model(**batch).logits.squeeze(-1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(labels))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < 0.05, f"the tiny model did not learn (loss {loss.item():.3f})"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _registry() -> Registry:
    registry = Registry()
    for cls in (SQLiteStore, BM25Retriever, CrossEncoderReranker):
        registry.add(cls)
    return registry


def _job(tmp_path: Path, extra: str = "", name: str = "job") -> Job:
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE + extra)
    job = Job(load_job(path, _registry()), tmp_path / f"{name}-index", SETTINGS, _registry())
    job.open()
    job.store.replace_documents(
        [Document(id=d, text=t) for d, t in CHUNKS.items()],
        [Chunk(id=d, doc_id=d, text=t) for d, t in CHUNKS.items()],
    )
    job.rebuild_indexes()
    return job


def _rerank(model: str, **params: Any) -> str:
    keys = "".join(f"{key} = {value!r}\n" for key, value in params.items())
    return f'[query.rerank]\nuse = "cross_encoder"\nmodel = "{model}"\n{keys}'


def _ids(hits: list[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


def test_reorders_bm25_by_the_cross_encoder_and_keeps_the_fused_rank(tmp_path: Path, tiny_model: str) -> None:
    from sentence_transformers import CrossEncoder

    bm25 = _job(tmp_path, name="plain").retrieve(QUERY, k=10)
    assert _ids(bm25) == ["a", "b", "c", "d"]  # "c" holds gold but BM25 puts it third

    job = _job(tmp_path, _rerank(tiny_model), name="reranked")
    assert job.searcher.depth(2) == 30  # the default candidates reach retrieval
    hits = job.retrieve(QUERY, k=10)
    assert _ids(hits) != _ids(bm25) and hits[0].chunk_id == "c"  # the trained preference
    assert sorted(_ids(hits)) == sorted(_ids(bm25)) and [h.rank for h in hits] == [1, 2, 3, 4]

    # scores are the cross-encoder's (an independent load of the same folder), best first
    direct = CrossEncoder(tiny_model, device="cpu").predict([(QUERY, h.text) for h in hits])
    assert [h.score for h in hits] == pytest.approx([float(s) for s in direct], abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > 0.9 > 0.1 > max(h.score for h in hits[1:])

    by_id = {h.chunk_id: h for h in bm25}
    for hit in hits:
        before = by_id[hit.chunk_id]
        assert list(hit.sources) == ["retrieve", BEFORE, "rerank"]
        assert hit.sources["retrieve"] == before.sources["retrieve"]  # the retriever's entry is untouched
        assert hit.sources[BEFORE] == {"rank": before.rank, "score": before.score}  # the pre-rerank rank and score
        assert hit.sources["rerank"] == {"rank": hit.rank, "score": hit.score}
    assert hits[0].as_dict()["sources"][BEFORE] == {"rank": 3, "score": by_id["c"].score}

    # the depth flows upstream: k=1 still reranks 30 candidates, so gold is found
    assert _ids(job.retrieve(QUERY, k=1)) == ["c"]


def test_only_candidates_are_rescored_and_the_rest_keep_their_order(tmp_path: Path, tiny_model: str) -> None:
    bm25 = _job(tmp_path, name="plain").retrieve(QUERY, k=10)
    job = _job(tmp_path, _rerank(tiny_model, candidates=2), name="two")
    assert job.searcher.depth(1) == 2 and job.searcher.depth(7) == 7
    hits = job.retrieve(QUERY, k=10)
    assert sorted(_ids(hits[:2])) == ["a", "b"] and _ids(hits[2:]) == ["c", "d"]  # gold past the candidates
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    for hit, before in zip(hits[2:], bm25[2:], strict=True):
        assert hit.score == before.score and "rerank" not in hit.sources
        assert hit.sources[BEFORE] == {"rank": before.rank, "score": before.score}


def test_max_chars_cuts_the_text_before_scoring(tiny_model: str) -> None:
    long_text = "backup restore " + "filler " * 40 + "gold"  # "gold" starts at character 295
    hits = (
        Hit(chunk_id="short", doc_id="short", score=2.0, rank=1, text="backup restore steps"),
        Hit(chunk_id="long", doc_id="long", score=1.0, rank=2, text=long_text),
    )
    ranking = Ranking(query=ExpandedQuery(text=QUERY, k=2), hits=hits)
    whole = CrossEncoderReranker(model=tiny_model, settings=SETTINGS).run(ranking)
    assert _ids(list(whole.hits)) == ["long", "short"] and whole.hits[0].score > 0.9
    cut = CrossEncoderReranker(model=tiny_model, max_chars=200, settings=SETTINGS).run(ranking)
    # its gold was cut off: no boost (both texts then score near 0, so their order is noise)
    assert {h.chunk_id: h.score for h in cut.hits}["long"] < 0.1


def test_the_original_query_text_is_scored_not_the_expanded_one(tiny_model: str) -> None:
    reranker = CrossEncoderReranker(model=tiny_model, settings=SETTINGS)
    reranker.ensure_warm()
    seen: list[Any] = []
    predict = reranker._model.predict

    def spy(pairs: Any, **kw: Any) -> Any:
        seen.append(pairs)
        return predict(pairs, **kw)

    reranker._model.predict = spy
    query = ExpandedQuery(text="backup restore vault snapshot", k=1, original="backup restore", fired=("backup",))
    reranker.run(Ranking(query=query, hits=(Hit(chunk_id="x", doc_id="x", score=1.0, rank=1, text="vault"),)))
    assert seen == [[("backup restore", "vault")]]


class _FixedScores:
    """Stands in for a CrossEncoder: returns given scores, in order."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.calls = 0

    def predict(self, pairs: list[tuple[str, str]], **_: Any) -> Any:
        import numpy as np

        self.calls += 1
        return np.array(self.scores[: len(pairs)], dtype=np.float32)


def _with_scores(scores: list[float], **config: Any) -> CrossEncoderReranker:
    reranker = CrossEncoderReranker(settings=SETTINGS, **config)
    reranker._model, reranker._warm = _FixedScores(scores), True  # type: ignore[attr-defined]
    return reranker


def test_ties_keep_their_order_and_an_earlier_fused_entry_is_kept() -> None:
    hits = tuple(
        Hit(chunk_id=c, doc_id=c, score=10.0 - i, rank=i + 1, sources={"bm25": {"rank": i + 1, "score": 10.0 - i}})
        for i, c in enumerate("pqrst")
    )
    ranking = Ranking(query=ExpandedQuery(text="q", k=5), hits=hits)
    out = _with_scores([0.5, 0.9, 0.5, 0.9], candidates=4).run(ranking)
    assert [(h.chunk_id, h.rank, h.score) for h in out.hits] == [
        ("q", 1, pytest.approx(0.9)),
        ("s", 2, pytest.approx(0.9)),
        ("p", 3, 0.5),
        ("r", 4, 0.5),
        ("t", 5, 6.0),  # not a candidate: its own score, after the rescored ones
    ]
    assert out.query is ranking.query and out.fusion is ranking.fusion
    # a second reranker keeps the retrieval ranks under "fused" and adds its own entry
    second = _with_scores([0.1, 0.2, 0.3, 0.4, 0.5], candidates=5)
    second.label = "second"
    final = second.run(out)
    assert _ids(list(final.hits)) == ["t", "r", "p", "s", "q"]
    top = final.hits[0]
    assert top.sources == {
        "bm25": {"rank": 5, "score": 6.0},
        BEFORE: {"rank": 5, "score": 6.0},
        "second": {"rank": 1, "score": pytest.approx(0.5)},
    }
    last = final.hits[-1]
    assert last.sources[BEFORE] == {"rank": 2, "score": 9.0}
    assert last.sources["cross_encoder"] == {"rank": 1, "score": pytest.approx(0.9)}
    empty = Ranking(query=ranking.query, hits=())
    assert _with_scores([]).run(empty) is empty


def test_candidates_are_capped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="plm_plugins.rerankers.cross_encoder"):
        reranker = CrossEncoderReranker(candidates=500)
        assert reranker.depth(5) == MAX_CANDIDATES and reranker.depth(300) == 300
        reranker.check()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "candidates = 500 is capped at 100" in warnings[0]
    caplog.clear()
    assert CrossEncoderReranker(candidates=100).depth(5) == 100 and not caplog.records


def test_timeout_logs_the_measured_rate(tiny_model: str, caplog: pytest.LogCaptureFixture) -> None:
    hits = tuple(Hit(chunk_id=str(i), doc_id=str(i), score=1.0, rank=i + 1, text="backup") for i in range(3))
    ranking = Ranking(query=ExpandedQuery(text=QUERY, k=3), hits=hits)
    reranker = CrossEncoderReranker(model=tiny_model, timeout_ms=1e-6, settings=SETTINGS)
    reranker.ensure_warm()
    with caplog.at_level(logging.WARNING, logger="plm_plugins.rerankers.cross_encoder"):
        reranker.run(ranking)
        CrossEncoderReranker(model=tiny_model, timeout_ms=60_000, settings=SETTINGS).run(ranking)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "3 candidates took" in messages[0] and "docs/s" in messages[0]


def test_profiles_name_hub_models() -> None:
    assert CrossEncoderReranker().model_name == "cross-encoder/ms-marco-MiniLM-L6-v2"
    assert CrossEncoderReranker(model="fast").model_name == "cross-encoder/ms-marco-TinyBERT-L2-v2"
    assert CrossEncoderReranker(model="accurate").model_name == "cross-encoder/ms-marco-MiniLM-L12-v2"
    assert CrossEncoderReranker(model="BAAI/bge-reranker-base").model_name == "BAAI/bge-reranker-base"


def test_an_absent_model_fails_fast_offline_saying_how_to_get_it(tmp_path: Path) -> None:
    name = "cross-encoder/no-such-model-xyz"
    t0 = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as info:
        CrossEncoderReranker(model=name, settings=SETTINGS).ensure_warm()
    assert time.perf_counter() - t0 < 5.0
    message = str(info.value)
    assert "reranker 'cross_encoder'" in message and name in message
    assert f"hf download {name}" in message and "offline" in message

    # in a job: assembling it loads nothing, the first query fails with the same error
    job = _job(tmp_path, _rerank(str(tmp_path / "missing-folder")), name="missing")
    t0 = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="missing-folder"):
        job.retrieve(QUERY, k=3)
    assert time.perf_counter() - t0 < 5.0


def test_config_check_loads_no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from plm_index.cli import loaded_app

    app = loaded_app()

    def no_loading(self: CrossEncoderReranker) -> None:
        raise AssertionError("config check loaded the model")

    monkeypatch.setattr(CrossEncoderReranker, "warm_up", no_loading)
    path = tmp_path / "job.toml"
    path.write_text(BASE + _rerank("cross-encoder/not-downloaded", candidates=150))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "rerank: cross_encoder (rerankers)" in result.output

    path.write_text(BASE + '[query.fused]\nuse = "cross_encoder"\n')
    with pytest.raises(ConfigError, match="cannot be named 'fused'"):
        Job(load_job(path, _registry()), tmp_path / "index", SETTINGS, _registry())


def test_a_model_with_several_outputs_is_refused(tmp_path: Path, tiny_model: str) -> None:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    config = BertConfig.from_pretrained(tiny_model)
    config.num_labels = 2
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    BertTokenizer.from_pretrained(tiny_model).save_pretrained(tmp_path)
    with pytest.raises(ModelNotFoundError, match=r"2 scores per pair.*num_labels = 1"):
        CrossEncoderReranker(model=str(tmp_path), settings=SETTINGS).ensure_warm()


def test_the_cross_encoder_keeps_the_rerankers_contract(tiny_model: str) -> None:
    import plm.testing

    plm.testing.check_ranking_stage(CrossEncoderReranker(model=tiny_model, settings=SETTINGS))
    plm.testing.check_ranking_stage(CrossEncoderReranker(model=tiny_model, candidates=2, settings=SETTINGS))
