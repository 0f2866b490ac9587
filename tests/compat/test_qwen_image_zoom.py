"""Qwen-Agent's image_zoom_in_tool (ImageZoomInToolQwen3VL): the crop a Qwen3-VL model asks for, from a real image."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from chatagent.agents import FnCallAgent
from chatagent.tools import ImageZoomInToolQwen3VL
from chatagent.tools.image_zoom_in import grown_box, smart_resize
from tests.support.file_server import FileServer
from tests.support.openai_server import OpenAIServer, Reply


def _picture(path: Path) -> None:
    """800x600 white, with a red square at (400..480, 300..360)."""
    image = Image.new("RGB", (800, 600), "white")
    image.paste((255, 0, 0), (400, 300, 480, 360))
    image.save(path)


def test_the_region_is_cropped_and_enlarged(tmp_path: Path) -> None:
    picture = tmp_path / "scene.png"
    _picture(picture)
    tool = ImageZoomInToolQwen3VL({"work_dir": str(tmp_path / "work")})
    messages = [{"role": "user", "content": [{"image": str(picture)}, {"text": "What is red?"}]}]
    (item,) = tool.call({"bbox_2d": [500, 500, 600, 600], "label": "square", "img_idx": 0}, messages=messages)
    assert item.image and Path(item.image).parent == tmp_path / "work"
    with Image.open(item.image) as crop:
        width, height = crop.size
        assert width % 32 == 0 and height % 32 == 0 and width * height >= 256 * 32 * 32
        assert crop.convert("RGB").getpixel((width // 2, height // 2)) == (255, 0, 0)
    (bad,) = tool.call({"bbox_2d": [0, 0, 10, 10], "label": "x", "img_idx": 3}, messages=messages)
    assert bad.text == "Error: there is no image 3; the conversation has 1."


def test_an_image_at_a_url_and_the_geometry_helpers(tmp_path: Path) -> None:
    _picture(tmp_path / "scene.png")
    with FileServer(tmp_path) as server:
        messages = [{"role": "user", "content": [{"image": server.url("scene.png")}]}]
        tool = ImageZoomInToolQwen3VL({"work_dir": str(tmp_path / "work")})
        (item,) = tool.call({"bbox_2d": [0, 0, 1000, 1000], "label": "all", "img_idx": 0}, messages=messages)
    with Image.open(str(item.image)) as whole:
        assert whole.size == (800, 608)
    assert grown_box(100, 100, 110, 105, 800, 600) == [
        73,
        86,
        137,
        119,
    ]  # the short side grown to 32 pixels, the box kept in shape
    assert smart_resize(10, 10) == (512, 512)


def test_a_vision_agent_sees_the_zoomed_region(tmp_path: Path, openai_server: OpenAIServer) -> None:
    picture = tmp_path / "scene.png"
    _picture(picture)
    openai_server.add(
        Reply(tool_calls=[("image_zoom_in_tool", {"bbox_2d": [500, 500, 600, 600], "label": "red", "img_idx": 0})]),
        "A red square.",
    )
    llm = {"model": "qwen3-vl-plus", "model_type": "qwenvl_oai", "model_server": openai_server.base_url, "api_key": "k"}
    tool = {"name": "image_zoom_in_tool", "work_dir": str(tmp_path / "work")}
    messages = [{"role": "user", "content": [{"image": str(picture)}, {"text": "What is the red thing?"}]}]
    *_, response = FnCallAgent(llm=llm, function_list=[tool]).run(messages)
    assert response[-1]["content"] == "A red square."
    sent = [m for m in openai_server.requests[1].json["messages"] if m["role"] == "tool"][0]["content"]
    assert any(p["type"] == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,") for p in sent)
