"""One language rule for prompts: kana -> Japanese, hangul -> Korean, Chinese characters alone -> Chinese."""

from __future__ import annotations

import pytest

from chatagent import Assistant, ReActChat, ScriptedLLM
from chatagent.schema import Message
from chatagent.schema.history import conversation_lang
from chatagent.utils.lang import detect_lang


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("What is the weather in Paris?", "en"),
        ("北京今天的天气怎么样？", "zh"),
        ("請問台北的天氣如何？", "zh"),  # traditional characters
        ("use 中文 please", "zh"),
        ("東京の天気はどうですか？", "ja"),
        ("この書類の要点を三行でまとめてください。", "ja"),
        ("東京都知事選挙の結果", "ja"),  # mostly kanji, one kana
        ("カタカナだけのテキスト", "ja"),
        ("서울 날씨는 어때요?", "ko"),
        ("大韓民國 헌법 제1조는 무엇입니까?", "ko"),  # hanja in Korean
        ("这个日语词“の”在中文网店的广告里很常见，它到底是什么意思，应该怎么读，为什么商家喜欢用它来代替“的”？", "zh"),
        ("", "en"),
        ("Привет, как дела?", "en"),  # no prompts in other languages: English
    ],
)
def test_detect_lang(text: str, lang: str) -> None:
    assert detect_lang(text) == lang


def test_the_latest_user_message_decides() -> None:
    msgs = [Message("user", "北京天气？"), Message("assistant", "晴"), Message("user", "大阪はどうですか？")]
    assert conversation_lang(msgs) == "ja"
    assert conversation_lang([Message("assistant", "你好")]) == "en"


def test_a_japanese_question_gets_the_english_knowledge_prompt_not_the_chinese(tmp_path) -> None:
    doc = tmp_path / "規則.txt"
    doc.write_text("社員食堂は午前十一時に開きます。", encoding="utf-8")
    llm = ScriptedLLM(["午前十一時です。"])
    Assistant(llm=llm, files=[str(doc)]).run_nonstream([{"role": "user", "content": "食堂は何時に開きますか？"}])
    prompt = "\n".join(m.text for m in llm.calls[0].messages)
    assert "社員食堂は午前十一時に開きます。" in prompt
    assert "我的文件中的摘录" not in prompt and "Excerpts from my files" in prompt  # not the Chinese prompt
    chinese = ScriptedLLM(["十一点。"])
    Assistant(llm=chinese, files=[str(doc)]).run_nonstream([{"role": "user", "content": "食堂几点开门？"}])
    assert "我的文件中的摘录" in "\n".join(m.text for m in chinese.calls[0].messages)


def test_a_japanese_conversation_gets_english_react_and_tool_prompts() -> None:
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    llm = ScriptedLLM(["Final Answer: 晴れです。"])
    ReActChat(function_list=[get_weather], llm=llm, transcript=False).run_nonstream(
        [{"role": "user", "content": "東京の天気は？"}]
    )
    prompt = llm.calls[0].messages[0].text
    assert "你可以使用以下工具" not in prompt and "get_weather" in prompt
