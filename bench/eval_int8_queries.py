"""`plm eval` in which every config whose file name holds "q8" embeds its *queries* with the
int8 ONNX export of its model while its documents keep their fp32 vectors: the case of an
index built with the fp32 model and served with `quantize = "int8"` for the query alone
(an int8 recipe re-embeds the documents too: the content cache keys vectors by quantisation).
The int8 export must exist (any run of the recipe with `quantize = "int8"` writes it). The
index's fingerprint stays the fp32 recipe's, so nothing is embedded again.

    PLM_DATA_DIR=/tmp/h46/data python bench/eval_int8_queries.py eval -c rec_c10.toml -c rec_q8_c10.toml \
        --dataset ../shared/datasets/poc_needle --queries informed
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import plm_eval.runner as runner
import plm_plugins.embedders.onnx_backend as onnx_backend

_int8 = {"now": False}
_find, _run = onnx_backend.find_export, runner.run_job


def _find_export(models_dir: Path, model_version: str, quantize: str) -> Path | None:
    found = _find(models_dir, model_version, "int8" if _int8["now"] else quantize)
    print(f"query model export: {found}", file=sys.stderr)
    return found


def _run_job(job: Any, *args: Any, **kwargs: Any) -> Any:
    _int8["now"] = "q8" in job.config.path.stem
    return _run(job, *args, **kwargs)


def main() -> None:
    onnx_backend.find_export, runner.run_job = _find_export, _run_job  # type: ignore[assignment]
    from plm_index.cli import main as plm

    sys.argv = ["plm", *sys.argv[1:]]
    plm()


if __name__ == "__main__":
    main()
