"""Validation cases: what engineers expect retrieval to return, written in YAML, no code.

`plm validate --cases FILE` and pytest (one parametrised test per case) run the same file:

    defaults: {k: 5}                   # optional; k defaults to 5
    cases:
      - name: rpo of vault snapshots   # optional (defaults to the query); unique
        query: What RPO do Vault snapshots give?
        k: 5                           # optional, as is filters: {section: operations}
        expect: {doc_id: disaster-recovery, rank_at_most: 1, text_contains: RPO of 15 minutes}

Semantics of `expect` (at least one key; every key given must hold). Each key is checked
on its own over the top k hits, so two keys may be satisfied by different hits:

- `doc_id` (a string or a list): every listed document has a chunk in the top k.
- `rank_at_most: N` (needs `doc_id`, N <= k): every listed document's best chunk has
  rank <= N. Ranks in cases and reports are 1-based, as `plm query` prints them.
- `not_doc_id` (a string or a list): none of these documents has a chunk in the top k.
- `text_contains` (a string or a list): every string occurs in some hit's text. Matching
  ignores case and treats any run of whitespace as one space; chunk text keeps its
  Markdown, so `**RPO of 15 minutes**` contains "RPO of 15 minutes" but not "RPO of **15".
- `heading_contains` (a string or a list): every string occurs, ignoring case, in some
  hit's title and heading path written "Title > Section > Subsection".
- `metadata: {key: value}`: one hit has all these values. Chunk metadata is the
  document's front matter plus `title` and `path`; a value matches when equal or when
  equal as text, so `version: 5` matches "5" and a YAML date matches "2026-04-22".

`filters` is a spec of `plm_index.filters` (operators, ranges, dates, list metadata), checked
when the file loads. A case with `filters` is an error, not a failure, when the pipeline
cannot filter or returns a hit those filters exclude, as `plm_index.filters` judges it: a
check on unfiltered hits would prove nothing.

The file is UTF-8 YAML of at most 10 MB whose aliases (`*name`) add at most 200,000
values once expanded; anything else is one error naming the file.

From pytest: `@pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])` over
`load_cases(path)`, then `assert (r := run_case(job, case)).passed, r.report()`
(tests/test_cases_sample.py does this).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from plm_core.errors import PlmUserError
from plm_core.records import Hit
from plm_index.filters import compile_filters, normalize_filters
from plm_index.ranking import below_title

DEFAULT_K = 5


def _as_list(value: Any) -> Any:
    # "a string or a list of strings" in the file, always a list in code. YAML reads
    # `doc_id: 123` or `text_contains: 70` as numbers; they are meant as text.
    def text(v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    return [text(value)] if not isinstance(value, list) else [text(v) for v in value]


NonEmpty = Annotated[str, Field(min_length=1)]
Strings = Annotated[list[NonEmpty], BeforeValidator(_as_list)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expect(_Strict):
    doc_id: Strings = []
    rank_at_most: Annotated[int, Field(ge=1)] | None = None
    not_doc_id: Strings = []
    text_contains: Strings = []
    heading_contains: Strings = []
    metadata: dict[str, Any] = {}

    @model_validator(mode="after")
    def _coherent(self) -> Expect:
        if self.rank_at_most is not None and not self.doc_id:
            raise ValueError("rank_at_most needs doc_id (the documents it applies to)")
        if not (self.doc_id or self.not_doc_id or self.text_contains or self.heading_contains or self.metadata):
            raise ValueError(f"give at least one expectation: {', '.join(Expect.model_fields)}")
        if both := sorted(set(self.doc_id) & set(self.not_doc_id)):
            raise ValueError(f"{', '.join(both)} is both in doc_id and in not_doc_id")
        return self


class Case(_Strict):
    name: NonEmpty | None = None
    query: NonEmpty
    k: Annotated[int, Field(ge=1)] | None = None
    filters: dict[str, Any] | None = None
    expect: Expect

    @property
    def top_k(self) -> int:
        return self.k or DEFAULT_K


class Defaults(_Strict):
    k: Annotated[int, Field(ge=1)] = DEFAULT_K


class CasesFile(_Strict):
    defaults: Defaults = Defaults()
    cases: Annotated[list[Case], Field(min_length=1)]


# The model whose keys are valid at a location, for "unknown key ... did you mean".
_MODEL_AT: dict[tuple[str, ...], type[_Strict]] = {
    (): CasesFile,
    ("defaults",): Defaults,
    ("cases",): Case,
    ("cases", "expect"): Expect,
}


def load_cases(path: str | Path) -> list[Case]:
    """Read and validate a cases file; every problem is a PlmUserError naming file, case and key."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise PlmUserError(f"cases file not found: {path}")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise PlmUserError(f"{path}: cannot read the cases file ({err.strerror or err})") from None
    if len(data) > MAX_CASES_BYTES:
        raise PlmUserError(f"{path}: {len(data):,} bytes is too large for a cases file (at most {MAX_CASES_BYTES:,})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise PlmUserError(
            f"{path}:{line}: not UTF-8 text (byte offset {err.start}: {data[err.start : err.start + 1]!r}); "
            "save the cases file as UTF-8"
        ) from None
    try:
        raw = _safe_yaml(text)
    except RecursionError:
        raise PlmUserError(f"{path}: malformed YAML: nested too deeply") from None
    except _AliasBomb as err:
        raise PlmUserError(f"{path}: {err}") from None
    except yaml.reader.ReaderError as err:  # its str() is several lines; one is enough
        line = text.count("\n", 0, err.position) + 1
        raise PlmUserError(
            f"{path}:{line}: malformed YAML: character #x{err.character:04x} at offset {err.position} "
            f"({err.reason}); remove it or write it as an escape in a double-quoted string"
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise PlmUserError(f"{where}: malformed YAML: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(raw, dict):
        raise PlmUserError(f"{path}: expected a mapping with a 'cases:' list, got {type(raw).__name__}")
    try:
        parsed = CasesFile.model_validate(raw)
    except ValidationError as err:
        raise PlmUserError(_format_errors(path, raw, err)) from None
    cases: list[Case] = []
    names: set[str | None] = set()
    for i, case in enumerate(parsed.cases):
        case = case.model_copy(update={"name": case.name or case.query, "k": case.k or parsed.defaults.k})
        where = f"{path}: {_case_label(raw, i)}"
        if case.name in names:
            raise PlmUserError(f"{where}: duplicate case name {case.name!r}; names must be unique")
        names.add(case.name)
        if case.expect.rank_at_most is not None and case.expect.rank_at_most > case.top_k:
            raise PlmUserError(
                f"{where}: expect.rank_at_most = {case.expect.rank_at_most} is larger than "
                f"k = {case.top_k}; raise k or lower rank_at_most"
            )
        try:
            normalize_filters(case.filters)  # a bad spec is the file's error, before any query runs
        except PlmUserError as err:
            raise PlmUserError(f"{where}: filters: {err}") from None
        cases.append(case)
    return cases


MAX_CASES_BYTES = 10 << 20
# Values that aliases add once expanded. A file's own values are bounded by its size;
# aliases are not: nested ones ("billion laughs", 9 aliases x 8 levels = 43M values)
# took 19 s and 1.9 GB downstream. Sharing a block among cases stays far below this.
MAX_ALIAS_VALUES = 200_000


class _AliasBomb(Exception):
    pass


def _alias_values(root: Any) -> int:
    """How many values aliases add to the composed document once expanded (each node's
    expanded size is computed once, so this is linear in the file, not in the expansion)."""
    import yaml

    sizes: dict[int, int] = {}
    nodes = 0

    def expanded(node: Any) -> int:
        nonlocal nodes
        if id(node) not in sizes:
            nodes += 1
            sizes[id(node)] = 1  # a recursive alias counts once while its node is measured
            if isinstance(node, yaml.SequenceNode):
                sizes[id(node)] = 1 + sum(expanded(child) for child in node.value)
            elif isinstance(node, yaml.MappingNode):
                sizes[id(node)] = 1 + sum(expanded(k) + expanded(v) for k, v in node.value)
        return sizes[id(node)]

    return expanded(root) - nodes


def _safe_yaml(text: str) -> Any:
    """`yaml.safe_load` in one pass, refusing a document whose aliases would add more
    than MAX_ALIAS_VALUES values: nested aliases fail in milliseconds, before anything
    walks the expansion."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if (added := _alias_values(root)) > MAX_ALIAS_VALUES:
            raise _AliasBomb(
                f"YAML aliases (*name) would expand to {added:,} more values, over the limit of "
                f"{MAX_ALIAS_VALUES:,} (nested aliases?); write the repeated parts out or nest fewer aliases"
            )
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _case_label(raw: Mapping[str, Any], index: int) -> str:
    items = raw.get("cases")
    item = items[index] if isinstance(items, list) and index < len(items) else None
    name = item.get("name") or item.get("query") if isinstance(item, dict) else None
    return f"case {index + 1}" + (f" ({name!r})" if name else "")


def _format_errors(path: Path, raw: Mapping[str, Any], err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = list(e["loc"])
        where = "top level"
        if loc[:1] == ["cases"] and len(loc) > 1 and isinstance(loc[1], int):
            where, loc = _case_label(raw, loc[1]), loc[2:]
        elif loc[:1] == ["defaults"]:
            where, loc = "defaults", loc[1:]
        key = ".".join(str(p) for p in loc)
        if e["type"] == "extra_forbidden":
            scope = tuple(str(p) for p in e["loc"][:-1] if isinstance(p, str))
            known = list(_MODEL_AT.get(scope, CasesFile).model_fields)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            lines.append(f"{where}: unknown key {key!r}; allowed keys: {', '.join(known)}.{hint}")
        elif e["type"] == "missing":
            lines.append(f"{where}: missing required key {key!r}")
        else:
            msg = str(e["msg"]).removeprefix("Value error, ")
            got = f" (got {e['input']!r})" if e["type"] not in ("value_error", "too_short") else ""
            lines.append(f"{where}: {f'key {key!r}: ' if key else ''}{msg}{got}")
    return f"{path}: invalid cases file:\n  " + "\n  ".join(lines)


# ---------------------------------------------------------------- checking


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _heading(hit: Hit) -> str:
    """ "Title > Section > Subsection": a hit's path leaves out a first heading equal to the
    title, so the title is put back in front (once)."""
    title = str(hit.metadata.get("title", "") or "")
    return " > ".join([title, *below_title(hit.heading_path, title)] if title else hit.heading_path)


def _same(actual: Any, expected: Any) -> bool:
    return actual == expected or (actual is not None and str(actual) == str(expected))


def _values(hit: Hit, keys: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={hit.metadata.get(key)!r}" for key in keys)


def _docs(hits: Sequence[Hit]) -> str:
    return ", ".join(dict.fromkeys(h.doc_id for h in hits)) or "no hits"


def check_case(case: Case, hits: Sequence[Hit]) -> list[str]:
    """Failure messages for one case against its hits (empty when it passes); pure."""
    k, exp = case.top_k, case.expect
    top = list(hits)[:k]
    first: dict[str, int] = {}
    for h in top:
        first.setdefault(h.doc_id, h.rank)
    failures: list[str] = []
    for doc in exp.doc_id:
        if doc not in first:
            failures.append(f"doc_id: {doc!r} is not in the top {k} (got: {_docs(top)})")
        elif exp.rank_at_most is not None and first[doc] > exp.rank_at_most:
            failures.append(
                f"rank_at_most: {doc!r} first appears at rank {first[doc]}, "
                f"expected rank <= {exp.rank_at_most} (got: {_docs(top)})"
            )
    for doc in exp.not_doc_id:
        if doc in first:
            failures.append(f"not_doc_id: {doc!r} is in the top {k}, at rank {first[doc]}")
    texts = [_norm(h.text) for h in top]
    for s in exp.text_contains:
        if not any(_norm(s) in t for t in texts):
            failures.append(f"text_contains: no hit in the top {k} contains {s!r} (docs: {_docs(top)})")
    headings = [_heading(h) for h in top]
    for s in exp.heading_contains:
        if not any(_norm(s) in _norm(hd) for hd in headings):
            seen = "; ".join(dict.fromkeys(hd or "(none)" for hd in headings)) or "no hits"
            failures.append(f"heading_contains: no heading in the top {k} contains {s!r} (headings: {seen})")
    if exp.metadata and not any(all(_same(h.metadata.get(key), val) for key, val in exp.metadata.items()) for h in top):
        found: dict[str, list[str]] = {}  # the values seen -> the ranks that have them
        for h in top:
            found.setdefault(_values(h, exp.metadata), []).append(str(h.rank))
        got = "; ".join(f"{v} at rank{'s' * (len(r) > 1)} {', '.join(r)}" for v, r in found.items()) or "no hits"
        failures.append(f"metadata: no hit in the top {k} has {dict(exp.metadata)} (got {got})")
    return failures


def _outside_filters(filters: Mapping[str, Any], hits: Sequence[Hit]) -> list[str]:
    """Hits the filters exclude, judged by the one filter implementation (operators,
    ranges, dates, lists), not by plain equality."""
    match = compile_filters(filters)
    return [
        f"retrieval ignored filters {dict(filters)}: rank {h.rank} ({h.doc_id}) has {_values(h, filters)}"
        for h in hits
        if match is not None and not match(h.metadata)
    ][:1]


# ---------------------------------------------------------------- running


@dataclass
class CaseResult:
    case: Case
    status: Literal["pass", "fail", "error"]
    messages: list[str] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def report(self) -> str:
        """A multi-line explanation for assertion messages and logs."""
        lines = [f"case {self.case.name!r} ({self.status}): {self.case.query}", *(f"  - {m}" for m in self.messages)]
        lines += [f"    {h.rank}. {h.doc_id} | {_heading(h)}" for h in self.hits]
        return "\n".join(lines)


class Retriever(Protocol):
    """What running cases needs of a Job (so tests can pass a stub)."""

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Hit]: ...


def run_case(job: Retriever, case: Case) -> CaseResult:
    """Query the job for one case and check it; a user-fixable retrieval error is an 'error' result."""
    t0 = time.perf_counter()
    filters = dict(case.filters) if case.filters else None
    try:
        hits = job.retrieve(case.query, k=case.top_k, filters=filters)
    except PlmUserError as err:
        return CaseResult(case, "error", [str(err)], [], time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    try:
        ignored = _outside_filters(filters, hits) if filters else []
    except PlmUserError as err:  # a spec the retriever did not check
        return CaseResult(case, "error", [str(err)], list(hits), seconds)
    if ignored:
        return CaseResult(case, "error", ignored, list(hits), seconds)
    failures = check_case(case, hits)
    return CaseResult(case, "fail" if failures else "pass", failures, list(hits), seconds)


def run_cases(job: Retriever, cases: Sequence[Case]) -> list[CaseResult]:
    return [run_case(job, case) for case in cases]


def summary(results: Sequence[CaseResult]) -> str:
    """'N passed, M failed' (plus errors when there are any)."""
    n = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error")}
    errors = f", {n['error']} error{'s' * (n['error'] > 1)}" if n["error"] else ""
    return f"{n['pass']} passed, {n['fail']} failed{errors}"
