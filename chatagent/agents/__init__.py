"""The agents, one per module, all importable from here (as from Qwen-Agent's `qwen_agent.agents`):

    from chatagent.agents import Assistant, GroupChat, ParallelDocQA

Names are imported on first use, so importing this package stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Agent": "chatagent.agent",
    "ArticleAgent": "chatagent.agents.article_agent",
    "Assistant": "chatagent.agents.assistant",
    "BasicAgent": "chatagent.agents.basic",
    "BasicDocQA": "chatagent.agents.doc_qa.basic_doc_qa",
    "DialogueRetrievalAgent": "chatagent.agents.dialogue_retrieval_agent",
    "DialogueSimulator": "chatagent.agents.dialogue_simulator",
    "DocQAAgent": "chatagent.agents.doc_qa.basic_doc_qa",
    "FnCallAgent": "chatagent.agents.fncall",
    "GroupChat": "chatagent.agents.group_chat",
    "GroupChatAutoRouter": "chatagent.agents.group_chat_auto_router",
    "GroupChatCreator": "chatagent.agents.group_chat_creator",
    "HumanSimulator": "chatagent.agents.human_simulator",
    "FileExcerpts": "chatagent.agents.file_excerpts",
    "Memory": "chatagent.agents.file_excerpts",  # Qwen-Agent's name of FileExcerpts
    "MultiAgentHub": "chatagent.agents.hub",
    "ParallelDocQA": "chatagent.agents.doc_qa.parallel_doc_qa",
    "ReActChat": "chatagent.agents.react_chat",
    "Router": "chatagent.agents.router",
    "TIRMathAgent": "chatagent.agents.tir_agent",
    "UserAgent": "chatagent.agents.user",
    "VirtualMemoryAgent": "chatagent.agents.virtual_memory_agent",
    "WriteFromScratch": "chatagent.agents.write_from_scratch",
}

__all__ = [
    "Agent",
    "ArticleAgent",
    "Assistant",
    "BasicAgent",
    "BasicDocQA",
    "DialogueRetrievalAgent",
    "DialogueSimulator",
    "DocQAAgent",
    "FileExcerpts",
    "FnCallAgent",
    "GroupChat",
    "GroupChatAutoRouter",
    "GroupChatCreator",
    "HumanSimulator",
    "Memory",
    "MultiAgentHub",
    "ParallelDocQA",
    "ReActChat",
    "Router",
    "TIRMathAgent",
    "UserAgent",
    "VirtualMemoryAgent",
    "WriteFromScratch",
]

if TYPE_CHECKING:
    from chatagent.agent import Agent
    from chatagent.agents.article_agent import ArticleAgent
    from chatagent.agents.assistant import Assistant
    from chatagent.agents.basic import BasicAgent
    from chatagent.agents.dialogue_retrieval_agent import DialogueRetrievalAgent
    from chatagent.agents.dialogue_simulator import DialogueSimulator
    from chatagent.agents.doc_qa.basic_doc_qa import BasicDocQA, DocQAAgent
    from chatagent.agents.doc_qa.parallel_doc_qa import ParallelDocQA
    from chatagent.agents.file_excerpts import FileExcerpts, Memory
    from chatagent.agents.fncall import FnCallAgent
    from chatagent.agents.group_chat import GroupChat
    from chatagent.agents.group_chat_auto_router import GroupChatAutoRouter
    from chatagent.agents.group_chat_creator import GroupChatCreator
    from chatagent.agents.hub import MultiAgentHub
    from chatagent.agents.human_simulator import HumanSimulator
    from chatagent.agents.react_chat import ReActChat
    from chatagent.agents.router import Router
    from chatagent.agents.tir_agent import TIRMathAgent
    from chatagent.agents.user import UserAgent
    from chatagent.agents.virtual_memory_agent import VirtualMemoryAgent
    from chatagent.agents.write_from_scratch import WriteFromScratch

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
