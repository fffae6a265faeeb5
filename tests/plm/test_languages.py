"""`plm.languages`: a text's language from its scripts (CJK) or py3langid (the rest), a
default where detection is not sure, and a document's own `lang` winning over detection."""

from __future__ import annotations

import pytest
from plm_needs import needs

from plm.languages import WORD_UNIT, detect, document_language, no_space_chars

pytestmark = needs("py3langid", extra="languages")

TEXTS = {
    "zh": "持久卷是集群中的一块存储，可以由管理员事先制备，或者使用存储类来动态制备。",
    "ja": "パスパラメータは、Python のフォーマット文字列と同じ構文で宣言できます。",
    "ko": "경로 매개변수는 파이썬의 포맷 문자열과 같은 문법으로 선언할 수 있습니다.",
    "de": "Eine Netzwerkrichtlinie legt fest, wie Gruppen von Pods miteinander kommunizieren dürfen.",
    "ru": "Сетевая политика определяет, как группы подов могут взаимодействовать друг с другом.",
    "fr": "Une politique réseau précise comment des groupes de pods peuvent communiquer entre eux.",
    "es": "Una política de red especifica cómo los grupos de pods pueden comunicarse entre sí.",
    "en": "A network policy specifies how groups of pods are allowed to communicate with each other.",
}


@pytest.mark.parametrize("code", sorted(TEXTS))
def test_a_sentence_is_detected_in_its_language(code: str) -> None:
    assert detect(TEXTS[code]) == code


def test_code_and_english_terms_do_not_hide_a_chinese_page() -> None:
    page = (
        "# 跨域资源共享\n\n```python\nfrom fastapi.middleware.cors import CORSMiddleware\n"
        "app.add_middleware(CORSMiddleware, allow_origins=origins)\n```\n\n"
        "你可以在 FastAPI 应用中使用 CORSMiddleware 来配置跨域资源共享。"
    )
    assert detect(page) == "zh"


def test_a_query_too_short_to_tell_gets_the_default() -> None:
    assert detect("path parameters", default="en") == "en"
    assert detect("12345 --", default="en") == "en"
    assert detect("", default=None) is None


def test_a_documents_own_lang_wins_over_detection() -> None:
    assert document_language(TEXTS["en"], {"lang": "zh-CN"}, "auto") == "zh"
    assert document_language(TEXTS["en"], {"language": "pt_BR"}, "auto") == "pt"
    assert document_language(TEXTS["de"], {}, "auto") == "de"
    assert document_language(TEXTS["de"], {}, "none") is None
    assert document_language(TEXTS["de"], {}, "fr") == "fr"


def test_each_character_of_a_script_without_spaces_is_a_word() -> None:
    assert no_space_chars("持久卷 volume") == 3
    assert WORD_UNIT.findall("持久卷 is a volume") == ["持", "久", "卷", "is", "a", "volume"]
    assert WORD_UNIT.findall("API的用法") == ["API", "的", "用", "法"]
