"""ONNX Runtime in place of PyTorch for a sentence-transformers model's transformer.

The transformer is exported once per model version (and torch version) into
`PLM_DATA_DIR/models/onnx/<key>/model.onnx`, optionally quantised to int8 beside it, and
then runs in ONNX Runtime behind the same sentence-transformers object: tokenisation,
length-sorted batching, padding, pooling and normalisation stay sentence-transformers' own,
so the two backends differ only in the transformer's arithmetic (fp32: within ~1e-6).
Written files are atomic (a temporary name, then a rename): a crash never leaves half a
model that a later run would load. Not a registered stage; used by `sentence_transformers`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plm import MissingDependencyError, PlmUserError

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "1"  # bump when the export changes, so old exports are not reused
OPSET = 17
FILES = {"none": "model.onnx", "int8": "model_int8.onnx"}


def require_runtime() -> None:
    for module, what in (("onnxruntime", "onnxruntime"), ("onnx", "onnx")):
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError(what, "onnx")


def _transformer(model: Any) -> tuple[Any, str]:
    """The first module (a sentence-transformers Transformer) and the attribute holding its
    Hugging Face model (`model` in sentence-transformers 6, `auto_model` before)."""
    first = model[0]
    for attribute in ("model", "auto_model"):
        inner = getattr(first, attribute, None)
        if inner is not None and hasattr(inner, "config"):
            return first, attribute
    raise PlmUserError(
        f'embedder backend = "onnx" runs models whose first module is a sentence-transformers Transformer; '
        f'this model starts with {type(first).__name__}: use backend = "torch"'
    )


def export_folder(models_dir: Path, model_version: str) -> Path:
    import torch

    key = hashlib.sha256(f"{EXPORT_FORMAT}\0{model_version}\0{torch.__version__}".encode()).hexdigest()[:20]
    return models_dir / "onnx" / key


def _replace_atomically(write: Any, target: Path) -> None:
    """`write(tmp_path)`, then rename over `target`: readers see the whole file or none."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _export(model: Any, target: Path) -> None:
    import torch

    module, attribute = _transformer(model)
    hf_model = getattr(module, attribute)
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # `preprocess` since sentence-transformers 6
    features = tokenize(["an example sentence to trace", "a second, longer example sentence to trace"])
    accepted = set(inspect.signature(hf_model.forward).parameters)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in features and n in accepted]

    class Forward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = hf_model

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True)), return_dict=True).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes on branches that are constant for an encoder
        torch.onnx.export(
            Forward().eval(),
            tuple(features[n] for n in names),
            str(target),
            dynamo=False,  # the tracing exporter: needs no onnxscript, handles these models exactly
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
        )


def _quantize(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser advises pre-processing on the root logger
    try:
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)


def onnx_file(model: Any, model_version: str, quantize: str, models_dir: Path) -> Path:
    """The exported model file for this model version, exporting (and quantising) on first use."""
    folder = export_folder(models_dir, model_version)
    fp32 = folder / FILES["none"]
    if not fp32.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        logger.warning("embedder: exporting the model to ONNX once, into %s", folder)
        try:
            _replace_atomically(lambda tmp: _export(model, tmp), fp32)
        except PlmUserError:
            raise
        except Exception as err:  # noqa: BLE001 - an architecture the exporter cannot trace
            raise PlmUserError(
                f'embedder backend = "onnx": exporting the model failed ({type(err).__name__}: {err}); '
                'use backend = "torch" for this model'
            ) from err
        (folder / "source.json").write_text(json.dumps({"model_version": model_version, "opset": OPSET}))
    target = folder / FILES[quantize]
    if not target.is_file():
        logger.warning("embedder: quantising the ONNX model to int8 once, into %s", target)
        _replace_atomically(lambda tmp: _quantize(fp32, tmp), target)
    return target


class DamagedExportError(PlmUserError):
    """An exported model file that ONNX Runtime cannot read (truncated, overwritten)."""

    def __init__(self, path: Path, err: BaseException) -> None:
        cause = (str(err).strip().splitlines() or [type(err).__name__])[-1][:200]
        super().__init__(
            f"the exported model {path} is damaged ({cause}): delete the folder {path.parent} and it is "
            "exported again on the next run"
        )
        self.path = path


def session_for(path: Path, threads: int, spin: bool = True) -> Any:
    """An ONNX Runtime CPU session over the exported model, `threads` within an operator;
    DamagedExportError when the file cannot be read as a model. `spin=False`: its threads
    sleep between runs instead of spinning, as a query's must: a spinning thread keeps a
    core busy for the retrievers that run next (a hybrid query's were 3-5 ms slower)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - onnxruntime raises InvalidProtobuf, Fail, InvalidGraph...
        if not path.is_file():
            raise
        raise DamagedExportError(path, err) from None


def discard_damaged(path: Path) -> None:
    """Remove a damaged export, so that `onnx_file` writes it again: the int8 model is made
    from the fp32 one, so both go when the int8 one is damaged (the fp32 one may be why)."""
    path.unlink(missing_ok=True)
    if path.name != FILES["none"]:
        (path.parent / FILES["none"]).unlink(missing_ok=True)


def use_onnx(model: Any, path: Path, threads: int) -> None:
    """Swap the model's transformer for an ONNX Runtime session over `path`, in place."""
    import torch

    module, attribute = _transformer(model)
    hf_config = getattr(module, attribute).config
    session = session_for(path, threads)
    names = [i.name for i in session.get_inputs()]

    class OnnxTransformer(torch.nn.Module):
        """The Hugging Face model's forward pass, answered by ONNX Runtime."""

        def __init__(self) -> None:
            super().__init__()
            self.config = hf_config

        def forward(self, **features: Any) -> dict[str, Any]:
            feed = {n: features[n].detach().cpu().numpy() for n in names}
            (hidden,) = session.run(["last_hidden_state"], feed)
            return {"last_hidden_state": torch.from_numpy(hidden)}

    setattr(module, attribute, OnnxTransformer())


def find_export(models_dir: Path, model_version: str, quantize: str) -> Path | None:
    """An existing export of this model version (any torch version traced it: the function is
    the same), found without importing torch; None when there is none yet."""
    found = []
    for source in (models_dir / "onnx").glob("*/source.json"):
        try:
            same = json.loads(source.read_text()).get("model_version") == model_version
        except (OSError, ValueError):
            continue
        target = source.parent / FILES[quantize]
        if same and target.is_file():
            found.append((target.stat().st_mtime_ns, target))
    return max(found)[1] if found else None


class Encoder:
    """Vectors with no torch and no sentence-transformers: the model's own fast tokenizer
    (`tokenizer.json`), the exported transformer in ONNX Runtime, and the model's pooling and
    normalisation in numpy, as sentence-transformers computes them: documents sorted by length,
    batched and padded as its `encode` does, so that a batch's vectors equal the torch path's
    over the same export (within 1e-6). Queries are one text each, unpadded. `load` returns None
    for a model it cannot follow (another pooling, extra modules, no tokenizer.json, no export
    yet); the embedder then takes the full path."""

    def __init__(
        self, tokenizer: Any, session: Any, mean: bool, normalize: bool, lower: bool, pad: tuple[int, str]
    ) -> None:
        self.tokenizer, self.session, self.mean, self.normalize, self.lower = tokenizer, session, mean, normalize, lower
        self.pad_id, self.pad_token = pad
        self.inputs = [i.name for i in session.get_inputs()]

    @classmethod
    def load(cls, path: Path, export: Path, max_seq_length: int | None, threads: int) -> Encoder | None:
        try:
            modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
            pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
            bert = _json_or_empty(path / "sentence_bert_config.json")
            tokenizer_config = _json_or_empty(path / "tokenizer_config.json")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        longest = tokenizer_config.get("model_max_length")
        # sentence-transformers < 6 writes pooling_mode_<mode>_tokens flags, 6 one pooling_mode
        modes = {k.removeprefix("pooling_mode_") for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
        modes |= {pooling["pooling_mode"]} if isinstance(pooling.get("pooling_mode"), str) else set()
        if modules[:2] != ["Transformer", "Pooling"] or set(modules[2:]) - {"Normalize"} or len(modes) != 1:
            return None
        if modes - {"mean_tokens", "mean", "cls_token", "cls"} or not (path / "tokenizer.json").is_file():
            return None
        if not max_seq_length:  # as sentence-transformers: its own setting, else the tokenizer's
            max_seq_length = bert.get("max_seq_length") or (longest if isinstance(longest, int) else None) or 512
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as err:  # noqa: BLE001 - the tokenizers library raises a bare Exception
            raise PlmUserError(
                f"the model in {path} cannot tokenize: {path / 'tokenizer.json'} is damaged ({err}): copy it back "
                "from where the model came from, or download the model again"
            ) from None
        cannot = _cannot_tokenize(tokenizer, path)
        if cannot is not None:
            raise PlmUserError(cannot)
        tokenizer.no_padding()
        tokenizer.enable_truncation(min(int(max_seq_length), 1 << 20))
        session = session_for(export, threads, spin=False)
        mean = bool(modes & {"mean_tokens", "mean"})
        lower = bool(bert.get("do_lower_case"))
        return cls(tokenizer, session, mean, "Normalize" in modules, lower, _pad(tokenizer, tokenizer_config))

    @property
    def dimension(self) -> int:
        width = self.session.get_outputs()[0].shape[-1]
        return width if isinstance(width, int) else len(self.encode("x", False))

    def encode(self, text: str, normalize: bool) -> Any:
        """One text's vector (a query: no batch, no padding)."""
        import numpy as np

        (vector,) = self._run([self.tokenizer.encode(self._text(text))], normalize)
        return np.ascontiguousarray(vector, dtype=np.float32)

    def encode_many(self, texts: Sequence[str], batch_size: int, normalize: bool, progress: bool = False) -> Any:
        """A float32 (len(texts), dim) matrix, in sentence-transformers' batches: texts sorted by
        length (longest first), `batch_size` at a time, each batch padded to its longest."""
        import numpy as np

        order = np.argsort([-len(t) for t in texts])
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        starts = range(0, len(texts), batch_size)
        bar = _bar(len(starts)) if progress else None
        try:
            for start in starts:
                rows = order[start : start + batch_size]
                self.tokenizer.enable_padding(pad_id=self.pad_id, pad_token=self.pad_token)
                try:
                    encodings = self.tokenizer.encode_batch([self._text(texts[i]) for i in rows])
                finally:
                    self.tokenizer.no_padding()
                out[rows] = self._run(encodings, normalize)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        return out

    def _text(self, text: str) -> str:
        text = text.strip()  # as sentence-transformers' Transformer.tokenize
        return text.lower() if self.lower else text

    def _run(self, encodings: list[Any], normalize: bool) -> Any:
        import numpy as np

        features = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feed = {name: np.asarray(features[name], dtype=np.int64) for name in self.inputs}
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        hidden = hidden.astype(np.float32, copy=False)
        if self.mean:
            mask = np.asarray(features["attention_mask"], dtype=np.float32)[:, :, None]
            vectors = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        else:
            vectors = hidden[:, 0]
        if normalize or self.normalize:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


def _pad(tokenizer: Any, tokenizer_config: dict[str, Any]) -> tuple[int, str]:
    """The padding token and its id, as the model's tokenizer_config.json names it."""
    token = tokenizer_config.get("pad_token")
    token = token.get("content") if isinstance(token, dict) else token
    if isinstance(token, str) and (token_id := tokenizer.token_to_id(token)) is not None:
        return int(token_id), token
    return 0, "[PAD]"


def _bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="Batches")


def _cannot_tokenize(tokenizer: Any, path: Path) -> str | None:
    """`tokenizer_problem` for a fast tokenizer read from tokenizer.json."""
    from plm_plugins.embedders.tokenizer_check import PROBE, tokenizer_problem

    rows = _json_or_empty(path / "config.json").get("vocab_size")
    rows = rows if isinstance(rows, int) else None
    try:
        specials = sum(1 for t in tokenizer.get_added_tokens_decoder().values() if t.special)
        unk = getattr(tokenizer.model, "unk_token", None)
        unk_id = tokenizer.token_to_id(unk) if isinstance(unk, str) else None
        ids = tokenizer.encode(PROBE, add_special_tokens=False).ids
        size = tokenizer.get_vocab_size(with_added_tokens=True)
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises a bare Exception
        return tokenizer_problem(path, 0, 0, [], None, rows, f"{type(err).__name__}: {err}")
    return tokenizer_problem(path, size, specials, ids, unk_id, rows)


def _json_or_empty(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())) if path.is_file() else {}
