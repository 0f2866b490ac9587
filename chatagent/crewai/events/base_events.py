"""CrewAI's event types (`crewai.events`): what happened in a crew, a task, an agent, a tool call, a model call,
a flow, a memory or a knowledge query. Each is a plain object with CrewAI's fields and its `type` text."""

from __future__ import annotations

import datetime
import uuid
from typing import Any


class BaseEvent:
    """An event: its `type`, `timestamp`, `event_id`, `source_type`, and the fields given as keywords."""

    type: str = "base_event"

    def __init__(self, **fields: Any) -> None:
        self.timestamp = datetime.datetime.now(datetime.timezone.utc)
        self.event_id = uuid.uuid4().hex
        self.source_type: str | None = None
        self.__dict__.update(fields)

    def to_json(self) -> dict[str, Any]:
        """The event's fields that are plain data."""
        plain = (str, int, float, bool, type(None))
        return {k: v for k, v in vars(self).items() if isinstance(v, plain)} | {"type": self.type}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r:.60}' for k, v in vars(self).items())})"


def _kind(name: str, type_text: str, base: type[BaseEvent] = BaseEvent) -> type[BaseEvent]:
    return type(name, (base,), {"type": type_text, "__doc__": f"CrewAI's {name} ('{type_text}')."})


class CrewBaseEvent(BaseEvent):
    crew_name: str | None = None
    crew: Any = None


CrewKickoffStartedEvent = _kind("CrewKickoffStartedEvent", "crew_kickoff_started", CrewBaseEvent)
CrewKickoffCompletedEvent = _kind("CrewKickoffCompletedEvent", "crew_kickoff_completed", CrewBaseEvent)
CrewKickoffFailedEvent = _kind("CrewKickoffFailedEvent", "crew_kickoff_failed", CrewBaseEvent)
CrewTrainStartedEvent = _kind("CrewTrainStartedEvent", "crew_train_started", CrewBaseEvent)
CrewTrainCompletedEvent = _kind("CrewTrainCompletedEvent", "crew_train_completed", CrewBaseEvent)
CrewTestStartedEvent = _kind("CrewTestStartedEvent", "crew_test_started", CrewBaseEvent)
CrewTestCompletedEvent = _kind("CrewTestCompletedEvent", "crew_test_completed", CrewBaseEvent)
TaskStartedEvent = _kind("TaskStartedEvent", "task_started")
TaskCompletedEvent = _kind("TaskCompletedEvent", "task_completed")
TaskFailedEvent = _kind("TaskFailedEvent", "task_failed")
AgentExecutionStartedEvent = _kind("AgentExecutionStartedEvent", "agent_execution_started")
AgentExecutionCompletedEvent = _kind("AgentExecutionCompletedEvent", "agent_execution_completed")
AgentExecutionErrorEvent = _kind("AgentExecutionErrorEvent", "agent_execution_error")
LiteAgentExecutionStartedEvent = _kind("LiteAgentExecutionStartedEvent", "lite_agent_execution_started")
LiteAgentExecutionCompletedEvent = _kind("LiteAgentExecutionCompletedEvent", "lite_agent_execution_completed")


class ToolUsageEvent(BaseEvent):
    tool_name: str = ""
    tool_args: Any = None
    agent_role: str | None = None


ToolUsageStartedEvent = _kind("ToolUsageStartedEvent", "tool_usage_started", ToolUsageEvent)
ToolUsageFinishedEvent = _kind("ToolUsageFinishedEvent", "tool_usage_finished", ToolUsageEvent)
ToolUsageErrorEvent = _kind("ToolUsageErrorEvent", "tool_usage_error", ToolUsageEvent)
LLMCallStartedEvent = _kind("LLMCallStartedEvent", "llm_call_started")
LLMCallCompletedEvent = _kind("LLMCallCompletedEvent", "llm_call_completed")
LLMCallFailedEvent = _kind("LLMCallFailedEvent", "llm_call_failed")
LLMStreamChunkEvent = _kind("LLMStreamChunkEvent", "llm_stream_chunk")
FlowStartedEvent = _kind("FlowStartedEvent", "flow_started")
FlowFinishedEvent = _kind("FlowFinishedEvent", "flow_finished")
FlowPlotEvent = _kind("FlowPlotEvent", "flow_plot")
FlowPausedEvent = _kind("FlowPausedEvent", "flow_paused")
HumanFeedbackRequestedEvent = _kind("HumanFeedbackRequestedEvent", "human_feedback_requested")
HumanFeedbackReceivedEvent = _kind("HumanFeedbackReceivedEvent", "human_feedback_received")
MethodExecutionStartedEvent = _kind("MethodExecutionStartedEvent", "method_execution_started")
MethodExecutionFinishedEvent = _kind("MethodExecutionFinishedEvent", "method_execution_finished")
MethodExecutionFailedEvent = _kind("MethodExecutionFailedEvent", "method_execution_failed")
MemorySaveStartedEvent = _kind("MemorySaveStartedEvent", "memory_save_started")
MemorySaveCompletedEvent = _kind("MemorySaveCompletedEvent", "memory_save_completed")
MemoryQueryStartedEvent = _kind("MemoryQueryStartedEvent", "memory_query_started")
MemoryQueryCompletedEvent = _kind("MemoryQueryCompletedEvent", "memory_query_completed")
MemoryRetrievalFailedEvent = _kind("MemoryRetrievalFailedEvent", "memory_retrieval_failed")
KnowledgeRetrievalStartedEvent = _kind("KnowledgeRetrievalStartedEvent", "knowledge_search_query_started")
KnowledgeRetrievalCompletedEvent = _kind("KnowledgeRetrievalCompletedEvent", "knowledge_search_query_completed")

__all__ = [
    "AgentExecutionCompletedEvent",
    "AgentExecutionErrorEvent",
    "AgentExecutionStartedEvent",
    "BaseEvent",
    "CrewBaseEvent",
    "CrewKickoffCompletedEvent",
    "CrewKickoffFailedEvent",
    "CrewKickoffStartedEvent",
    "CrewTestCompletedEvent",
    "CrewTestStartedEvent",
    "CrewTrainCompletedEvent",
    "CrewTrainStartedEvent",
    "FlowFinishedEvent",
    "FlowPausedEvent",
    "FlowPlotEvent",
    "FlowStartedEvent",
    "HumanFeedbackReceivedEvent",
    "HumanFeedbackRequestedEvent",
    "KnowledgeRetrievalCompletedEvent",
    "KnowledgeRetrievalStartedEvent",
    "LLMCallCompletedEvent",
    "LLMCallFailedEvent",
    "LLMCallStartedEvent",
    "LLMStreamChunkEvent",
    "LiteAgentExecutionCompletedEvent",
    "LiteAgentExecutionStartedEvent",
    "MemoryQueryCompletedEvent",
    "MemoryQueryStartedEvent",
    "MemoryRetrievalFailedEvent",
    "MemorySaveCompletedEvent",
    "MemorySaveStartedEvent",
    "MethodExecutionFailedEvent",
    "MethodExecutionFinishedEvent",
    "MethodExecutionStartedEvent",
    "TaskCompletedEvent",
    "TaskFailedEvent",
    "TaskStartedEvent",
    "ToolUsageErrorEvent",
    "ToolUsageEvent",
    "ToolUsageFinishedEvent",
    "ToolUsageStartedEvent",
]
