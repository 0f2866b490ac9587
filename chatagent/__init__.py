"""chatagent: streaming chat assistants and agents on large language models.

    from chatagent import BasicAgent
    bot = BasicAgent(llm={'model': 'qwen-plus', 'model_server': 'dashscope'})
    for rsp in bot.run([{'role': 'user', 'content': 'hi'}]):
        print(rsp[-1]['content'])

Names are imported on first use, so `import chatagent` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Agent": "chatagent.agent",
    "AgentServer": "chatagent.server.runner",
    "Run": "chatagent.agent",
    "BasicAgent": "chatagent.agents.basic",
    "Message": "chatagent.schema",
    "ContentItem": "chatagent.schema",
    "FunctionCall": "chatagent.schema",
    "MessageError": "chatagent.schema",
    "StopReason": "chatagent.schema",
    "to_messages": "chatagent.schema",
    "to_openai": "chatagent.schema",
    "merge_delta": "chatagent.schema.stream",
    "Fragment": "chatagent.schema.fragment",
    "Session": "chatagent.sessions",
    "LongTermMemory": "chatagent.memories.longterm",
    "MemoryMatch": "chatagent.memories.records",
    "MemoryRecord": "chatagent.memories.records",
    "SessionInfo": "chatagent.sessions",
    "SessionBusyError": "chatagent.sessions",
    "SessionConflictError": "chatagent.sessions",
    "SessionPendingTurnError": "chatagent.sessions",
    "PendingTurn": "chatagent.sessions",
    "SessionStoreError": "chatagent.sessions",
    "ChatAgentError": "chatagent.errors",
    "LoopExit": "chatagent.errors",
    "ModelServiceError": "chatagent.errors",
    "ModelErrorCode": "chatagent.errors",
    "MissingDependencyError": "chatagent.errors",
    "RunDeadlineExceeded": "chatagent.errors",
    "BaseChatModel": "chatagent.llm.base",
    "Usage": "chatagent.llm.base",
    "get_chat_model": "chatagent.llm.registry",
    "register_llm": "chatagent.llm.registry",
    "ScriptedLLM": "chatagent.llm.scripted",
    "Reply": "chatagent.llm.scripted",
    "tool_call": "chatagent.llm.scripted",
    "count_tokens": "chatagent.utils.tokens",
    "FnCallAgent": "chatagent.agents.fncall",
    "Assistant": "chatagent.agents.assistant",
    "BaseTool": "chatagent.tools.base",
    "register_tool": "chatagent.tools.base",
    "TOOL_REGISTRY": "chatagent.tools.base",
    "tool": "chatagent.tools.from_function",
    "FunctionTool": "chatagent.tools.from_function",
    "ToolArgumentError": "chatagent.tools.arguments",
    "ToolErrorKind": "chatagent.tools.calling",
    "Event": "chatagent.run.events",
    "Callbacks": "chatagent.run.events",
    "StructuredOutputError": "chatagent.errors",
    "StructuredOutput": "chatagent.plugins.structured",
    "Compaction": "chatagent.run.compaction",
    "A2AAgent": "chatagent.tools.a2a",
    "Plugin": "chatagent.run.plugin",
    "PluginError": "chatagent.run.plugin",
    "Blocked": "chatagent.run.plugin",
    "Retry": "chatagent.run.plugin",
    "InputGuardrail": "chatagent.plugins.guardrails",
    "OutputGuardrail": "chatagent.plugins.guardrails",
    "TextPolicy": "chatagent.plugins.guardrails",
    "LLMJudge": "chatagent.plugins.guardrails",
    "approval_message": "chatagent.run.approval",
    "pending_approval": "chatagent.run.approval",
    "ask_user": "chatagent.run.interrupts",
    "answer_message": "chatagent.run.interrupts",
    "pending_questions": "chatagent.run.interrupts",
    "ReActChat": "chatagent.agents.react_chat",
    "GroupChat": "chatagent.agents.group_chat",
    "Router": "chatagent.agents.router",
    "UserAgent": "chatagent.agents.user",
    "PENDING_USER_INPUT": "chatagent.agents.user",
    "pending_input": "chatagent.agents.user",
    "handoff": "chatagent.run.handoffs",
    "Handoff": "chatagent.run.handoffs",
    "remove_all_tools": "chatagent.run.handoffs",
    "Task": "chatagent.agents.teams.task",
    "TaskOutput": "chatagent.agents.teams.task",
    "TaskFailed": "chatagent.agents.teams.task",
    "Crew": "chatagent.agents.teams.crew",
    "CrewOutput": "chatagent.agents.teams.crew",
    "human_feedback": "chatagent.agents.teams.crew",
    "Flow": "chatagent.flows.flow",
    "FlowPaused": "chatagent.flows.flow",
    "FlowState": "chatagent.flows.state",
    "start": "chatagent.flows.conditions",
    "listen": "chatagent.flows.conditions",
    "router": "chatagent.flows.conditions",
    "or_": "chatagent.flows.conditions",
    "and_": "chatagent.flows.conditions",
}

__all__ = [
    "BaseTool",
    "Callbacks",
    "Event",
    "FnCallAgent",
    "Assistant",
    "FunctionTool",
    "StructuredOutputError",
    "StructuredOutput",
    "Compaction",
    "A2AAgent",
    "Plugin",
    "PluginError",
    "Blocked",
    "Retry",
    "InputGuardrail",
    "OutputGuardrail",
    "TextPolicy",
    "LLMJudge",
    "approval_message",
    "pending_approval",
    "ask_user",
    "answer_message",
    "pending_questions",
    "TOOL_REGISTRY",
    "ToolArgumentError",
    "ToolErrorKind",
    "register_tool",
    "tool",
    "GroupChat",
    "PENDING_USER_INPUT",
    "ReActChat",
    "Router",
    "UserAgent",
    "pending_input",
    "handoff",
    "Handoff",
    "remove_all_tools",
    "Task",
    "TaskOutput",
    "TaskFailed",
    "Crew",
    "CrewOutput",
    "human_feedback",
    "Flow",
    "FlowPaused",
    "FlowState",
    "start",
    "listen",
    "router",
    "or_",
    "and_",
    "Agent",
    "AgentServer",
    "BaseChatModel",
    "BasicAgent",
    "ChatAgentError",
    "LoopExit",
    "ContentItem",
    "FunctionCall",
    "Message",
    "MessageError",
    "StopReason",
    "MissingDependencyError",
    "ModelServiceError",
    "ModelErrorCode",
    "Reply",
    "Fragment",
    "Run",
    "RunDeadlineExceeded",
    "Session",
    "LongTermMemory",
    "MemoryMatch",
    "MemoryRecord",
    "SessionBusyError",
    "SessionConflictError",
    "SessionInfo",
    "SessionPendingTurnError",
    "PendingTurn",
    "SessionStoreError",
    "ScriptedLLM",
    "Usage",
    "count_tokens",
    "get_chat_model",
    "merge_delta",
    "register_llm",
    "to_messages",
    "to_openai",
    "tool_call",
]

if TYPE_CHECKING:
    from chatagent.agent import Agent, Run
    from chatagent.agents.assistant import Assistant
    from chatagent.agents.basic import BasicAgent
    from chatagent.agents.fncall import FnCallAgent
    from chatagent.agents.group_chat import GroupChat
    from chatagent.agents.react_chat import ReActChat
    from chatagent.agents.router import Router
    from chatagent.agents.teams.crew import Crew, CrewOutput, human_feedback
    from chatagent.agents.teams.task import Task, TaskFailed, TaskOutput
    from chatagent.agents.user import PENDING_USER_INPUT, UserAgent, pending_input
    from chatagent.errors import (
        ChatAgentError,
        LoopExit,
        MissingDependencyError,
        ModelErrorCode,
        ModelServiceError,
        RunDeadlineExceeded,
    )
    from chatagent.flows.conditions import and_, listen, or_, router, start
    from chatagent.flows.flow import Flow, FlowPaused
    from chatagent.flows.state import FlowState
    from chatagent.llm.base import BaseChatModel, Usage
    from chatagent.llm.registry import get_chat_model, register_llm
    from chatagent.llm.scripted import Reply, ScriptedLLM, tool_call
    from chatagent.memories.longterm import LongTermMemory
    from chatagent.memories.records import MemoryMatch, MemoryRecord
    from chatagent.plugins.guardrails import InputGuardrail, LLMJudge, OutputGuardrail, TextPolicy
    from chatagent.plugins.structured import StructuredOutput, StructuredOutputError
    from chatagent.run.approval import approval_message, pending_approval
    from chatagent.run.compaction import Compaction
    from chatagent.run.events import Callbacks, Event
    from chatagent.run.handoffs import Handoff, handoff, remove_all_tools
    from chatagent.run.interrupts import answer_message, ask_user, pending_questions
    from chatagent.run.plugin import Blocked, Plugin, PluginError, Retry
    from chatagent.schema import ContentItem, FunctionCall, Message, MessageError, StopReason, to_messages, to_openai
    from chatagent.schema.fragment import Fragment
    from chatagent.schema.stream import merge_delta
    from chatagent.server.runner import AgentServer
    from chatagent.sessions import (
        PendingTurn,
        Session,
        SessionBusyError,
        SessionConflictError,
        SessionInfo,
        SessionPendingTurnError,
        SessionStoreError,
    )
    from chatagent.tools.a2a import A2AAgent
    from chatagent.tools.arguments import ToolArgumentError
    from chatagent.tools.base import TOOL_REGISTRY, BaseTool, register_tool
    from chatagent.tools.calling import ToolErrorKind
    from chatagent.tools.from_function import FunctionTool, tool
    from chatagent.utils.tokens import count_tokens

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
