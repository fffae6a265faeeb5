"""The kernel stays small: no module of plm_core over 400 lines (docs/architecture.md says so)."""

from __future__ import annotations

from pathlib import Path

KERNEL = Path(__file__).resolve().parents[2] / "plm_core"


def test_no_kernel_module_is_over_400_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in KERNEL.glob("*.py")}
    assert sizes and not {name: n for name, n in sizes.items() if n > 400}, sorted(sizes.items())


def test_no_runtime_module_is_over_500_lines() -> None:
    """segments.py had grown to 1,100 lines doing nine jobs; it is a package now."""
    runtime = KERNEL.parent / "plm_index"
    sizes = {str(p.relative_to(runtime)): len(p.read_text().splitlines()) for p in runtime.rglob("*.py")}
    assert sizes and not {name: n for name, n in sizes.items() if n > 500}, sorted(sizes.items())
