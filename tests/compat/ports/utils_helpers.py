"""What Qwen-Agent user code imports from `qwen_agent.utils.utils`, `qwen_agent.llm` and `qwen_agent.llm.schema`
(custom tools and agents in its examples use these): the helpers with Qwen-Agent's results, ModelServiceError in
its forms, and the schema's constants with their values. Also asks the model once through the helpers' config."""

import logging
import os
import tempfile

from chatagent.llm import ModelServiceError, get_chat_model
from chatagent.llm.base import ModelServiceError as BaseModelServiceError
from chatagent.schema import (
    ASSISTANT,
    AUDIO,
    CONTENT,
    DEFAULT_SYSTEM_MESSAGE,
    FILE,
    FUNCTION,
    IMAGE,
    NAME,
    REASONING_CONTENT,
    ROLE,
    SYSTEM,
    USER,
    VIDEO,
    ContentItem,
    Message,
)
from chatagent.utils.utils import (
    extract_code,
    extract_files_from_messages,
    extract_markdown_urls,
    extract_urls,
    get_basename_from_url,
    get_file_type,
    get_last_usr_msg_idx,
    has_chinese_chars,
    has_chinese_messages,
    is_http_url,
    is_image,
    json_dumps_compact,
    json_loads,
    merge_generate_cfgs,
    print_traceback,
)

SOURCE = "qwen_agent/utils/utils.py and qwen_agent/llm/schema.py, as user code imports them"
MODEL = [{"say": "Short answer."}]


def main(server: str, resources: str) -> None:
    assert (ROLE, CONTENT, NAME, REASONING_CONTENT) == ("role", "content", "name", "reasoning_content")
    assert (SYSTEM, USER, ASSISTANT, FUNCTION) == ("system", "user", "assistant", "function")
    assert (FILE, IMAGE, AUDIO, VIDEO) == ("file", "image", "audio", "video")
    assert DEFAULT_SYSTEM_MESSAGE == ""

    assert merge_generate_cfgs({"stop": ["a"], "top_p": 0.8}, {"stop": ["a", "b"], "seed": 1}) == {
        "stop": ["a", "b"], "top_p": 0.8, "seed": 1,
    }  # fmt: skip
    assert merge_generate_cfgs(None, None) == {}
    assert extract_code("Here:\n```python\nprint(1)\n```\ndone") == "print(1)\n"
    assert extract_code('{"code": "x = 2"}') == "x = 2"
    assert extract_code("just text") == "just text"
    assert json_loads('```json\n{"a": 1}\n```') == {"a": 1}
    assert json_loads("{'a': 1,}") == {"a": 1}  # json5
    try:
        json_loads("{not json")
    except ValueError:
        pass
    else:
        raise AssertionError("json_loads of bad JSON must raise")

    assert get_file_type(os.path.join(resources, "report.pdf")) == "pdf"
    assert get_file_type("https://example.com/a/data.xlsx") == "xlsx"
    with tempfile.TemporaryDirectory() as d:
        page, note = os.path.join(d, "page.htm"), os.path.join(d, "note.md")
        with open(page, "w") as f:
            f.write("<html><p>hello</p></html>")
        with open(note, "w") as f:
            f.write("# hello")
        assert (get_file_type(page), get_file_type(note)) == ("html", "txt")
    assert get_basename_from_url("https://example.com/docs/a%20b.pdf?x=1") == "a b.pdf"
    assert is_http_url("https://x.org") and not is_http_url("/tmp/x")
    assert is_image("cat.PNG") and not is_image("cat.pdf")
    assert extract_urls("see https://a.org/x and http://b.org") == ["https://a.org/x", "http://b.org"]
    assert extract_markdown_urls("![c](cat.png) and [d](https://d.org)") == ["cat.png", "https://d.org"]
    assert has_chinese_chars("天气") and not has_chinese_chars("weather")
    msgs = [Message(SYSTEM, "你好"), Message(USER, [ContentItem(text="hi"), ContentItem(file="a.pdf")])]
    assert has_chinese_messages(msgs) and not has_chinese_messages(msgs[1:])
    assert extract_files_from_messages(msgs, include_images=False) == ["a.pdf"]
    assert get_last_usr_msg_idx(msgs + [Message(ASSISTANT, "x")]) == 1
    assert json_dumps_compact({"m": Message(USER, "é")}) == '{"m": {"role": "user", "content": "é"}}'

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    try:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            print_traceback(is_error=False)
    finally:
        logging.getLogger().removeHandler(handler)
    assert any("RuntimeError: boom" in r.getMessage() and r.levelno == logging.WARNING for r in records)

    assert BaseModelServiceError is ModelServiceError
    e = ModelServiceError(code="400", message="bad request")
    assert (e.code, e.message, e.exception) == ("400", "bad request", None)
    cause = ConnectionError("refused")
    assert ModelServiceError(exception=cause).exception is cause

    llm = get_chat_model({"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    cfg = merge_generate_cfgs(llm.generate_cfg, {"max_tokens": 50})
    reply = llm.chat([{"role": "user", "content": "Answer briefly."}], stream=False, extra_generate_cfg=cfg)
    assert reply[-1]["content"] == "Short answer."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
