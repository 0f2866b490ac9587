"""A remote A2A agent as a tool: `function_list=[A2AAgent('http://host:8000')]`.

The agent card (`<url>/.well-known/agent-card.json`) is read when the tool is made: its name (the tool's, unless
`name` is given) and description (with its skills) tell the model what the agent does. A call sends the model's
`message` to the agent (A2A's `SendMessage`) and returns its answer. The calls made in one chatagent session go on
in one A2A context, so the remote agent remembers what it was told; without a session each call starts afresh.
A remote task that waits for input (the remote agent's own tool approval) is reported to the model; it is not
approved from here. Failures (unreachable, a timeout, an error answer) come back as text the model can read.
Needs `a2a-sdk`: `pip install 'chatagent[a2a]'`.
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from typing import Any

from chatagent.tools.base import BaseTool
from chatagent.utils.aio import run_coroutine

DEFAULT_TIMEOUT = 300.0
_NAME = re.compile(r"[^A-Za-z0-9_-]")


class A2AAgent(BaseTool):
    """A remote A2A agent (see the module docstring).

    Args:
        url: the agent's base URL (where its card is), or the URL of its card.
        name: the tool's name (default: from the card's name).
        api_key: sent as `Authorization: Bearer <key>`; `headers`: any other headers.
        timeout: seconds one call may take.
    """

    def __init__(
        self, url: str, *, name: str | None = None, api_key: str | None = None, headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:  # fmt: skip
        if not str(url).startswith(("http://", "https://")):  # a wrong type or scheme: said, not a crash later
            raise ValueError(f"A2AAgent needs the agent's http(s) URL, got {url!r:.100}")
        self.url = url.removesuffix("/.well-known/agent-card.json").rstrip("/")
        self.headers = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self.call_timeout = float(timeout)
        self.card: Any = run_coroutine(self._card(), self.call_timeout)
        card_name = _NAME.sub("_", self.card.name)[:60] or "remote_agent"
        self.name = name or card_name
        skills = "; ".join(f"{s.name}: {s.description}" for s in self.card.skills)[:1000]
        self.description = (self.card.description or f"The agent {self.card.name}.") + (
            f" Its skills: {skills}." if skills else "")  # fmt: skip
        self.parameters = {
            "type": "object",
            "properties": {"message": {"type": "string", "description": f"What to ask {self.card.name}."}},
            "required": ["message"],
        }
        self._contexts: dict[str, str] = {}  # a conversation (session id) -> its A2A context id
        self._lock = threading.Lock()
        super().__init__({"timeout": self.call_timeout + 5.0})

    def _http(self) -> Any:
        import httpx

        return httpx.AsyncClient(headers=self.headers, timeout=self.call_timeout)

    async def _card(self) -> Any:
        from a2a.client.card_resolver import A2ACardResolver

        async with self._http() as http:
            return await A2ACardResolver(http, self.url).get_agent_card()

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        return run_coroutine(self.acall(params, **kwargs), self.call_timeout + 5.0)

    async def acall(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """Ask the remote agent (on the running loop)."""
        args = self.parse_params(params)
        conversation = str(kwargs.get("session_id") or "")
        try:
            return await asyncio.wait_for(self._ask(str(args["message"]), conversation), self.call_timeout)
        except asyncio.TimeoutError:
            return f"Error: {self.name} did not answer within {self.call_timeout:g} seconds."
        except Exception as e:  # the remote agent or the network failed: what the model can read
            return f"Error: {self.name} failed: {type(e).__name__}: {str(e)[:300]}"

    async def _ask(self, text: str, conversation: str) -> str:
        from a2a.client import ClientConfig, create_client
        from a2a.types import a2a_pb2 as pb

        with self._lock:
            context = self._contexts.get(conversation, "")
        message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, context_id=context)
        message.parts.append(pb.Part(text=text))
        async with self._http() as http:
            client = await create_client(self.card, ClientConfig(httpx_client=http, streaming=False))
            task: Any = None
            async for event in client.send_message(pb.SendMessageRequest(message=message)):
                if event.HasField("task"):
                    task = event.task
                elif event.HasField("message"):
                    return "\n".join(p.text for p in event.message.parts if p.HasField("text"))
        if task is None:
            return f"Error: {self.name} answered nothing."
        if conversation and task.context_id:
            with self._lock:
                self._contexts[conversation] = task.context_id
        answer = "\n".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text")).strip()
        state = task.status.state
        if state == pb.TASK_STATE_INPUT_REQUIRED:
            waiting = "\n".join(p.text for p in task.status.message.parts if p.HasField("text"))
            return (answer + "\n\n" if answer else "") + f"[{self.name} is waiting for input: {waiting}]"
        if state == pb.TASK_STATE_FAILED:
            return f"Error: {self.name} failed: " + (answer or "the remote task failed")
        if state == pb.TASK_STATE_CANCELED:
            return f"Error: {self.name}'s task was cancelled."
        return answer or f"({self.name} gave an empty answer)"


__all__ = ["A2AAgent"]
