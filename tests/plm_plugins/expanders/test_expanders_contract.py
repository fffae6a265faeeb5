"""Every built-in expander keeps the expanders contract (`plm.testing.check_expander`):
`embed_query` with a toy embedder, `llm_rewrite` against the fake chat API of
tests/support/fake_chat.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_chat import FakeChatAPI, serve
from plm_toys import bag_of_words

import plm
import plm.testing


def _expander(name: str, **config: object) -> plm.QueryExpander:
    return plm.default_registry().get(name, "expanders").cls(**config)


@pytest.fixture()
def api() -> Iterator[FakeChatAPI]:
    yield from serve()


@pytest.mark.parametrize("name", ["none", "dictionary", "language_route"])
def test_a_built_in_expander_keeps_the_contract(name: str) -> None:
    plm.testing.check_expander(_expander(name))


def test_dictionary_keeps_the_contract_when_a_trigger_fires() -> None:
    expander = _expander("dictionary", profile_if_fired="expanded")
    plm.testing.check_expander(expander, ["k8s pod restart", "pvc resize", "crashloopbackoff"])


def test_embed_query_keeps_the_contract() -> None:
    embedder = bag_of_words(["pod", "node", "memory", "restart"])()
    plm.testing.check_expander(_expander("embed_query", embedder=embedder))


def test_llm_rewrite_keeps_the_contract(api: FakeChatAPI) -> None:
    expander = _expander("llm_rewrite", base_url=api.url, model="tiny-chat", api_key_env="PLM_TEST_LLM_KEY")
    plm.testing.check_expander(expander)
