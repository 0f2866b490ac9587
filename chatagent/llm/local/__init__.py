"""The embedded model: a GGUF file run by llama.cpp in this process (`model`: `LocalModel`, its servers), with
llama.cpp's own token counts (`tokenizer`), tools by constrained decoding (`tools`, over `tool_router`: the tool a
question needs, and `argument_grammar`: arguments quoted from the question) and a stop for a model repeating
itself (`loop_guard`).

`chatagent.llm.local` is a documented path (docs/embedded-model.md): the model's names are handed on from here."""

from chatagent.llm.local.model import LocalModel, LocalServer, default_model_path, get_server, running_servers

__all__ = ["LocalModel", "LocalServer", "default_model_path", "get_server", "running_servers"]
