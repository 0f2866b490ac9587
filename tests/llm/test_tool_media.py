"""Images a tool returns reach a vision model as images, and audio/video items reach omni servers as media, as
Qwen-Agent's `qwenvl_oai` and `qwenvl_dashscope` send them: on the OpenAI-compatible and DashScope wire formats."""

from __future__ import annotations

import base64
import io
import wave
from pathlib import Path
from typing import Any

from chatagent.agents import FnCallAgent
from chatagent.schema import ContentItem
from chatagent.tools.base import BaseTool
from tests.support.dashscope_server import DashScopeServer
from tests.support.dashscope_server import Reply as DashReply
from tests.support.openai_server import OpenAIServer, Reply

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class ChartTool(BaseTool):
    """Draws a chart, as a code interpreter does: text and an image file."""

    name = "draw_chart"
    description = "Draw the sales chart."
    parameters = {"type": "object", "properties": {}, "required": []}

    def __init__(self, image: Path) -> None:
        super().__init__()
        self.image = image

    def call(self, params: str | dict, **kwargs: Any) -> list[ContentItem]:
        return [ContentItem(text="Here is the chart."), ContentItem(image=str(self.image))]


def _tool_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if m["role"] == "tool")


def test_a_tools_image_reaches_an_openai_compatible_vision_model(tmp_path: Path, openai_server: OpenAIServer) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    openai_server.add(Reply(tool_calls=[("draw_chart", {})]), "The bars rise.")
    llm = {"model": "qwen-vl-max", "model_type": "qwenvl_oai", "model_server": openai_server.base_url, "api_key": "k"}
    bot = FnCallAgent(llm=llm, function_list=[ChartTool(chart)])
    *_, response = bot.run([{"role": "user", "content": "Chart the sales."}])
    assert response[-1]["content"] == "The bars rise."
    content = _tool_message(openai_server.requests[1].json["messages"])["content"]
    assert isinstance(content, list)
    assert "Here is the chart." in content[0]["text"]
    image = next(p for p in content if p["type"] == "image_url")
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_a_text_model_gets_a_placeholder_for_the_tools_image(tmp_path: Path, openai_server: OpenAIServer) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    openai_server.add(Reply(tool_calls=[("draw_chart", {})]), "ok")
    llm = {"model": "qwen-plus", "model_server": openai_server.base_url, "api_key": "k"}
    *_, _response = FnCallAgent(llm=llm, function_list=[ChartTool(chart)]).run([{"role": "user", "content": "?"}])
    content = _tool_message(openai_server.requests[1].json["messages"])["content"]
    assert isinstance(content, str) and "Here is the chart." in content and "[image: chart.png]" in content


def test_audio_and_video_reach_an_omni_server_as_media(tmp_path: Path, openai_server: OpenAIServer) -> None:
    clip = tmp_path / "hello.wav"
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    clip.write_bytes(buffer.getvalue())
    openai_server.add("A greeting and a cat video.")
    llm = {"model": "qwen2.5-omni-7b", "model_type": "qwenomni_oai", "model_server": openai_server.base_url,
           "api_key": "k"}  # fmt: skip
    content = [{"audio": str(clip)}, {"video": "https://example.com/cat.mp4"}, {"text": "What are these?"}]
    *_, response = FnCallAgent(llm=llm).run([{"role": "user", "content": content}])
    assert response[-1]["content"] == "A greeting and a cat video."
    sent = openai_server.requests[0].json["messages"][-1]["content"]
    audio = sent[0]["input_audio"]
    assert sent[0]["type"] == "input_audio" and audio["format"] == "wav"
    mime, _, data = audio["data"].partition(";base64,")
    assert mime in ("data:audio/wav", "data:audio/x-wav") and base64.b64decode(data) == buffer.getvalue()
    assert sent[1] == {"type": "video_url", "video_url": {"url": "https://example.com/cat.mp4"}}


def test_a_tools_image_reaches_a_dashscope_vision_model(tmp_path: Path, dashscope_server: DashScopeServer) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(PNG)
    dashscope_server.add(DashReply(tool_calls=[("draw_chart", {})]), DashReply(text="The bars rise."))
    llm = {"model": "qwen-vl-max", "model_type": "qwenvl_dashscope", "api_key": "k",
           "base_url": dashscope_server.base_url}  # fmt: skip
    *_, response = FnCallAgent(llm=llm, function_list=[ChartTool(chart)]).run([{"role": "user", "content": "Chart?"}])
    assert response[-1]["content"] == "The bars rise."
    tool = _tool_message(dashscope_server.generation_requests[1].messages)
    (key,) = dashscope_server.uploads
    assert dashscope_server.uploads[key] == PNG
    assert {"image": f"oss://{key}"} in tool["content"]
    assert any("Here is the chart." in item.get("text", "") for item in tool["content"])


def test_openais_own_api_gets_a_tools_images_in_a_user_message_after_the_results() -> None:
    from chatagent.llm.openai.request import chat_request
    from chatagent.llm.settings import ToolChoice
    from chatagent.schema import FunctionCall, Message

    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    msgs = [
        Message("user", "Chart both."),
        Message("assistant", "", function_call=FunctionCall("draw_chart", "{}"), extra={"function_id": "a"}),
        Message("assistant", "", function_call=FunctionCall("draw_chart", "{}"), extra={"function_id": "b"}),
        Message(
            "function", [ContentItem(text="one"), ContentItem(image=url)], name="draw_chart", extra={"function_id": "a"}
        ),
        Message(
            "function", [ContentItem(text="two"), ContentItem(image=url)], name="draw_chart", extra={"function_id": "b"}
        ),
        Message("assistant", "Both drawn."),
    ]
    sent = chat_request("gpt-4o", "https://api.openai.com/v1", msgs, None, {}, ToolChoice(), False).body
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert [m["content"] for m in sent["messages"][2:4]] == ["one", "two"]
    assert [p["type"] for p in sent["messages"][4]["content"]] == ["text", "image_url", "image_url"]
    elsewhere = chat_request("qwen-vl", "http://127.0.0.1:8000/v1", msgs, None, {}, ToolChoice(), False).body
    assert [m["role"] for m in elsewhere["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
    assert elsewhere["messages"][2]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
