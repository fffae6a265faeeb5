"""A model is used only if it can tokenize. A model folder without its tokenizer files still
loads in transformers, with a tokenizer of its five special tokens: every text becomes
`[CLS] [UNK] ... [SEP]`, every vector the same, and every query answers the same document.
This refuses such a tokenizer, naming the folder and the tokenizer files it lacks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# Common words that any text model's tokenizer splits into known pieces (a word-piece,
# BPE or sentencepiece vocabulary falls back to subwords or bytes, never to unknown).
PROBE = "the cat and a dog run over the river bank"
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def tokenizer_problem(
    folder: Path,
    size: int,
    specials: int,
    probe_ids: Sequence[int],
    unk_id: int | None,
    model_rows: int | None,
    failure: str | None = None,
) -> str | None:
    """Why the tokenizer loaded from `folder` cannot tokenize, or None when it can.
    `size`: its vocabulary, `specials`: how many of those are special tokens, `probe_ids`:
    the ids of PROBE (no special tokens added), `model_rows`: the model's embedding rows,
    `failure`: what tokenizing PROBE raised, if it did."""
    ordinary = [i for i in probe_ids if i != unk_id]
    why = None
    if failure is not None:
        why = f"its tokenizer fails on {PROBE!r} ({failure})"
    elif size - specials < 1:
        why = f"its tokenizer holds only {size} special tokens"
    elif model_rows and size < model_rows // 2:
        why = f"its tokenizer holds {size} tokens, while the model has embeddings for {model_rows}"
    elif not ordinary:
        why = f"its tokenizer reads every word of {PROBE!r} as unknown"
    elif len(set(ordinary)) < 2:
        why = f"its tokenizer reads the distinct words of {PROBE!r} as one token"
    if why is None:
        return None
    present = [name for name in TOKENIZER_FILES if (folder / name).is_file()]
    has = f"it has {', '.join(present)}" if present else "it has none of them"
    return (
        f"the model in {folder} cannot tokenize: {why}. Its tokenizer files are missing or damaged "
        f"(a model needs tokenizer.json, or vocab.txt / vocab.json + merges.txt / a sentencepiece model, with "
        f"tokenizer_config.json; {has}): copy them back from where the model came from, or download it again"
    )


def check_hf_tokenizer(folder: Path, tokenizer: object, model_rows: int | None) -> str | None:
    """`tokenizer_problem` for a transformers tokenizer (what sentence-transformers loads)."""
    try:
        size = len(tokenizer)  # type: ignore[arg-type]
        specials = len(set(getattr(tokenizer, "all_special_ids", []) or []))
        ids = list(tokenizer(PROBE, add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises a bare Exception
        return tokenizer_problem(folder, 0, 0, [], None, model_rows, f"{type(err).__name__}: {err}")
    return tokenizer_problem(folder, size, specials, ids, getattr(tokenizer, "unk_token_id", None), model_rows)
