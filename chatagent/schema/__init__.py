"""Messages: the data every agent, model and tool exchanges.

`Message`, `ContentItem` and `FunctionCall` are small slotted classes (not pydantic models) because a
streaming answer creates one message fragment per chunk; they read like dicts (`msg['role']`,
`msg.get('name')`) so code written for Qwen-Agent ports unchanged. `to_message` accepts dicts in our
format or the OpenAI chat format; `to_openai` converts back.
"""

from chatagent.schema.history import drop_unanswered_calls, with_system_text
from chatagent.schema.message import Message, not_a_message_list, to_message, to_messages
from chatagent.schema.openai_format import from_openai, to_openai
from chatagent.schema.parts import (
    ASSISTANT,
    AUDIO,
    CONTENT,
    CONTENT_KINDS,
    DEFAULT_SYSTEM_MESSAGE,
    FILE,
    FUNCTION,
    IMAGE,
    NAME,
    REASONING_CONTENT,
    ROLE,
    ROLES,
    SYSTEM,
    TEXT,
    USER,
    VIDEO,
    ContentItem,
    FunctionCall,
    MessageError,
    content_text,
)
from chatagent.schema.stop_reason import StopReason

__all__ = [
    "ASSISTANT",
    "AUDIO",
    "CONTENT",
    "CONTENT_KINDS",
    "DEFAULT_SYSTEM_MESSAGE",
    "FILE",
    "FUNCTION",
    "IMAGE",
    "NAME",
    "REASONING_CONTENT",
    "ROLE",
    "ROLES",
    "SYSTEM",
    "TEXT",
    "USER",
    "VIDEO",
    "ContentItem",
    "FunctionCall",
    "Message",
    "MessageError",
    "StopReason",
    "content_text",
    "drop_unanswered_calls",
    "from_openai",
    "not_a_message_list",
    "to_message",
    "to_messages",
    "to_openai",
    "with_system_text",
]
