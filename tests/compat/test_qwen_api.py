"""Qwen-Agent's public API on chatagent, piece by piece: tools get JSON strings, unknown arguments are errors,
framework keys are never sent, Qwen's model types and config spellings, dicts in give dicts out from the LLM,
the registry, typewriter_print, the GroupChat arguments, WebUI.run's arguments."""

from __future__ import annotations

import json
import sys

import pytest

from chatagent import ScriptedLLM, tool, tool_call
from chatagent.agents import Assistant, FnCallAgent, GroupChat, ReActChat, Router
from chatagent.llm import get_chat_model
from chatagent.schema import Message
from chatagent.tools.base import BaseTool, ToolServiceError, register_tool
from tests.support import processes
from tests.support.openai_server import Reply as ServerReply

USER = [{"role": "user", "content": "hi"}]


def oai(server, **cfg):
    return get_chat_model({"model": "m", "model_server": server.base_url, "api_key": "k", **cfg})


# ---- tools ---------------------------------------------------------------------------------------------------


class Recorder(BaseTool):
    name = "lookup"
    description = "Look up a city."
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    }

    def __init__(self, cfg=None):
        super().__init__(cfg)
        self.got = []

    def call(self, params, **kwargs):
        self.got.append(params)
        return "ok"


def test_a_tool_gets_the_models_arguments_as_a_json_string_repaired_and_validated():
    rec = Recorder()
    llm = ScriptedLLM([tool_call("lookup", "{'city': 'Paris', 'days': '3',}"), "done"])  # json5, a number as text
    FnCallAgent(llm=llm, function_list=[rec]).run_nonstream(USER)
    assert rec.got == ['{"city": "Paris", "days": 3}']
    assert isinstance(rec.got[0], str)


def test_typed_functions_keep_typed_arguments():
    seen = []

    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        seen.append((a, b))
        return a + b

    llm = ScriptedLLM([tool_call("add", '{"a": "2"}'), "3"])
    out = FnCallAgent(llm=llm, function_list=[add]).run_nonstream(USER)
    assert seen == [(2, 1)] and out[1]["content"] == "3"


def test_call_tool_from_a_custom_agent_passes_the_string():
    rec = Recorder()
    agent = FnCallAgent(llm=ScriptedLLM([]), function_list=[rec])
    assert agent._call_tool("lookup", '{"city": "Oslo"}') == "ok"
    assert rec.got == ['{"city": "Oslo"}']
    assert agent._detect_tool(Message("assistant", "", function_call={"name": "x", "arguments": "{}"})) == (
        True,
        "x",
        "{}",
        "",
    )


def test_verify_json_format_args_raises_value_error_and_allow_overwrite_registers_again():
    with pytest.raises(ValueError, match="city"):
        Recorder()._verify_json_format_args("{}")
    with pytest.raises(ValueError, match="not valid JSON"):
        Recorder()._verify_json_format_args("{'city': 'x'}", strict_json=True)
    assert Recorder()._verify_json_format_args("{'city': 'x'}") == {"city": "x"}

    @register_tool("compat_twice", allow_overwrite=True)
    class First(Recorder):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_tool("compat_twice")(Recorder)

    @register_tool("compat_twice", allow_overwrite=True)
    class Second(Recorder):
        pass

    from chatagent.tools import TOOL_REGISTRY

    assert TOOL_REGISTRY["compat_twice"] is Second


def test_the_registry_resolves_lazy_builtins_on_access():
    """Issue 16.8: TOOL_REGISTRY['code_interpreter'] was the string of a lazy entry, not a class."""
    code = (
        "from chatagent.tools import TOOL_REGISTRY, BaseTool\n"
        "cls = TOOL_REGISTRY['code_interpreter']\n"
        "assert isinstance(cls, type) and issubclass(cls, BaseTool), cls\n"
        "assert cls({'timeout': 5}).name == 'code_interpreter'\n"
        "assert all(isinstance(v, type) for v in TOOL_REGISTRY.values())\n"
        "assert isinstance(TOOL_REGISTRY.get('retrieval'), type) and TOOL_REGISTRY.get('nope') is None\n"
        "assert all(isinstance(v, type) for _, v in TOOL_REGISTRY.items())\n"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_tool_service_error_ends_the_run_as_in_qwen_agent():
    class Down(BaseTool):
        name = "down"

        def call(self, params, **kwargs):
            raise ToolServiceError(code="503", message="the weather service is down")

    llm = ScriptedLLM([tool_call("down", {})])
    with pytest.raises(ToolServiceError, match="weather service is down"):
        FnCallAgent(llm=llm, function_list=[Down()]).run_nonstream(USER)


# ---- unknown arguments ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "bad", "hint"),
    [
        (lambda: Assistant(llm=ScriptedLLM([]), fles=["a.pdf"]), "fles", "files"),
        (lambda: FnCallAgent(llm=ScriptedLLM([]), max_llm_call=3), "max_llm_call", "max_llm_calls"),
        (lambda: ReActChat(llm=ScriptedLLM([]), transcrpt=True), "transcrpt", "transcript"),
        (lambda: GroupChat([], agent_selection_metod="round_robin"), "agent_selection_metod", "agent_selection_method"),
        (lambda: Router([], lllm={}), "lllm", "llm"),
    ],
)
def test_unknown_keyword_arguments_raise_with_a_hint(make, bad, hint):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{bad}'; did you mean '{hint}'"):
        make()


def test_unknown_model_config_keys_raise_and_qwen_spellings_are_known():
    with pytest.raises(TypeError, match="'model_sever'; did you mean 'model_server'"):
        get_chat_model({"model": "m", "model_sever": "http://127.0.0.1:1/v1"})
    with pytest.raises(TypeError, match="replys"):
        get_chat_model({"model_type": "scripted", "replys": ["x"]})
    assert get_chat_model({"model": "m", "api_base": "http://127.0.0.1:9/v1"}).base_url == "http://127.0.0.1:9/v1"


def test_a_router_refuses_tools_instead_of_ignoring_them():
    with pytest.raises(TypeError, match="function_list"):
        Router([FnCallAgent(llm=ScriptedLLM([]), name="a")], function_list=["code_interpreter"])


# ---- the LLM layer -------------------------------------------------------------------------------------------


def test_qwen_generate_cfg_keys_are_consumed_not_sent(openai_server):
    openai_server.add("hello")
    cfg = {"thought_in_content": False, "use_raw_api": True, "lang": "zh", "cache_dir": None, "top_p": 0.8}
    llm = oai(openai_server, generate_cfg=cfg)
    assert llm.chat(USER, stream=False)[0]["content"] == "hello"
    body = openai_server.requests[0].json
    assert body["top_p"] == 0.8
    sent = set(body) | set(body.get("extra_body") or {})
    assert not sent & {"thought_in_content", "use_raw_api", "lang", "cache_dir"}


def test_use_raw_api_false_asks_in_the_nous_prompt_and_true_natively(openai_server):
    fn = [{"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    openai_server.add('<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    reply = oai(openai_server, generate_cfg={"use_raw_api": False}).chat(USER, fn, stream=False)
    assert reply[-1]["function_call"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    assert "tools" not in openai_server.requests[0].json
    assert "<tools>" in openai_server.requests[0].json["messages"][0]["content"]
    openai_server.add(ServerReply(tool_calls=[("weather", {"city": "Oslo"})]))
    cfg = {"use_raw_api": "True", "fncall_prompt_type": "nous"}  # a string, as Qwen-Agent's docs write it
    reply = oai(openai_server, generate_cfg=cfg).chat(USER, fn, stream=False)
    assert reply[-1]["function_call"]["name"] == "weather" and openai_server.requests[1].json["tools"]


def test_thought_in_content_moves_think_tags_to_reasoning(openai_server):
    openai_server.add(ServerReply(text="<think>Step 1, step 2.</think>The answer is 4.", chunk_size=3))
    out = list(oai(openai_server, generate_cfg={"thought_in_content": True}).chat(USER))[-1]
    assert out == [{"role": "assistant", "content": "The answer is 4.", "reasoning_content": "Step 1, step 2."}]


def test_dicts_in_give_dicts_out_and_messages_give_messages(openai_server):
    openai_server.add("a b c", "a b c", "a b c", "a b c")
    llm = oai(openai_server)
    last = list(llm.chat(USER))[-1]
    assert json.dumps(last) and last == [{"role": "assistant", "content": "a b c"}]
    assert llm.chat(USER, stream=False) == last
    deltas = list(llm.chat(USER, delta_stream=True))
    assert all(isinstance(d, dict) for ds in deltas for d in ds)
    assert isinstance(llm.chat([Message("user", "hi")], stream=False)[0], Message)


def test_qwen_model_types_and_a_model_name_as_config(openai_server):
    from chatagent.llm.dashscope.chat import DashScopeModel
    from chatagent.llm.openai.chat import OpenAICompatModel

    ds = get_chat_model({"model": "qwen-vl-max", "model_type": "qwenvl_dashscope", "api_key": "x"})
    assert isinstance(ds, DashScopeModel) and ds.support_multimodal_input and "dashscope" in ds.model_type
    assert isinstance(
        get_chat_model({"model": "qwen-max", "model_type": "qwen_dashscope", "api_key": "x"}), DashScopeModel
    )
    omni = get_chat_model({"model": "m", "model_type": "qwenomni_oai", "model_server": openai_server.base_url})
    assert isinstance(omni, OpenAICompatModel) and omni.support_multimodal_input
    compat = get_chat_model({"model": "qwen-max", "model_type": "oai", "model_server": "dashscope", "api_key": "x"})
    assert compat.base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    with pytest.raises(ValueError, match="not supported: serve the model with an OpenAI-compatible server"):
        get_chat_model({"model": "Qwen/Qwen2.5-7B", "model_type": "transformers"})
    assert get_chat_model("qwen-plus").model == "qwen-plus"


def test_azure_openai_deployment(openai_server):
    openai_server.add("from azure")
    endpoint = openai_server.base_url.removesuffix("/v1")
    llm = get_chat_model(
        {"model": "gpt4o-dep", "azure_endpoint": endpoint, "api_key": "azkey", "api_version": "2024-06-01"}
    )
    assert llm.model_type == "azure"
    assert llm.chat(USER, stream=False)[0]["content"] == "from azure"
    req = openai_server.requests[0]
    assert req.path == "/openai/deployments/gpt4o-dep/chat/completions?api-version=2024-06-01"
    assert req.headers["api-key"] == "azkey"


def test_quick_chat():
    assert ScriptedLLM(["4"]).quick_chat("2+2?") == "4"


# ---- output helpers, settings, log ---------------------------------------------------------------------------


def test_typewriter_print_prints_only_what_is_new(capsys):
    from chatagent.utils.output_beautify import typewriter_print

    steps = [
        [{"role": "assistant", "content": "", "reasoning_content": "Hmm"}],
        [
            {"role": "assistant", "content": "", "reasoning_content": "Hmm."},
            {"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": "{}"}},
        ],
        [
            {"role": "assistant", "content": "", "reasoning_content": "Hmm."},
            Message("assistant", "", function_call={"name": "f", "arguments": "{}"}),
            Message("function", "42", name="f"),
            Message("assistant", "It is 42."),
        ],
    ]
    text = ""
    for rsp in steps:
        text = typewriter_print(rsp, text)
    expected = "[THINK]\nHmm.\n[TOOL_CALL] f\n{}\n[TOOL_RESPONSE] f\n42\n[ANSWER]\nIt is 42."
    assert text == expected and capsys.readouterr().out == expected


def test_settings_and_log_modules():
    from chatagent import settings
    from chatagent.agents.fncall import MAX_LLM_CALLS
    from chatagent.log import logger, setup_logger

    assert settings.MAX_LLM_CALL_PER_RUN == MAX_LLM_CALLS and settings.DEFAULT_MAX_INPUT_TOKENS > 0
    assert logger.name == "chatagent" and setup_logger() is logger


def test_every_agent_name_of_qwen_agent_resolves_and_the_package_stays_light():
    import chatagent.agents as agents

    names = {
        "Agent", "BasicAgent", "MultiAgentHub", "DocQAAgent", "DialogueSimulator", "HumanSimulator",
        "ParallelDocQA", "Assistant", "ArticleAgent", "ReActChat", "Router", "UserAgent", "GroupChat",
        "WriteFromScratch", "GroupChatCreator", "GroupChatAutoRouter", "FnCallAgent", "VirtualMemoryAgent",
        "DialogueRetrievalAgent", "TIRMathAgent",
    }  # fmt: skip
    assert names <= set(agents.__all__)
    for name in agents.__all__:
        assert getattr(agents, name) is not None, name
    code = "import sys, chatagent.agents; print([m for m in ('openai', 'gradio', 'pydantic') if m in sys.modules])"
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- GroupChat's Qwen-Agent arguments -------------------------------------------------------------------------


def speaker(name, *replies):
    from chatagent import BasicAgent

    return BasicAgent(llm=ScriptedLLM(list(replies)), name=name)


def test_group_chat_runs_qwen_agent_arguments():
    alice, bob, carol = speaker("Alice", "A1", "A2"), speaker("Bob", "B1"), speaker("Carol", "C1")
    chat = GroupChat([alice, bob, carol], agent_selection_method="round_robin")
    assert chat.selection == "round_robin" and chat.max_rounds == 3
    out = chat.run_nonstream(USER, max_round=2)
    assert [m["name"] for m in out] == ["Alice", "Bob"]
    mentioned = ["Carol", "Alice"]
    out = chat.run_nonstream(USER, mentioned_agents_name=mentioned, need_batch_response=False)
    assert [m["name"] for m in out] == ["Carol"] and mentioned == ["Carol", "Alice"]  # the caller's list kept
    with pytest.raises(ValueError, match="'Dave' is not in this group chat"):
        chat.run_nonstream(USER, mentioned_agents_name=["Dave"])


def test_group_chat_host_gets_the_function_list():
    def roll() -> str:
        """Roll a die."""
        return "Bob"

    host = ScriptedLLM([tool_call("roll", {}), "Bob", "[STOP]"])
    chat = GroupChat([speaker("Alice", "A"), speaker("Bob", "Hi")], llm=host, function_list=[roll])
    assert [m["name"] for m in chat.run_nonstream(USER)] == ["Bob"]
    assert host.calls[0].functions[0]["name"] == "roll" and host.calls[1].messages[-1].role == "function"
    with pytest.raises(ValueError, match="no host"):
        GroupChat([speaker("Alice")], selection="round_robin", function_list=[roll])


# ---- the web UI ----------------------------------------------------------------------------------------------


def test_webui_run_takes_concurrency_limit_and_enable_mention():
    import asyncio

    import httpx

    from chatagent import BasicAgent
    from chatagent.gui import WebUI

    a = BasicAgent(llm=ScriptedLLM(default="from A"), name="Alpha")
    b = BasicAgent(llm=ScriptedLLM(default="from B"), name="Beta")
    ui = WebUI([a, b])
    url = ui.run(server_port=None, block=False, concurrency_limit=2, enable_mention=True)
    try:
        assert httpx.get(url, timeout=30, trust_env=False).status_code == 200
        chat = next(fn for fn in ui.demo.fns.values() if fn.api_name == "chat")
        assert chat.concurrency_limit == 2

        async def send(text):
            async for update in ui._on_submit({"text": text, "files": []}, None, "Alpha"):
                session = update[-1]
            return session

        session = asyncio.run(send("@Beta what do you think?"))
        assert [m.content for m in session.history][-1] == "from B"
    finally:
        ui.close()
    with pytest.raises(ValueError, match="concurrency_limit"):
        WebUI(a).run(concurrency_limit=0, block=False)
