"""A third-party plugin installed as pip leaves one, for tests that run `plm` in a subprocess:
the module and a .dist-info folder whose entry_points.txt names it in the `plm` group
(importlib.metadata reads it). `tests/conftest.py` puts this folder on sys.path."""

from __future__ import annotations

from pathlib import Path


def plugin_site(site: Path, module: str, source: str, names: list[str] | None = None, package: str = "") -> Path:
    """Write `module` (its `source`) into `site`, registered by the entry points `names` (default:
    the module's own name) of the distribution `package` (default: the module's name with '-')."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {package or module.replace('_', '-')}\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text("[plm]\n" + "".join(f"{n} = {module}\n" for n in names or [module]))
    return site
