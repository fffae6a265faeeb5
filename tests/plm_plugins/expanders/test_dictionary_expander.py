from __future__ import annotations

import json
from pathlib import Path

import pytest

from plm_core.errors import ConfigError
from plm_core.records import ExpandedQuery, Query
from plm_plugins.expanders.dictionary import DictionaryExpander, expand, load_dictionary
from plm_plugins.expanders.none import IdentityExpander


def _run(text: str, **config: object) -> ExpandedQuery:
    return DictionaryExpander(**config).run(Query(text=text, k=7, id="q1"))


def test_default_table_is_the_poc_table_in_order() -> None:
    table = load_dictionary()
    assert list(table)[:3] == ["rpo", "recovery point objective", "rto"]
    assert len(table) == 14
    assert table["autoscaler"] == "horizontal pod autoscaler HPA scaling replicas CPU"


def test_purpose_fires_rpo_substring_quirk() -> None:
    # POC reference informed q_007_q1: "purpose" contains "rpo".
    q = _run("What is the purpose of using an Indexed Job in Kubernetes?")
    assert q.fired == ("rpo",)
    assert q.text == (
        "What is the purpose of using an Indexed Job in Kubernetes? RPO backup data loss objective point recovery"
    )
    assert q.original == "What is the purpose of using an Indexed Job in Kubernetes?"
    assert (q.k, q.id, q.expanded) == (7, "q1", True)


def test_words_already_in_query_are_dropped_and_rest_sorted() -> None:
    # POC reference informed q_015_q1: "authentication" and "token" are already there.
    q = _run("What is the role of the webhook token authenticator in the authentication process?")
    assert q.fired == ("token",)
    assert q.text.endswith("process? JWT claims exp expiration iat issued")


def test_union_of_several_triggers_is_deduplicated() -> None:
    # Both triggers fire and share most of their words.
    q = _run("Explain RPO and the recovery point objective")
    assert q.fired == ("rpo", "recovery point objective")
    # union: recovery point objective RPO data loss backup disaster; minus query words
    # (explain rpo and the recovery point objective); "RPO" stays: compared case-sensitively.
    assert q.text == "Explain RPO and the recovery point objective RPO backup data disaster loss"


def test_realistic_queries_from_reference() -> None:
    q = _run("is there a way to increase storage size for my database without losing data")
    assert q.fired == ("database",)
    assert q.text.endswith("losing data Kafka PostgreSQL Redis layer")
    q = _run("why can't I see my application's logs and traces in the monitoring dashboard")
    assert q.fired == ("monitoring",)
    assert q.text.endswith("dashboard Grafana Jaeger Prometheus metrics observability tracing")
    q = _run("why can't my CI/CD pipeline authenticate with kubernetes cluster after rotating service account tokens")
    assert q.fired == ("token",)
    assert q.text.endswith("tokens JWT authentication claims exp expiration iat issued token")


def test_stack_triggers_fire_with_their_prefixes() -> None:
    q = _run("Which database stack and monitoring stack do we run?")
    assert q.fired == ("database stack", "database", "monitoring stack", "monitoring")
    assert q.text == (
        "Which database stack and monitoring stack do we run? Grafana Jaeger Kafka PostgreSQL Prometheus "
        "Redis data layer metrics observability storage tracing"
    )


def test_no_trigger_leaves_query_unchanged() -> None:
    q = _run("My pod keeps getting rejected with a topology affinity error, what's going on?")
    assert q.fired == () and not q.expanded
    assert q.text == q.original == "My pod keeps getting rejected with a topology affinity error, what's going on?"


def test_custom_dictionary_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "d.toml"
    toml.write_text('"K8S" = "kubernetes cluster"\n"pvc" = "persistent volume claim"\n')
    q = _run("Resize a PVC on k8s", dictionary=str(toml))
    assert q.fired == ("k8s", "pvc")
    assert q.text == "Resize a PVC on k8s claim cluster kubernetes persistent volume"
    js = tmp_path / "d.json"
    js.write_text(json.dumps({"hpa": "autoscaler"}))
    assert _run("hpa limits", dictionary=str(js)).text == "hpa limits autoscaler"


def test_bad_dictionary_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        _run("x", dictionary=str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("rpo = 3\n")
    with pytest.raises(ConfigError, match="'rpo' maps to 3"):
        _run("x", dictionary=str(bad))


def test_expand_function_and_identity_expander() -> None:
    assert expand("nothing here", {"rpo": "a b"}) == ("nothing here", ())
    assert expand("rpo a", {"rpo": "a"}) == ("rpo a", ("rpo",))
    q = IdentityExpander().run(Query(text="What is RPO?", k=3))
    assert (q.text, q.original, q.fired, q.k) == ("What is RPO?", "What is RPO?", (), 3)
