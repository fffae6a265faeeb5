"""Deletion files: a segment's deleted rows, content-addressed (the name holds their
checksum), written whole and cached in memory, since such a file never changes."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from plm_core.errors import StaleIndexError, StoreError
from plm_index import builds

_DELETES: OrderedDict[str, Any] = OrderedDict()  # deletion file -> its rows (content-addressed: never changes)
_DELETES_KEPT = 1024


def _write_deletes(base: Path, seg: str, rows: Any) -> str | None:
    import numpy as np

    if not len(rows):
        return None
    raw = np.ascontiguousarray(rows, dtype=np.int64)
    name = f"{seg}-{hashlib.sha1(raw.tobytes()).hexdigest()[:16]}.npy"
    path = base / "deletes" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        with tmp.open("wb") as fh:
            np.save(fh, raw, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    _remember(str(path), raw)
    return name


def _remember(path: str, rows: Any) -> None:
    _DELETES[path] = rows
    _DELETES.move_to_end(path)
    while len(_DELETES) > _DELETES_KEPT:
        _DELETES.popitem(last=False)


def _read_deletes(base: Path, name: str | None, n_rows: int, cached: bool = True) -> Any:
    import numpy as np

    if name is None:
        return np.zeros(0, dtype=np.int64)
    path = base / "deletes" / name
    if cached and str(path) in _DELETES:
        return _DELETES[str(path)]
    try:
        rows = builds.load_npy(path, mmap=False)
    except FileNotFoundError:
        raise StaleIndexError(f"deletions {path} were removed while loading") from None
    except (OSError, ValueError) as err:
        # numpy's own words for random bytes advise loading them with pickle: not ours to repeat
        why = "not an array of row numbers" if "pickle" in str(err) or "not a .npy" in str(err) else str(err)
        raise StoreError(f"index deletions {path} are corrupt ({why}): run `plm index rebuild`") from None
    digest = hashlib.sha1(np.ascontiguousarray(rows, dtype=np.int64).tobytes()).hexdigest()[:16]
    if (
        rows.ndim != 1
        or not name.endswith(f"-{digest}.npy")
        or (len(rows) and (rows.min() < 0 or rows.max() >= n_rows))
    ):
        raise StoreError(f"index deletions {path} are corrupt (checksum): run `plm index rebuild`")
    _remember(str(path), rows)
    return rows


def _none() -> Any:
    import numpy as np

    return np.zeros(0, dtype=np.int64)
