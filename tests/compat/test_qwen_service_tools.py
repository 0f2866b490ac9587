"""Qwen-Agent's service and web tools: clear errors without their key, real HTTP against loopback fakes with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatagent.agents import FnCallAgent
from chatagent.tools import (
    AmapWeather,
    ExtractDocVocabulary,
    ImageGen,
    ImageSearch,
    PythonExecutor,
    WebExtractor,
    WebSearch,
)
from chatagent.tools.simple_doc_parser import DocParserError
from chatagent.utils.url_fetch import public_urls_only
from tests.support.file_server import FileServer
from tests.support.json_service import JSONService, ServiceRequest
from tests.support.openai_server import OpenAIServer, Reply

PAGE = (
    "<html><head><title>Tide tables</title></head><body><h1>Tides</h1><p>High tide at 06:12 in Brest.</p></body></html>"
)


def test_web_extractor_reads_a_page_and_keeps_to_the_public_address_policy(tmp_path: Path) -> None:
    (tmp_path / "tides.html").write_text(PAGE)
    with FileServer(tmp_path) as server:
        assert "High tide at 06:12 in Brest." in WebExtractor().call({"url": server.url("tides.html")})
        with public_urls_only(), pytest.raises(DocParserError) as caught:  # as `chatagent serve` runs a request
            WebExtractor().call({"url": server.url("tides.html?again")})
        assert server.requests == 1  # the refused URL was never fetched
    assert caught.value.code == "broken" and "does not fetch for its clients" in str(caught.value.message)
    assert WebExtractor().call({"url": str(tmp_path / "tides.html")}).startswith("Error: web_extractor reads http(s)")


def test_web_search_needs_its_key_and_calls_serper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    with pytest.raises(ValueError, match="SERPER_API_KEY is not set"):
        WebSearch().call({"query": "tides"})
    organic = [{"title": "Tides of Brest", "snippet": "High tide 06:12", "date": "2026"}, {"title": "Moon"}]
    with JSONService() as service:
        service.route("POST", "/search", lambda request: {"organic": organic})
        monkeypatch.setenv("SERPER_API_KEY", "serper-key")
        found = WebSearch({"url": service.url("/search")}).call({"query": "tides brest"})
        assert found == '```\n[1]"Tides of Brest\nHigh tide 06:12"2026\n\n[2]"Moon\n"\n```'
        (request,) = service.requests
        assert request.json == {"q": "tides brest"} and request.headers["x-api-key"] == "serper-key"
        service.route("POST", "/search", lambda request: (500, {"error": "down"}))
        with pytest.raises(RuntimeError, match="HTTP 500"):
            WebSearch({"url": service.url("/search")}).call({"query": "tides"})


def test_an_agent_uses_web_search_configured_in_its_function_list(openai_server: OpenAIServer) -> None:
    with JSONService() as service:
        service.route("POST", "/search", lambda request: {"organic": [{"title": "Brest tides", "snippet": "06:12"}]})
        tool = {"name": "web_search", "api_key": "k", "url": service.url("/search")}
        openai_server.add(Reply(tool_calls=[("web_search", {"query": "brest tide"})]), "High tide is at 06:12.")
        llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
        *_, response = FnCallAgent(llm=llm, function_list=[tool]).run([{"role": "user", "content": "Tide?"}])
    assert "Brest tides" in response[1]["content"] and response[-1]["content"] == "High tide is at 06:12."
    sent = openai_server.requests[1].json["messages"][-1]["content"]
    assert "Brest tides" in sent


def test_image_search_needs_its_key_and_an_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPAPI_IMAGE_SEARCH_KEY", raising=False)
    image = [{"role": "user", "content": [{"image": "https://example.com/dog.jpg"}, {"text": "What breed?"}]}]
    assert ImageSearch().call({"img_idx": 0}, messages=[]) == "Error: no images found in the messages."
    with pytest.raises(ValueError, match="SERPAPI_IMAGE_SEARCH_KEY is not set"):
        ImageSearch().call({"img_idx": 0}, messages=image)
    results = {"image_results": [{"position": 1, "title": "Corgi", "original": "https://img.example/corgi.jpg",
                                  "snippet": "A corgi"}],
               "inline_images": [{"thumbnail": "https://img.example/corgi.jpg"}, {"title": "no url"}]}  # fmt: skip
    with JSONService() as service:
        service.route("GET", "/search.json", lambda request: results)
        found = ImageSearch({"api_key": "serp-key", "url": service.url("/search.json")}).call(
            {"img_idx": 3}, messages=image
        )
        (request,) = service.requests
    assert request.query["image_url"] == "https://example.com/dog.jpg" and request.query["api_key"] == "serp-key"
    assert isinstance(found, list) and [i.kind for i in found] == ["text", "image"]
    assert found[0].text == '[1] "https://img.example/corgi.jpg" Corgi\nA corgi'
    assert found[1].image == "https://img.example/corgi.jpg"


def test_image_gen_needs_a_model_and_asks_it(openai_server: OpenAIServer) -> None:
    with pytest.raises(ValueError, match="llm_cfg"):
        ImageGen()
    openai_server.add("https://images.example/fox.png")
    tool = ImageGen({"llm_cfg": {"model": "wanx", "model_server": openai_server.base_url, "api_key": "k"}})
    assert tool.call({"prompt": "a red fox in snow"}, messages=[]) == "https://images.example/fox.png"
    assert openai_server.requests[0].json["messages"][-1]["content"] == "a red fox in snow"


def test_amap_weather_needs_its_token_and_looks_the_place_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMAP_TOKEN", raising=False)
    with pytest.raises(ValueError, match="AMAP_TOKEN is not set"):
        AmapWeather()

    def district(request: ServiceRequest) -> dict[str, Any]:
        known = {"海淀区": "110108"}
        code = known.get(request.query["keywords"])
        return {"status": "1", "districts": [{"adcode": code, "name": request.query["keywords"]}] if code else []}

    with JSONService() as service:
        service.route("GET", "/v3/config/district", district)
        service.route("GET", "/v3/weather/weatherInfo", lambda r: {"status": "1", "lives": [
            {"adcode": r.query["city"], "weather": "晴", "temperature": "21"}]})  # fmt: skip
        monkeypatch.setenv("AMAP_TOKEN", "amap-key")
        tool = AmapWeather({"url": service.url("/v3")})
        assert tool.call({"location": "海淀区"}) == "海淀区的天气是晴温度是21度。"
        assert service.requests[1].query == {"city": "110108", "key": "amap-key"}
        with pytest.raises(ValueError, match="location 火星 not found"):
            tool.call({"location": "火星"})


def test_python_executor_answers_result_and_report() -> None:
    executor = PythonExecutor({"timeout_length": 10})
    try:
        assert executor.call({"code": "print(6 * 7)"}) == ("42", "Done")
        assert executor.call("```python\nx = 1 / 0\n```") == ("", "ZeroDivisionError: division by zero")
        assert executor.call({"code": "  "}) == ("", "")
        assert executor.call({"code": "print('a' * 300)"})[0] == "a" * 128 + "..." + "a" * 128
        assert executor.call({"code": "y = 5"}) == ("", "Done")  # a fresh process each call: nothing is kept
        assert executor.call({"code": "print(y)"})[1] == "NameError: name 'y' is not defined"
        by_expr = PythonExecutor({"get_answer_from_stdout": False, "get_answer_expr": "total * 2"})
        assert by_expr.call({"code": "total = sum(range(5))"}) == ("20", "Done")
        by_last_line = PythonExecutor({"get_answer_from_stdout": False})
        assert by_last_line.call({"code": "a = 3\na ** 2"}) == ("9", "Done")
        slow = PythonExecutor({"timeout_length": 1})
        assert slow.call({"code": "while True: pass"}) == ("", "Timeout Error")
    finally:
        executor.close()


def test_extract_doc_vocabulary_ranks_the_characteristic_words(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("The lighthouse keeper kept the lighthouse lamp burning. The keeper slept little.")
    (tmp_path / "b.txt").write_text("The harbour master counted the boats. The boats left the harbour at dawn.")
    words = ExtractDocVocabulary().call({"files": [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]}).split(", ")
    assert set(words[:4]) == {"lighthous", "keeper", "harbour", "boat"}
    assert "the" not in words
    asked = ExtractDocVocabulary().call({"files": ["a.txt"]}, messages=[{"role": "user", "content": "hi"}])
    assert asked.startswith("The user has not given any files")
