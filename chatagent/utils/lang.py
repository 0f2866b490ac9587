"""The language of a conversation, for choosing prompts: one rule for the whole package.

    detect_lang("東京の天気は？")  -> 'ja'      detect_lang("北京天气怎么样？") -> 'zh'
    detect_lang("서울 날씨는?")    -> 'ko'      detect_lang("Weather in Paris?") -> 'en'

Kana make a text Japanese and hangul Korean (Japanese and Korean may use Chinese characters too); Chinese
characters without either make it Chinese; anything else is 'en'. Prompts exist in 'en' and 'zh': an agent
uses English for a language it has no prompt in.
"""

from __future__ import annotations

import re

#: The characters written without spaces between words (kana, CJK ideographs, hangul), as a regex class body:
#: what token counting (`chatagent.utils.tokens`) and search (`chatagent.rag.analysis`) split into runs.
CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_KANA = re.compile(r"[\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_KANA_SHARE = 0.05  # a Chinese text quoting a Japanese word stays Chinese


def detect_lang(text: str) -> str:
    """'zh', 'ja', 'ko', or 'en' (any other language) for `text`."""
    han = len(_HAN.findall(text))
    kana = len(_KANA.findall(text))
    if kana and kana >= _KANA_SHARE * (han + kana):
        return "ja"
    hangul = len(_HANGUL.findall(text))
    if hangul and hangul >= han:
        return "ko"
    return "zh" if han else "en"
