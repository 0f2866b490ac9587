"""A remote A2A agent as a tool: `function_list=[A2AAgent('http://host:8000')]`.

The agent card (`<url>/.well-known/agent-card.json`) is read when the tool is made: its name (the tool's, unless
`name` is given) and description (with its skills) tell the model what the agent does. A call sends the model's
`message` to the agent (A2A's `SendMessage`) and returns its answer. The calls made in one chatagent session go on
in one A2A context, so the remote agent remembers what it was told; without a session each call starts afresh.
A remote task that waits for input (the remote agent's own tool approval) is reported to the model; it is not
approved from here. Failures (unreachable, a timeout, an error answer) come back as text the model can read.
Needs `a2a-sdk`: `pip install 'chatagent[a2a]'`.

Where it connects (`chatagent.utils.egress`): only to the configured URL's origin and the interface URLs given in
`interfaces`; a card's interface at any other origin is not used (none left: ValueError when the tool is made), so
the key and the messages reach no one the card names. Every connection is held to the run's URL policy
(`url_policy()`, which `RunContext.egress` is: under `chatagent serve`, public hosts only), but for the hosts configured here outside any
policy (the operator's, as a model server's URL is). What it reads is bounded: the card to `CARD_BYTES`, each answer
to `max_bytes`, the text handed to the model to `max_answer_chars`, the card's description to `DESCRIPTION_CHARS`
(each cut marked as cut).
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from typing import Any

from chatagent.tools.base import BaseTool
from chatagent.utils.aio import run_coroutine
from chatagent.utils.egress import guarded_client, host_of, origin_of
from chatagent.utils.url_fetch import url_policy

DEFAULT_TIMEOUT = 300.0
CARD_BYTES = 1 << 20  # an agent card larger than this is refused
MAX_BYTES = 8 << 20  # one answer's bytes, by default
MAX_ANSWER_CHARS = 32_000  # the answer's text handed to the model, by default
DESCRIPTION_CHARS = 1_000  # of the card's description; its skills' another 1,000
_NAME = re.compile(r"[^A-Za-z0-9_-]")


class A2AAgent(BaseTool):
    """A remote A2A agent (see the module docstring).

    Args:
        url: the agent's base URL (where its card is), or the URL of its card.
        name: the tool's name (default: from the card's name).
        api_key: sent as `Authorization: Bearer <key>`; `headers`: any other headers.
        timeout: seconds one call may take.
        interfaces: interface URLs of the card at other origins than `url`'s that may be used (and get the key).
        max_bytes: bytes one answer may have (more: an error for the model); max_answer_chars: of its text handed
            to the model (more is cut, and marked as cut).
    """

    third_party = True  # its name and description are the card's

    def __init__(
        self, url: str, *, name: str | None = None, api_key: str | None = None, headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT, interfaces: list[str] | tuple[str, ...] = (), max_bytes: int = MAX_BYTES,
        max_answer_chars: int = MAX_ANSWER_CHARS,
    ) -> None:  # fmt: skip
        if not str(url).startswith(("http://", "https://")):  # a wrong type or scheme: said, not a crash later
            raise ValueError(f"A2AAgent needs the agent's http(s) URL, got {url!r:.100}")
        listed = [str(i).rstrip("/") for i in interfaces]
        if any(not i.startswith(("http://", "https://")) for i in listed):
            raise ValueError("A2AAgent's interfaces must be http(s) URLs")
        self.url = url.removesuffix("/.well-known/agent-card.json").rstrip("/")
        self.headers = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self.call_timeout = float(timeout)
        self.max_bytes, self.max_answer_chars = int(max_bytes), int(max_answer_chars)
        self.origins = {origin_of(self.url)} | {origin_of(i) for i in listed}
        built_under = url_policy()  # configured outside any: the operator's hosts, reached as a model server's are
        self.admitted: set[str] = {host_of(u) for u in [self.url, *listed]} if built_under is None else set()
        self.card: Any = run_coroutine(self._card(built_under), self.call_timeout)
        self._keep_interfaces(origin_of(self.url), listed)
        card_name = _NAME.sub("_", self.card.name)[:60] or "remote_agent"
        self.name = name or card_name
        skills = "; ".join(f"{s.name}: {s.description}" for s in self.card.skills)
        self.description = _cut(self.card.description or f"The agent {self.card.name}.", DESCRIPTION_CHARS) + (
            f" Its skills: {_cut(skills, 1000)}." if skills else "")  # fmt: skip
        self.parameters = {
            "type": "object",
            "properties": {"message": {"type": "string", "description": f"What to ask {self.name}."}},
            "required": ["message"],
        }
        self._contexts: dict[str, str] = {}  # a conversation (session id) -> its A2A context id
        self._lock = threading.Lock()
        super().__init__({"timeout": self.call_timeout + 5.0})

    def _http(self, policy: Any, max_bytes: int | None = None) -> Any:
        """A client that reaches only this agent's origins, under `policy` (see the module docstring)."""
        return guarded_client(self.origins, policy=policy, admitted=self.admitted, headers=self.headers,
                              max_bytes=max_bytes or self.max_bytes, timeout=self.call_timeout)  # fmt: skip

    async def _card(self, policy: Any) -> Any:
        from a2a.client.card_resolver import A2ACardResolver

        async with self._http(policy, CARD_BYTES) as http:
            return await A2ACardResolver(http, self.url).get_agent_card()

    def _keep_interfaces(self, own: str, listed: list[str]) -> None:
        """Drop the card's interfaces at another origin than `own` that are not `listed`; ValueError if none is
        left."""
        found = list(self.card.supported_interfaces)
        kept = [i for i in found if origin_of(i.url) == own or i.url.rstrip("/") in listed]
        if not kept:
            names = ", ".join(repr(i.url[:200]) for i in found[:5]) or "none"
            raise ValueError(
                f"the agent card at {self.url} names no interface at its own origin ({own}); it names {names}. "
                "Give the one to use in A2AAgent(..., interfaces=[...]) if you trust it"
            )
        del self.card.supported_interfaces[:]
        self.card.supported_interfaces.extend(kept)

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
        async with self._http(url_policy()) as http:  # the run's (RunContext.egress)
            client = await create_client(self.card, ClientConfig(httpx_client=http, streaming=False))
            task: Any = None
            async for event in client.send_message(pb.SendMessageRequest(message=message)):
                if event.HasField("task"):
                    task = event.task
                elif event.HasField("message"):
                    return self._bounded("\n".join(p.text for p in event.message.parts if p.HasField("text")))
        if task is None:
            return f"Error: {self.name} answered nothing."
        if conversation and task.context_id:
            with self._lock:
                self._contexts[conversation] = task.context_id
        answer = "\n".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text")).strip()
        state = task.status.state
        if state == pb.TASK_STATE_INPUT_REQUIRED:
            waiting = "\n".join(p.text for p in task.status.message.parts if p.HasField("text"))
            return self._bounded((answer + "\n\n" if answer else "") + f"[{self.name} is waiting for input: {waiting}]")
        if state == pb.TASK_STATE_FAILED:
            return f"Error: {self.name} failed: " + self._bounded(answer or "the remote task failed")
        if state == pb.TASK_STATE_CANCELED:
            return f"Error: {self.name}'s task was cancelled."
        return self._bounded(answer) or f"({self.name} gave an empty answer)"

    def _bounded(self, text: str) -> str:
        return _cut(text, self.max_answer_chars)


def _cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters marked as cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... cut: {len(text) - limit} more characters]"


__all__ = ["A2AAgent"]
