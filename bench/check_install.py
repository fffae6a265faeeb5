"""What the README's first command installs, resolved against plain PyPI (issue 23).

    python bench/check_install.py [--extra main] [--report FILE]

Runs `pip install --dry-run --report` of `.[EXTRA]` with every local pip setting ignored
(`--isolated`, the index https://pypi.org/simple), then walks the resolved requirement graph
from plm: what torch alone brings (on plain PyPI its CUDA build: nvidia-*, triton; the
README installs torch from the CPU index first, so none of it comes) is listed apart from
everything else, and the rest must name no heavy optional package. Exit 1 if it does.
Needs network access to PyPI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
HEAVY = re.compile(r"^(jax|jaxlib|numba|llvmlite|ray|gliner|faiss-cpu|pgserver|nvidia-.*|cuda-.*|triton)$")


def resolve(extra: str, report: Path) -> dict[str, dict]:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), "--index-url", "https://pypi.org/simple", "-e", f"{REPO}[{extra}]"],
        check=True,
    )  # fmt: skip
    items = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in items}


def closure(start: str, extras: set[str], meta: dict[str, dict], skip: set[str]) -> set[str]:
    """Every resolved package reachable from `start` (with `extras`), not entering `skip`."""
    seen: set[tuple[str, str]] = set()  # (package, extra): plm[main] names plm[bm25,...] again
    todo = [(start, extra) for extra in extras or {""}]
    while todo:
        name, extra = todo.pop()
        if name in skip or name not in meta or (name, extra) in seen:
            continue
        seen.add((name, extra))
        for text in meta[name].get("requires_dist") or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(canonicalize_name(req.name), e) for e in req.extras | {""}]
    return {name for name, _ in seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extra", default="main")
    parser.add_argument("--report", type=Path, help="keep pip's report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = args.report or Path(tmp) / "report.json"
        meta = resolve(args.extra, report)
    rest = closure("plm", {args.extra}, meta, skip={"torch"})
    torch_only = closure("torch", set(), meta, skip=rest - {"torch"}) - {"torch"}
    heavy = sorted(n for n in rest if HEAVY.match(n))
    print(f"plm[{args.extra}] on plain PyPI resolves {len(meta)} packages:")
    torch = f"torch {meta['torch']['version']}"
    print(f"  {torch} and what only it brings ({len(torch_only)}): {', '.join(sorted(torch_only))}")
    print(f"  everything else ({len(rest)}): {', '.join(sorted(rest))}")
    print(f"heavy optional packages outside torch: {', '.join(heavy) if heavy else 'none'}")
    return 1 if heavy else 0


if __name__ == "__main__":
    raise SystemExit(main())
