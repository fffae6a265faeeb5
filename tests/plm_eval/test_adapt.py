"""`plm adapt` on a tiny BERT built here and a synthetic Markdown corpus whose titles share
no word with their sections: only training on the corpus can tie a title to its section."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.errors import PlmUserError
from plm_eval import adaptation
from plm_eval.adapt_command import adapt

REPO = Path(__file__).resolve().parents[2]
N_DOCS = 24
TITLE_WORDS = [f"t{i:02d}{s}" for i in range(N_DOCS) for s in "ab"]
BODY_WORDS = [f"b{i:02d}{s}" for i in range(N_DOCS) for s in "cdefgh"]
COMMON = ["the", "system", "runs", "with", "and", "data", "node", "uses"]

CONFIG = """
[job]
name = "tiny"

[store]
use = "sqlite"

[embedder]
use = "sentence_transformers"
model = "{model}"
batch_size = 8

[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"
target_words = 200
min_words = 5
max_words = 400
max_heading_level = 2

[query.embed]
use = "embed_query"

[query.retrieve]
use = "hybrid"

[query.retrieve.retrievers.dense]
use = "dense"

[query.retrieve.fuser]
use = "rrf"
"""

FAST = {"epochs": 12, "batch_size": 8, "learning_rate": 3e-3, "checkpoint_steps": 5}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local sentence-transformers folder: a random 2-layer BERT, mean pooling."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    hf = folder / "hf"
    hf.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ">", *COMMON, *TITLE_WORDS, *BODY_WORDS]
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer.from_pretrained(str(hf), model_max_length=128)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(hf))
    tokenizer.save_pretrained(str(hf))
    transformer = Transformer(str(hf), max_seq_length=96)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(folder / "st"))
    return str(folder / "st")


def _title(i: int) -> str:
    return f"{TITLE_WORDS[2 * i]} {TITLE_WORDS[2 * i + 1]}"


def _write_corpus(folder: Path) -> Path:
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(N_DOCS):
        own = BODY_WORDS[6 * i : 6 * i + 6]
        sentences = [" ".join(rng.sample(own, 4) + rng.sample(COMMON, 2)).capitalize() + "." for _ in range(4)]
        (folder / f"doc{i:02d}.md").write_text(f"# {_title(i)}\n\n" + " ".join(sentences) + "\n")
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> Iterator[dict[str, Any]]:
    """A config over the tiny model and an index of the synthetic corpus, adapted once."""
    tmp = tmp_path_factory.mktemp("adapt")
    data = tmp / "data"
    config = tmp / "conf" / "tiny.toml"
    config.parent.mkdir()
    config.write_text(CONFIG.format(model=tiny_model))
    docs = _write_corpus(tmp / "docs")
    import torch

    threads = torch.get_num_threads()
    # A tiny model: one thread is fastest; two, beside other jobs on 2 cores, spin-wait on each
    # other (this fixture: 68 s with two, 14 s with one, load average 3-5).
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"PLM_DATA_DIR": str(data), "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}.items():
            mp.setenv(key, value)
        try:
            _ingest(config, docs)
            adapted = tmp / "adapted"
            adapt(config=config, out_dir=adapted, seed=0, **FAST)
        finally:
            torch.set_num_threads(threads)
        yield {"config": config, "data": data, "docs": docs, "tmp": tmp, "adapted": adapted}


def plm(*args: str, data: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args], capture_output=True, text=True, env=env, timeout=300, **kw
    )


def _ingest(config: Path, docs: Path, index: Path | None = None) -> None:
    from plm_index.job import Job

    job = Job.from_config(config, index_dir=index)
    try:
        job.open().ingest([docs])
    finally:
        job.close()


def _title_ranks(model_dir: str | Path, docs: Path) -> list[int]:
    """For each document, the rank (0 = first) of its section when its title is the query."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    bodies = [(docs / f"doc{i:02d}.md").read_text().split("\n\n", 1)[1] for i in range(N_DOCS)]
    p = model.encode(bodies, normalize_embeddings=True)
    q = model.encode([_title(i) for i in range(N_DOCS)], normalize_embeddings=True)
    scores = q @ p.T
    return [int((scores[i] > scores[i, i]).sum()) for i in range(N_DOCS)]


def test_pairs_are_deterministic_and_guarded(env: dict[str, Any]) -> None:
    from plm_index.job import Job

    job = Job.from_config(env["config"]).open(create=False)
    chunks = job.store.chunks()
    job.close()
    settings = adaptation.AdaptSettings(seed=3)
    pairs = adaptation.build_pairs(chunks, settings)
    assert pairs == adaptation.build_pairs(list(reversed(chunks)), settings)
    assert pairs != adaptation.build_pairs(chunks, adaptation.AdaptSettings(seed=4))
    assert {p.kind for p in pairs} == {"title", "ict"}
    by_text = {" ".join(c.text.split()): c.doc_id for c in chunks}
    for pair in pairs:
        # the hard negative is never the positive's own document
        assert by_text.get(pair.negative) != pair.doc_id
        if pair.kind == "ict":
            assert pair.query not in pair.positive  # the sentence is cut out of its passage
    for batch in adaptation.batches(pairs, 8, 0, 0):
        assert len({p.doc_id for p in batch}) == len(batch)


def test_adapting_teaches_the_model_titles_it_could_not_place(env: dict[str, Any], tiny_model: str) -> None:
    before = _title_ranks(tiny_model, env["docs"])
    unplaced = [i for i, r in enumerate(before) if r > 0]
    assert len(unplaced) >= N_DOCS // 2, before  # the random model cannot tie titles to sections
    out = env["adapted"]
    after = _title_ranks(out / "model", env["docs"])
    placed = [i for i in unplaced if after[i] == 0]
    assert len(placed) >= 0.8 * len(unplaced), (before, after)
    assert np.mean([1 / (1 + r) for r in after]) > np.mean([1 / (1 + r) for r in before]) + 0.3
    assert not (out / adaptation.CHECKPOINT).exists()  # a finished run leaves no checkpoint


@pytest.mark.slow
def test_the_output_loads_validates_and_queries_in_a_fresh_process(env: dict[str, Any]) -> None:
    out = env["adapted"]
    written = out / "tiny.adapted.toml"
    assert str((out / "model").resolve()) in written.read_text()
    check = plm("config", "check", str(written), data=env["data"], cwd=env["tmp"])
    assert check.returncode == 0 and "is valid" in check.stdout, check.stderr[-2000:]
    ingest = plm("ingest", str(env["docs"]), "--config", str(written), data=env["data"], cwd=env["tmp"])
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert str((out / "model").resolve()) in ingest.stdout  # the adapted model embedded the chunks
    query = plm("query", _title(5), "--config", str(written), "--json", data=env["data"], cwd=env["tmp"])
    assert query.returncode == 0, query.stderr[-2000:]
    assert json.loads(query.stdout)["hits"][0]["doc_id"] == "doc05"


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint(env: dict[str, Any]) -> None:
    out = env["tmp"] / "killed"
    args = ["adapt", "--config", str(env["config"]), "--out", str(out), "--epochs", "2000", "--batch-size", "8"]
    args += ["--learning-rate", "1e-3", "--checkpoint-steps", "3"]
    env_vars = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(env["data"])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "plm_index.cli", *args], env=env_vars, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    state = out / adaptation.CHECKPOINT / "state.json"
    deadline = time.monotonic() + 240
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # a few more steps, maybe mid-save
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    assert not (out / adaptation.MODEL).exists()  # killed before the end: no model yet
    again = plm(*args, "--budget-minutes", "0.05", data=env["data"])
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = re.search(r"resuming from the checkpoint at step (\d+)/(\d+)", again.stdout)
    assert resumed and int(resumed.group(1)) >= 3, again.stdout
    stopped = re.search(r"stopped at the budget.*: (\d+)/\d+ steps", again.stdout)
    assert stopped and int(stopped.group(1)) > int(resumed.group(1)), again.stdout
    assert (out / adaptation.MODEL / "config.json").exists()
    assert (out / adaptation.CHECKPOINT / "state.json").exists()  # budget-stopped: resumable again


def test_errors_name_what_is_wrong(env: dict[str, Any], tmp_path: Path) -> None:
    from plm_index.job import Job

    job = Job.from_config(env["config"], index_dir=tmp_path / "index").open()
    job.ingest([env["docs"] / "doc00.md"])
    job.delete(["doc00"])  # an index that exists but holds nothing
    job.close()
    with pytest.raises(PlmUserError, match="has no chunks: ingest documents first"):
        adapt(config=env["config"], out_dir=tmp_path / "o", index=tmp_path / "index", **FAST)
    bm25_only = tmp_path / "bm25.toml"
    bm25_only.write_text(
        '[job]\nname = "b"\n[index.load]\nuse = "markdown_dir"\n[index.chunk]\nuse = "markdown_semantic"\n'
        '[query.retrieve]\nuse = "hybrid"\n[query.retrieve.retrievers.bm25]\nuse = "bm25s"\n'
        '[query.retrieve.fuser]\nuse = "rrf"\n'
    )
    with pytest.raises(PlmUserError, match="no \\[embedder\\].*sentence_transformers"):
        adapt(config=bm25_only, out_dir=tmp_path / "o", **FAST)
    toy = tmp_path / "toy.toml"  # an embedder with no model folder (the example plugin's)
    toy.write_text(bm25_only.read_text() + '[embedder]\nuse = "hashed_words"\n')
    with pytest.raises(PlmUserError, match="'hashed_words', whose weights are no model folder"):
        adapt(config=toy, out_dir=tmp_path / "o", **FAST)
    with pytest.raises(PlmUserError, match="no chunks"):
        adaptation.build_pairs([], adaptation.AdaptSettings())


def test_the_adapted_folder_is_a_model_like_any_other(env: dict[str, Any], tiny_model: str) -> None:
    """The locator loads it, its model_version (hence cache keys) differs from the base
    model's, and the ONNX backend exports it with the same vectors as torch."""
    pytest.importorskip("onnxruntime")
    from plm_core.settings import Settings
    from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder

    settings = Settings(offline=True, device="cpu", data_dir=str(env["tmp"] / "onnx-data"), progress=False)
    folder = str(env["adapted"] / "model")
    adapted = SentenceTransformerEmbedder(model=folder, settings=settings)
    base = SentenceTransformerEmbedder(model=tiny_model, settings=settings)
    assert adapted.model_path.resolve() == Path(folder).resolve()
    assert adapted.model_version != base.model_version
    texts = [_title(i) for i in range(4)]
    assert not np.allclose(adapted.embed(texts), base.embed(texts), atol=1e-3)  # new weights, new vectors
    onnx = SentenceTransformerEmbedder(model=folder, settings=settings, backend="onnx")
    assert np.abs(onnx.embed(texts) - adapted.embed(texts)).max() < 1e-5
    assert type(onnx._model[0].model).__name__ == "OnnxTransformer"


@pytest.mark.slow
def test_a_shorter_training_length_leaves_the_model_reading_as_far_as_before(
    env: dict[str, Any], tiny_model: str
) -> None:
    """--max-seq-length cuts training texts only: the saved model (and a checkpoint) keep
    the base model's length, or every chunk would be embedded cut short."""
    from sentence_transformers import SentenceTransformer

    base = SentenceTransformer(tiny_model, device="cpu").max_seq_length
    out = env["tmp"] / "short"
    adapt(config=env["config"], out_dir=out, seed=0, epochs=1, batch_size=4, max_seq_length=16, checkpoint_steps=2)
    assert base == 96 and SentenceTransformer(str(out / "model"), device="cpu").max_seq_length == base


class _RunsCode:
    """A pickle that runs code when unpickled: writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_resuming_reads_the_training_state_as_data_never_running_a_pickle(tmp_path: Path) -> None:
    # The checkpoint sits in the --out folder the user names: whoever could write there
    # must not get their code run by a resume (torch.load with weights_only=False did).
    torch = pytest.importorskip("torch")
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([param], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (s + 1))
    for _ in range(2):
        param.sum().backward()
        optimizer.step()
        scheduler.step()
    good = tmp_path / "good" / "optimizer.pt"
    good.parent.mkdir()
    state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}
    torch.save(state, good)  # as _save_checkpoint writes it
    loaded = adaptation.load_training_state(good)
    fresh = torch.optim.AdamW([torch.nn.Parameter(torch.ones(3))], lr=0.1)
    fresh.load_state_dict(loaded["optimizer"])
    torch.optim.lr_scheduler.LambdaLR(fresh, lambda s: 1.0).load_state_dict(loaded["scheduler"])
    assert fresh.state_dict()["state"][0]["step"] == 2 and torch.equal(loaded["rng"], state["rng"])

    marker = tmp_path / "marker"
    for name, payload in (("inside", {**state, "optimizer": _RunsCode(marker)}), ("whole", _RunsCode(marker))):
        bad = tmp_path / name / "optimizer.pt"
        bad.parent.mkdir()
        torch.save(payload, bad)
        with pytest.raises(PlmUserError, match="is not a training state plm wrote") as err:
            adaptation.load_training_state(bad)
        assert f"delete the folder {bad.parent}" in str(err.value)
        assert not marker.exists()
    for name, content in (("garbled", b"\x80\x04not a pickle"), ("empty", b"")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "optimizer.pt").write_bytes(content)
        with pytest.raises(PlmUserError, match="is not a training state plm wrote"):
            adaptation.load_training_state(tmp_path / name / "optimizer.pt")
    (tmp_path / "list").mkdir()
    torch.save([1, 2], tmp_path / "list" / "optimizer.pt")
    with pytest.raises(PlmUserError, match="no optimizer, scheduler and rng"):
        adaptation.load_training_state(tmp_path / "list" / "optimizer.pt")
