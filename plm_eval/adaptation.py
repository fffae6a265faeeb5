"""Adapting a sentence-transformers embedder to a corpus with no labels (`plm adapt`).

Training pairs come from the chunks themselves (published unsupervised domain adaptation
for bi-encoders): a chunk's title or heading path as the query for its section, the
Inverse Cloze Task (a sentence as the query for the rest of the passage it came from),
and the chunk's extracted keywords when the index has them. Each pair gets a BM25-mined
hard negative, guarded against false negatives: never a chunk of the same document, and
never one BM25 scores close to (or above) the positive, which is more often an unlabelled
answer than a wrong one.

Training is sentence-transformers' MultipleNegativesRankingLoss in a small loop of our
own: sentence-transformers 5+'s trainer needs the `datasets` and `accelerate` packages,
which a CPU install does not have. The loop checkpoints into the output folder (model,
optimiser and RNG state, written to a temporary folder and renamed into place), so a
killed run continues from its last checkpoint, and stops cleanly at a time budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from plm_core.errors import PlmUserError
from plm_core.records import Chunk
from plm_index.progress import progress_iter

CHECKPOINT = "checkpoint"
MODEL = "model"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with".split()
)


@dataclass(frozen=True)
class Pair:
    """One training example: a query, the passage it belongs to, and a passage it does not."""

    kind: str  # "title", "ict" or "keywords"
    query: str
    positive: str
    negative: str
    doc_id: str


@dataclass(frozen=True)
class AdaptSettings:
    seed: int = 0
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    max_pairs: int | None = None
    hard_negatives: bool = True
    # A BM25 candidate scoring at least this fraction of the positive's score is skipped:
    # it may well be relevant too (a false negative).
    negative_margin: float = 0.7
    max_seq_length: int = 256
    checkpoint_steps: int = 50


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def _tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def build_pairs(chunks: Sequence[Chunk], settings: AdaptSettings) -> list[Pair]:
    """Deterministic (for a seed and the chunks) training triples."""
    if not chunks:
        raise PlmUserError("the index has no chunks to adapt to: ingest documents first (`plm ingest`)")
    rng = random.Random(settings.seed)
    chunks = sorted(chunks, key=lambda c: c.id)
    raw: list[tuple[str, str, int, str]] = []  # kind, query, chunk index, positive text
    seen_titles: set[str] = set()
    for i, chunk in enumerate(chunks):
        text = " ".join(chunk.text.split())
        # The section without its heading lines: a title as the query for a passage that
        # starts with it would teach word overlap, not meaning.
        body = " ".join(" ".join(ln for ln in chunk.text.splitlines() if not ln.lstrip().startswith("#")).split())
        title = " > ".join(chunk.heading_path) or str(chunk.metadata.get("title", "") or "")
        if body.lower().startswith(title.lower()):
            body = body[len(title) :].strip()
        # A title shared by several chunks would make the others false in-batch negatives.
        if title and body and title.lower() not in seen_titles:
            seen_titles.add(title.lower())
            raw.append(("title", title, i, body))
        sentences = _sentences(body)
        usable = [s for s in sentences if 4 <= len(s.split()) <= 40]
        if len(sentences) >= 3 and usable:
            sentence = rng.choice(usable)
            # ICT: the sentence is removed from its passage, so the model learns context, not overlap.
            rest = " ".join(s for s in sentences if s != sentence)
            raw.append(("ict", sentence, i, rest))
        if chunk.keywords:
            raw.append(("keywords", " ".join(chunk.keywords[:6]), i, text))
    if not raw:
        raise PlmUserError(
            f"no training pairs could be built from {len(chunks)} chunk(s): they have no titles or "
            "headings and too few sentences; adapting needs passages of a few sentences"
        )
    rng.shuffle(raw)
    if settings.max_pairs is not None:
        raw = raw[: settings.max_pairs]
    texts = [" ".join(c.text.split()) for c in chunks]
    negatives = _mine_negatives(raw, chunks, texts, settings, rng)
    return [
        Pair(kind, query, positive, negatives[n], chunks[i].doc_id) for n, (kind, query, i, positive) in enumerate(raw)
    ]


def _mine_negatives(
    raw: list[tuple[str, str, int, str]],
    chunks: Sequence[Chunk],
    texts: list[str],
    s: AdaptSettings,
    rng: random.Random,
) -> list[str]:
    other_docs = len({c.doc_id for c in chunks}) > 1

    def random_negative(i: int) -> str:
        if not other_docs:
            return texts[(i + 1 + rng.randrange(max(1, len(texts) - 1))) % len(texts)]
        while True:
            j = rng.randrange(len(texts))
            if chunks[j].doc_id != chunks[i].doc_id:
                return texts[j]

    if not s.hard_negatives or not other_docs:
        return [random_negative(i) for _, _, i, _ in raw]
    import bm25s
    import numpy as np

    retriever = bm25s.BM25()
    retriever.index([_tokens(t) or ["_"] for t in texts], show_progress=False)
    out = []
    for _, query, i, _ in raw:
        q = [t for t in _tokens(query) if t in retriever.vocab_dict] or None
        if q is None:
            out.append(random_negative(i))
            continue
        scores = retriever.get_scores(q)
        ceiling = s.negative_margin * float(scores[i])
        pick = None
        for j in np.argsort(-scores, kind="stable")[:30]:
            if chunks[int(j)].doc_id != chunks[i].doc_id and 0 < float(scores[j]) < ceiling:
                pick = int(j)
                break
        out.append(texts[pick] if pick is not None else random_negative(i))
    return out


def batches(pairs: Sequence[Pair], size: int, seed: int, epoch: int) -> list[list[Pair]]:
    """Shuffled batches in which no two pairs share a document: the loss treats every other
    passage of a batch as a negative, and a same-document one would often be relevant."""
    order = list(pairs)
    random.Random(seed * 1000 + epoch).shuffle(order)
    out: list[list[Pair]] = []
    current: list[Pair] = []
    docs: set[str] = set()
    waiting: list[Pair] = []
    for pair in order:
        if pair.doc_id in docs:
            waiting.append(pair)
            continue
        current.append(pair)
        docs.add(pair.doc_id)
        if len(current) == size:
            out.append(current)
            current, docs = [], set()
            # Deferred pairs go first into the next batch, where they fit again.
            again, waiting = waiting, []
            for p in again:
                if p.doc_id in docs or len(current) == size:
                    waiting.append(p)
                else:
                    current.append(p)
                    docs.add(p.doc_id)
    for p in waiting:
        if p.doc_id in docs or len(current) == size:
            continue  # dropped: one epoch without it costs less than a false negative
        current.append(p)
        docs.add(p.doc_id)
    if len(current) >= 2:
        out.append(current)
    return out


def pairs_digest(pairs: Sequence[Pair], settings: AdaptSettings, base_model: str) -> str:
    """What a checkpoint was trained on: a rerun resumes only the same training."""
    spec = {"pairs": [asdict(p) for p in pairs], "settings": asdict(settings), "model": base_model}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class AdaptResult:
    model_dir: Path
    steps: int
    total_steps: int
    resumed_from: int
    finished: bool
    seconds: float
    pairs: int


def train(
    base_model: Path,
    pairs: Sequence[Pair],
    out: Path,
    settings: AdaptSettings,
    budget_s: float | None = None,
    progress: bool = True,
    log: Any = print,
) -> AdaptResult:
    """Fine-tune the model at `base_model` on `pairs`, checkpointing into `out`; writes the
    model folder `out/model` when the training ends or the budget is spent."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    digest = pairs_digest(pairs, settings, str(base_model))
    plan = [b for epoch in range(settings.epochs) for b in batches(pairs, settings.batch_size, settings.seed, epoch)]
    if not plan:
        raise PlmUserError(f"{len(pairs)} training pair(s) make no batch of two: adapting needs more chunks")
    ckpt = out / CHECKPOINT
    old = ckpt.with_name(f".{CHECKPOINT}.old")
    if not ckpt.exists() and old.exists():  # killed between the two renames of _swap_in
        old.rename(ckpt)
    state = _read_state(ckpt)
    step = 0
    source = base_model
    if state is not None and state.get("digest") == digest:
        step, source = int(state["step"]), ckpt / MODEL
        log(f"resuming from the checkpoint at step {step}/{len(plan)} in {ckpt}")
    elif state is not None:
        log(f"ignoring the checkpoint in {ckpt}: it was trained on other pairs or settings")

    torch.manual_seed(settings.seed)
    model = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    # --max-seq-length is a training cost only: the saved model reads as many tokens as the base.
    served_length = model.max_seq_length
    model.max_seq_length = min(served_length or settings.max_seq_length, settings.max_seq_length)

    def save(folder: Path) -> None:
        trained_length, model.max_seq_length = model.max_seq_length, served_length
        try:
            model.save(str(folder))
        finally:
            model.max_seq_length = trained_length

    loss = MultipleNegativesRankingLoss(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    warmup = max(1, len(plan) // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (len(plan) - s) / max(1, len(plan) - warmup))
    )
    if step:
        extra = load_training_state(ckpt / "optimizer.pt")
        optimizer.load_state_dict(extra["optimizer"])
        scheduler.load_state_dict(extra["scheduler"])
        torch.set_rng_state(extra["rng"])
    resumed_from = step
    # sentence-transformers 5.2+ names it `preprocess` and deprecates `tokenize`.
    tokenize = getattr(model, "preprocess", None) or model.tokenize
    model.train()
    finished = True
    for index in progress_iter(range(step, len(plan)), "adapting", show=progress, unit="steps"):
        if budget_s is not None and time.monotonic() - start > budget_s:
            log(f"time budget spent after step {step}/{len(plan)}: saving the model as trained so far")
            finished = False
            break
        batch = plan[index]
        features = [
            tokenize([p.query for p in batch]),
            tokenize([p.positive for p in batch]),
            tokenize([p.negative for p in batch]),
        ]
        value = loss(features, torch.zeros(len(batch)))
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        step = index + 1
        if math.isnan(float(value.detach())):
            raise PlmUserError(f"the loss became NaN at step {step}: lower --learning-rate")
        if step % settings.checkpoint_steps == 0 and step < len(plan):
            _save_checkpoint(save, optimizer, scheduler, ckpt, step, digest)
    model.eval()
    target = out / MODEL
    _swap_in(target, save)
    if finished:
        shutil.rmtree(ckpt, ignore_errors=True)
    else:
        _save_checkpoint(save, optimizer, scheduler, ckpt, step, digest)
    return AdaptResult(target, step, len(plan), resumed_from, finished, time.monotonic() - start, len(pairs))


def load_training_state(path: Path) -> dict[str, Any]:
    """The optimizer, scheduler and RNG state a checkpoint saved, read as data only
    (`weights_only=True`: tensors, numbers, strings, lists and dicts, never an object a
    pickle names, whose loading could run any code), or PlmUserError saying how to go on.
    The checkpoint sits in a folder the user names (`--out`); anyone who could write there
    could otherwise make a resume run their code."""
    import torch

    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - whatever a foreign file makes torch raise, it is not ours
        reason = (str(err).strip().splitlines() or [""])[0][:200]
        raise PlmUserError(
            f"{path} is not a training state plm wrote ({type(err).__name__}{': ' + reason if reason else ''}); "
            f"delete the folder {path.parent} to train from the start"
        ) from None
    if not isinstance(state, dict) or not {"optimizer", "scheduler", "rng"} <= state.keys():
        raise PlmUserError(
            f"{path} is not a training state plm wrote (no optimizer, scheduler and rng); "
            f"delete the folder {path.parent} to train from the start"
        )
    return state


def _read_state(ckpt: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((ckpt / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _save_checkpoint(
    save: Callable[[Path], None], optimizer: Any, scheduler: Any, ckpt: Path, step: int, digest: str
) -> None:
    import torch

    def write(tmp: Path) -> None:
        save(tmp / MODEL)
        extra = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}
        torch.save(extra, tmp / "optimizer.pt")
        (tmp / "state.json").write_text(json.dumps({"step": step, "digest": digest}))

    _swap_in(ckpt, write)


def _swap_in(target: Path, write: Any) -> None:
    """Write a folder beside `target` and rename it into place: a kill leaves the old one or the new one."""
    tmp = target.with_name(f".{target.name}.tmp")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
