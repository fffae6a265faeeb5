"""A check names every rule a stage breaks in one run, each in the form `<family> contract
(<page>): <rule>`, and counts them; a stage's error stops only the group of rules it broke."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from dict_store import DictStore, _make

import plm
import plm.testing
from plm.testing.rules import checking


class Words(plm.Tokenizer):
    name = "kit_words"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [t.lower().split() for t in texts]


class DedupWithASetIdentity(Words):
    """Breaks two tokenizer rules: repeats are dropped, and `identity` is not JSON."""

    name = "kit_two_rules"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [list(dict.fromkeys(tokens)) for tokens in super().tokenize(texts)]

    @property
    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "stopwords": {"the"}}


def test_a_tokenizer_breaking_two_rules_gets_both_named() -> None:
    with pytest.raises(AssertionError) as err:
        plm.testing.check_tokenizer(DedupWithASetIdentity())
    message = str(err.value)
    page = "tokenizers contract (docs/contracts/tokenizers.md): "
    assert page + "repeats are kept" in message
    assert page + "`identity` is JSON" in message
    assert message.endswith("(2 rules of the tokenizers contract broken)")


class ReversedAndUnfiltered(DictStore):
    name = "reversed_and_unfiltered"

    def chunk_ids(self) -> list[str]:
        return super().chunk_ids()[::-1]

    def filter_mask(self, filters: Any) -> Any:
        import numpy as np

        return np.ones(len(self.chunk_ids()), dtype=bool)


def test_a_store_breaking_two_rules_gets_both_named() -> None:
    with pytest.raises(AssertionError) as err:
        plm.testing.check_store(_make(ReversedAndUnfiltered))
    message = str(err.value)
    assert "stores contract (docs/contracts/stores.md): chunk_ids() lists chunks in index order" in message
    assert "stores contract (docs/contracts/stores.md): filter_mask(spec) is a boolean mask" in message


class GetChunksRaises(DictStore):
    name = "get_chunks_raises"

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, plm.Chunk]:
        raise RuntimeError("not written yet")

    def filter_mask(self, filters: Any) -> Any:
        import numpy as np

        return np.ones(len(self.chunk_ids()), dtype=bool)


def test_a_stage_error_stops_only_its_group_of_rules() -> None:
    with pytest.raises(AssertionError) as err:
        plm.testing.check_store(_make(GetChunksRaises))
    message = str(err.value)
    assert "reading what was written (stopped by RuntimeError: not written yet)" in message
    assert "filter_mask(spec) is a boolean mask" in message  # the rules after it were still judged
    assert isinstance(err.value.__cause__, RuntimeError)  # its traceback is kept


def test_a_rule_broken_in_a_loop_is_named_once_with_a_count() -> None:
    with pytest.raises(AssertionError) as err, checking("fusers") as rules:
        for n in range(3):
            rules.expect(False, "a rule", f"n={n}")
    assert str(err.value) == "fusers contract (docs/contracts/fusers.md): a rule\n  n=0\n  (and 2 more like it)"


def test_a_stage_error_alone_propagates_as_it_is() -> None:
    with pytest.raises(KeyError), checking("fusers"):
        raise KeyError("x")


def test_a_family_without_a_page_says_where_its_contract_is() -> None:
    with pytest.raises(AssertionError, match=r"^normalizers contract \(its base class's docstrings\): r$"):
        with checking("normalizers") as rules:
            rules.expect(False, "r")


def test_importing_plm_does_not_load_the_kit() -> None:
    code = "import sys, plm; assert 'plm.testing' not in sys.modules and 'numpy' not in sys.modules; plm.testing"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_kit_has_a_check_for_every_family_plm_plugins_lists() -> None:
    families = {r.family for r in plm.default_registry().all()}
    assert families >= {"stores", "chunkers", "enrichers", "executors", "retrieval"}
    for family in families:
        check = plm.testing.CHECKS.get(family, plm.testing.check_stage)  # a new family: the generic check
        assert callable(check) and check.__module__.startswith("plm.testing."), family
    from plm.testing.rules import PAGES

    assert set(plm.testing.CHECKS) == PAGES  # a family with a contract page has a check of its own


def test_the_same_error_in_several_groups_is_named_once_with_a_count() -> None:
    with pytest.raises(AssertionError) as err, checking("retrieval") as rules:
        for text in ("a", "b", "c"):
            with rules.part(f"retrieving {text!r}"):
                raise KeyError("no such chunk")
    assert str(err.value) == (
        "retrieval contract (docs/contracts/retrieval.md): retrieving 'a' (stopped by KeyError: 'no such chunk')"
        "\n  (and 2 more like it)"
    )
