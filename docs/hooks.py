"""MkDocs hooks: the pages made from the code and the repository, never copied into docs/.

- `stages/`: one page per built-in stage, from the plugin registry, with what
  `plm plugins show NAME` prints (`plm_index.plugin_info`), and an index grouped by family;
  the nav's `Stages` entry gets every page.
- `settings.md`'s two generated tables: the `[job]` table and the `PLM_*` environment
  variables, from their pydantic models (the page writes `{{ job_keys }}` and `{{ env_keys }}`).
- `recipes.md`'s table is the README's "Choosing a recipe" table (`{{ readme_recipe_table }}`).
- `benchmarks.md` is BENCHMARKS.md itself, with the images it shows.
- The nav's `Contracts` entry gets every page of docs/contracts/ (written by docs/contracts.py
  from the family bases, and kept in the repository: a test checks they are current).

Built-ins only (PLM_DISABLE_PLUGIN_AUTOLOAD's view): a third-party plugin installed in the
same environment does not change plm's site.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from plm_core.config import job_section
from plm_core.registry import Registration
from plm_core.settings import Settings
from plm_index.plugin_info import class_summary, describe_fields, markdown_key_table, render_markdown
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[1]
_LOCAL_LINK = re.compile(r"\]\((?!https?:|#|/)([^)\s#]+)")


def stage_path(reg: Registration) -> str:
    """Where a stage's page lives in the site: `stages/<family>/<name>.md`."""
    return f"stages/{reg.family}/{reg.name}.md"


def builtin_stages() -> list[Registration]:
    return [r for r in build_registry(autoload=False).all() if r.package == "plm"]


def stages_index(stages: list[Registration]) -> str:
    lines = [
        "# Stages",
        "",
        "Every stage plm ships, by family (its base class: what `plm plugins` lists and a slot of that family takes).",
        'A config names a stage by its name (`use = "bm25s"`) and sets its keys in the same table.',
        "These pages are generated from the plugin registry when the site is built: each shows what",
        "`plm plugins show NAME` prints, so they always match the installed code. `plm plugins`",
        "lists what is installed, third-party stages included.",
        "",
    ]
    for family in sorted({r.family for r in stages}):
        lines += [f"## {family}", "", "| stage | what it does |", "|---|---|"]
        for reg in (r for r in stages if r.family == family):
            link = stage_path(reg).removeprefix("stages/")
            lines.append(f"| [{reg.name}]({link}) | {class_summary(reg.cls) or ''} |")
        lines.append("")
    return "\n".join(lines)


def on_config(config: Any) -> Any:
    """Expand the nav's `Stages` entry into the index and one page per stage, by family."""
    stages = builtin_stages()
    by_family: list[dict[str, Any]] = []
    for family in sorted({r.family for r in stages}):
        by_family.append({family: [{r.name: stage_path(r)} for r in stages if r.family == family]})
    contracts = sorted(p.name for p in (REPO / "docs" / "contracts").glob("*.md") if p.name != "index.md")
    for i, item in enumerate(config.nav or []):
        if isinstance(item, dict) and item.get("Stages") == "stages/index.md":
            config.nav[i] = {"Stages": ["stages/index.md", *by_family]}
        if isinstance(item, dict) and item.get("Contracts") == "contracts/index.md":
            pages = [{p.removesuffix(".md"): f"contracts/{p}"} for p in contracts]
            config.nav[i] = {"Contracts": ["contracts/index.md", *pages]}
    return config


def on_files(files: Files, config: Any) -> Files:
    stages = builtin_stages()
    files.append(File.generated(config, "stages/index.md", content=stages_index(stages)))
    for reg in stages:
        files.append(File.generated(config, stage_path(reg), content=render_markdown(reg)))
    benchmarks = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks.md", abs_src_path=str(REPO / "BENCHMARKS.md")))
    for target in sorted(set(_LOCAL_LINK.findall(benchmarks))):
        if (REPO / target).is_file() and not target.endswith(".md"):
            files.append(File.generated(config, target, abs_src_path=str(REPO / target)))
    return files


def readme_recipe_table() -> str:
    """The table under the README's "Choosing a recipe" heading, so the site shows the one copy."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    heading = "## Choosing a recipe"
    if heading not in readme:
        raise ValueError(f"README.md has no {heading!r} section for docs/recipes.md")
    section = readme.split(heading, 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    if not rows:
        raise ValueError(f"README.md's {heading!r} section has no table")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri == "recipes.md":
        return markdown.replace("{{ readme_recipe_table }}", readme_recipe_table())
    if page.file.src_uri != "settings.md":
        return markdown
    job_keys = markdown_key_table(describe_fields(job_section(build_registry(autoload=False))))
    env_keys = markdown_key_table(
        describe_fields(Settings), key_text=lambda name: f"PLM_{name.upper()}", key_header="variable"
    )
    return markdown.replace("{{ job_keys }}", job_keys).replace("{{ env_keys }}", env_keys)
