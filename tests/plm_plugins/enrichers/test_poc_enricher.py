"""The POC enricher's exact strings, the shared text preparation, and reference parity."""

from __future__ import annotations

import pydantic
import pytest

from plm_core.records import Chunk
from plm_core.registry import Registry
from plm_plugins.enrichers import poc_enricher as poc
from plm_plugins.enrichers.poc_enricher import PocEnricher, enrichment_prefix
from plm_plugins.enrichers.text_prep import code_share, group_entities, text_to_analyse


def chunk(text: str = "body", keywords: tuple[str, ...] = (), entities: dict | None = None) -> Chunk:
    return Chunk(id="d_mdsem_0", doc_id="d", text=text, keywords=keywords, entities=entities or {})


def enriched(c: Chunk, **config: int) -> str | None:
    return PocEnricher(**config).run([c])[0].enriched


# --- enriched text -------------------------------------------------------------------


def test_keywords_only() -> None:
    assert enriched(chunk(keywords=("Pod", "node"))) == "Pod, node\n\nbody"


def test_entities_only() -> None:
    assert enriched(chunk(entities={"ORG": ("CNCF",), "PERSON": ("Ann",)})) == "CNCF, Ann\n\nbody"


def test_keywords_and_entities() -> None:
    c = chunk(keywords=("Pod", "node"), entities={"ORG": ("CNCF",)})
    assert enriched(c) == "Pod, node | CNCF\n\nbody"


def test_neither_leaves_text_unchanged_but_sets_enriched() -> None:
    out = PocEnricher().run([chunk("just text")])[0]
    assert out.enriched == "just text"
    assert out.index_text == "just text"


def test_keyword_cap_is_seven_in_order() -> None:
    kws = tuple(f"k{i}" for i in range(10))
    assert enriched(chunk(keywords=kws)) == "k0, k1, k2, k3, k4, k5, k6\n\nbody"


def test_entity_caps_two_per_label_five_in_total_in_label_order() -> None:
    ents = {
        "PERSON": ("p1", "p2", "p3"),
        "ORG": ("o1", "o2", "o3", "o4", "o5"),
        "GPE": ("g1", "g2"),
        "LAW": ("l1",),
    }
    assert enriched(chunk(entities=ents)) == "p1, p2, o1, o2, g1\n\nbody"


def test_same_value_under_two_labels_is_repeated_without_labels() -> None:
    # The POC's reference has "Kubernetes, Kubernetes" (ORG and PERSON): keep it.
    assert enriched(chunk(entities={"ORG": ("Kubernetes",), "PERSON": ("Kubernetes",)})) == (
        "Kubernetes, Kubernetes\n\nbody"
    )


def test_entity_values_are_kept_verbatim() -> None:
    assert enrichment_prefix(("a",), {"ORG": ("Control\n\nPlane",)}) == "a | Control\n\nPlane"


def test_config_changes_caps_and_an_empty_part_is_omitted() -> None:
    c = chunk(keywords=("a", "b", "c"), entities={"ORG": ("o1", "o2"), "GPE": ("g1",)})
    assert enriched(c, max_keywords=2, per_label=1, max_entities=3) == "a, b | o1, g1\n\nbody"
    assert enriched(c, max_keywords=0) == "o1, o2, g1\n\nbody"
    assert enriched(c, max_entities=0) == "a, b, c\n\nbody"


def test_run_returns_new_chunks_in_order_and_keeps_other_fields() -> None:
    a = Chunk(id="a", doc_id="d", text="A", heading_path=("H",), start_char=3, keywords=("x",))
    b = chunk("B")
    out = PocEnricher().run([a, b])
    assert [c.id for c in out] == ["a", "d_mdsem_0"]
    assert out[0].heading_path == ("H",) and out[0].start_char == 3 and out[0].keywords == ("x",)
    assert a.enriched is None  # frozen input untouched


def test_config_rejects_unknown_keys_and_negative_caps() -> None:
    with pytest.raises(pydantic.ValidationError):
        PocEnricher(max_keyword=3)
    with pytest.raises(pydantic.ValidationError):
        PocEnricher(per_label=-1)


def test_registers_as_poc_enricher() -> None:
    registry = Registry()
    poc.plm_register_components(registry=registry)
    reg = registry.get("poc_enricher")
    assert reg.cls is PocEnricher and reg.family == "enrichers"


# --- text preparation ------------------------------------------------------------------


def test_min_chars_counts_stripped_text() -> None:
    assert text_to_analyse("  " + "x" * 49 + "\n\n") is None
    assert text_to_analyse("x" * 50) == "x" * 50
    assert text_to_analyse("short", min_chars=5) == "short"


def test_code_below_ratio_is_kept() -> None:
    text = "Run `kubectl get pods` to list the pods running in the default namespace of a cluster."
    assert code_share(text) <= 0.3
    assert text_to_analyse(text) == text


def test_code_above_ratio_becomes_single_spaces() -> None:
    text = "Apply it:\n```yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx\n```\nthen run `kubectl apply`."
    assert code_share(text) > 0.3
    assert text_to_analyse(text) == "Apply it:\n \nthen run  ."


def test_inline_code_does_not_span_lines() -> None:
    assert code_share("`a\nb`") == 0.0
    assert code_share("`ab`") == 1.0
    assert code_share("") == 0.0


def test_code_ratio_threshold_is_strict() -> None:
    text = "`" + "x" * 28 + "`" + "y" * 70  # exactly 30% code
    assert code_share(text) == pytest.approx(0.3)
    assert text_to_analyse(text) == text
    assert text_to_analyse(text, code_ratio=0.29) == " " + "y" * 70


def test_group_entities_first_seen_order_dedup_cap_and_filter() -> None:
    pairs = [("DATE", "today"), ("PERSON", "Ann"), ("ORG", "A"), ("ORG", "A"), ("PERSON", "Bo")]
    pairs += [("ORG", f"o{i}") for i in range(6)]
    assert group_entities(pairs, ["ORG", "PERSON"], 3) == {"PERSON": ("Ann", "Bo"), "ORG": ("A", "o0", "o1")}


# --- the POC's reference ---------------------------------------------------------------


@pytest.mark.dataset
def test_enriched_text_matches_the_reference_for_every_chunk(reference_enriched: list[dict], reference_text) -> None:
    chunks = [
        Chunk(
            id=r["chunk_id"],
            doc_id=r["doc_id"],
            text=reference_text(r),
            keywords=tuple(r["keywords"]),
            entities={label: tuple(values) for label, values in r["entities"].items()},
        )
        for r in reference_enriched
    ]
    out = PocEnricher().run(chunks)
    bad = [c.id for c, r in zip(out, reference_enriched, strict=True) if c.enriched != r["enriched"]]
    assert len(out) == 7269
    assert bad == []
