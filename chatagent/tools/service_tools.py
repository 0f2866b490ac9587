"""Qwen-Agent's service tools: `image_gen` (an image model you configure) and `amap_weather` (AMap's weather API).

    ImageGen({'llm_cfg': {'model': 'wanx-v1', 'model_server': 'dashscope'}}).call({'prompt': 'a red fox'})
    AmapWeather().call({'location': '海淀区'})          # needs AMAP_TOKEN (or the 'token' setting)

`image_gen` asks the model of `llm_cfg` (required) with the prompt and returns its answer's content (an image item,
or the text of one). `amap_weather` looks the place up with AMap's district search (Qwen-Agent downloads a table of
city codes instead; nothing is downloaded here) and answers its live weather; `url` overrides AMap's address.
"""

from __future__ import annotations

import os
from typing import Any

from chatagent.llm import get_chat_model
from chatagent.schema import USER, ContentItem, Message
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.web_tools import service_json

__all__ = ["AmapWeather", "ImageGen"]

AMAP_URL = "https://restapi.amap.com/v3"


@register_tool("image_gen")
class ImageGen(BaseTool):
    """Generate an image from a text description with the image model of `llm_cfg`."""

    description = "An image generation service that takes text descriptions as input and returns a URL of the image."
    parameters = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "Detailed description of the desired image; keep the specific requirements of the "
                "original request (such as text in it) intact.",
            }
        },
        "required": ["prompt"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        llm_cfg = self.cfg.get("llm_cfg")
        if not llm_cfg:
            raise ValueError("image_gen needs 'llm_cfg': the image model to ask, e.g. {'model': 'wanx-v1', ...}")
        self.llm = get_chat_model(llm_cfg)

    def call(self, params: str | JSONObject, **kwargs: Any) -> str | list[ContentItem]:
        prompt = str(self.parse_params(params)["prompt"])
        reply = self.llm.chat([Message(USER, [ContentItem(text=prompt)])], stream=False)
        return reply[-1].content if reply else ""


@register_tool("amap_weather")
class AmapWeather(BaseTool):
    """The live weather of a city or district in China, from AMap."""

    description = "获取对应城市的天气数据 (the current weather of a city or district in China)"
    parameters = {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "城市/区具体名称，如`北京市海淀区`请描述为`海淀区`"}
        },
        "required": ["location"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.token = str(self.cfg.get("token") or os.environ.get("AMAP_TOKEN") or "")
        if not self.token:
            raise ValueError(
                "AMAP_TOKEN is not set: get a key at https://lbs.amap.com/api/webservice/guide/create-project/get-key "
                "and set it (export AMAP_TOKEN=...) or give it in the tool's 'token' setting"
            )
        self.url = str(self.cfg.get("url") or AMAP_URL).rstrip("/")

    def get_city_adcode(self, city_name: str) -> str:
        """AMap's code of a place (district search); ValueError when AMap knows no such place."""
        query = {"keywords": city_name, "subdistrict": 0, "key": self.token}
        data = service_json("GET", f"{self.url}/config/district", params=query)
        districts: list[Any] = data.get("districts") or []
        if data.get("status") == "0" or not districts:
            raise ValueError(f"location {city_name} not found")
        return str(districts[0]["adcode"])

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        location = str(self.parse_params(params)["location"])
        query = {"city": self.get_city_adcode(location), "key": self.token}
        data = service_json("GET", f"{self.url}/weather/weatherInfo", params=query)
        lives: list[Any] = data.get("lives") or []
        if data.get("status") == "0" or not lives:
            raise RuntimeError(f"AMap gave no weather for {location}: {data.get('info', 'no data')}")
        return f"{location}的天气是{lives[0]['weather']}温度是{lives[0]['temperature']}度。"
