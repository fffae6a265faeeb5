"""`language_route`: a query the dense model cannot read gets the fuser's other profile, and
in a hybrid recipe it is ranked as BM25 alone ranks it."""

from __future__ import annotations

import pytest
from plm_needs import needs

from plm import Query
from plm_plugins.expanders.language_route import LanguageRouteExpander

pytestmark = needs("py3langid", extra="languages")


@pytest.mark.parametrize(
    ("text", "profile"),
    [("How do I declare a path parameter with a type?", ""), ("path parameters", ""),
     ("如何声明带类型的路径参数？", "other_language"),
     ("Wie deklariere ich einen Pfadparameter mit Typ?", "other_language"),
     ("Как объявить параметр пути с типом?", "other_language")],
)  # fmt: skip
def test_a_query_outside_the_models_languages_gets_the_other_profile(text: str, profile: str) -> None:
    out = LanguageRouteExpander().run(Query(text=text, k=3))
    assert (out.text, out.profile, out.k) == (text, profile, 3)


def test_the_served_languages_and_the_profile_are_the_configs() -> None:
    expander = LanguageRouteExpander(languages=["en", "de"], profile="bm25_only")
    assert expander.run(Query(text="Wie deklariere ich einen Pfadparameter mit Typ?")).profile == ""
    assert expander.run(Query(text="如何声明带类型的路径参数？")).profile == "bm25_only"
