"""The public API: every exported name resolves, and `import chatagent` imports nothing heavy."""

import importlib
import sys

import chatagent
from tests.support import processes

HEAVY = [
    "openai",
    "dashscope",
    "gradio",
    "pydantic",
    "httpx",
    "pypdf",
    "pypdfium2",
    "mcp",
    "xllamacpp",
    "jieba",
    "numpy",
]


def test_all_matches_exports_and_every_name_resolves():
    assert sorted(chatagent.__all__) == sorted(chatagent._EXPORTS)
    for name in chatagent.__all__:
        assert getattr(chatagent, name) is not None, name


def test_import_is_light():
    code = (
        "import sys, chatagent, chatagent.agents.basic, chatagent.llm.scripted;"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# module paths the manual or Qwen-Agent's API names, each with a name it hands on and where that name lives now
DOCUMENTED_PATHS = [
    ("chatagent.llm.local", "get_server", "chatagent.llm.local.model"),  # docs/embedded-model.md
    ("chatagent.llm.base", "register_llm", "chatagent.llm.base"),  # docs/qwen-agent.md
    ("chatagent.llm.function_calling", "BaseFnCallModel", "chatagent.llm.function_calling"),
]


def test_documented_module_paths_keep_working():
    for path, name, home in DOCUMENTED_PATHS:
        assert getattr(importlib.import_module(path), name) is getattr(importlib.import_module(home), name), path
