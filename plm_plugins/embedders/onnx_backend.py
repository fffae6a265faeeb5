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
from pathlib import Path
from typing import Any

from plm_core.errors import MissingDependencyError, PlmUserError

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


def use_onnx(model: Any, path: Path, threads: int) -> None:
    """Swap the model's transformer for an ONNX Runtime session over `path`, in place."""
    import onnxruntime as ort
    import torch

    module, attribute = _transformer(model)
    hf_config = getattr(module, attribute).config
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
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
