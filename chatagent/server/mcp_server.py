"""The served agents over MCP: `chatagent serve --mcp` (streamable HTTP at `/mcp`) and `chatagent mcp` (stdio).

Each agent is a tool `ask_<name>`: its description, a `message` (the task or question), `session_id` to go on with
a conversation (`"new"` starts one; its id comes back in the result), and, for a run that paused on a tool call
that needs a person's approval, `approval` (true, false or {call id: true/false}) with the `session_id` or the
`approval_token` the paused result gave. A run that pauses on a tool's question (`chatagent.ask_user`) in a
conversation asks the client through MCP elicitation (an `input_required` result, a form per question: its schema's
field; the conversation's id as its `requestState`), and the client's next round goes on with the answers; a
question whose schema is not a flat field goes back in the result, answered with `answers` ({question id: answer})
and the `session_id`. With `expose_tools`, each agent's own tools are tools too (named as they
are, or `<agent>__<tool>` when several agents are served), except those that always need approval; a call whose
arguments need approval (a predicate) is refused: it never runs without a person's yes. A direct call goes through
the agent's input checks and output redaction as a turn does (`chatagent.server.exposed`); an agent with checks a
direct call cannot reach (an `after_model` hook) has its tools exposed only when named (`expose_tools=['name']`).

The rules are the OpenAI endpoint's (`turns`, `conversations`, `approvals`, `identity`): over HTTP the principal is
the API key's (`Authorization: Bearer`), and an MCP session belongs to the principal that opened it; over stdio
it is the local user who started the server (`mcp:local`), a principal of its own. While an agent works, the
client is sent progress notifications (what the agent is doing); cancelling the call closes the run. Needs the
`mcp` package: `pip install 'chatagent[mcp]'`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from mcp.server.lowlevel import Server
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    TextContent,
    Tool,
)

from chatagent.agent import Agent
from chatagent.run.approval import APPROVAL, needs_approval
from chatagent.run.interrupts import ANSWERS, PENDING_QUESTIONS
from chatagent.run.plugin import Blocked, Plugins
from chatagent.run.trust import SERVED_APPROVAL, acting_as
from chatagent.schema import FUNCTION, USER, Message
from chatagent.schema.fragment import Fragment
from chatagent.server.app import Service, send_error
from chatagent.server.approvals import checked_decision
from chatagent.server.exposed import checked_arguments, checked_result, unseen_checks
from chatagent.server.mcp_questions import elicited, input_requests, questions_text, waiting_text
from chatagent.server.mcp_sessions import SessionQuota, holder_of
from chatagent.server.openai_api import ChatRequest, RequestError, checked_session_id, client_answers
from chatagent.server.turns import Outcome, reported, start_turn
from chatagent.tools.calling import PreparedCall, aexecute, prepare_call

if TYPE_CHECKING:
    from chatagent.tools.tool import BaseTool

logger = logging.getLogger("chatagent.server")

STDIO_PRINCIPAL = "mcp:local"
ASK = "ask_"
PRINCIPAL_KEY = "chatagent.principal"  # where the HTTP endpoint puts the request's principal in the ASGI scope
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_PROGRESS_CHARS = 200  # a progress notification at least every this many characters of the answer

ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The task or question for the agent."},
        "session_id": {
            "type": "string",
            "description": "Go on with a conversation: 'new' starts one (its id comes back in the result); "
            "without it each call stands alone.",
        },
        "approval": {
            "description": "For a run that paused on a call needing approval: true approves every waiting call, "
            "false denies them (message: the reason), or {call id: true/false}. Needs session_id or approval_token.",
            "anyOf": [{"type": "boolean"}, {"type": "object", "additionalProperties": {"type": "boolean"}}],
        },
        "approval_token": {
            "type": "string",
            "description": "Without session_id: the approval_token of the paused result (repeat its message too).",
        },
        "answers": {
            "type": "object",
            "description": "For a run that paused on questions (pending_questions): {question id: answer}. Needs "
            "session_id.",
        },
    },
    "additionalProperties": False,
}


def tool_name(text: str) -> str:
    """`text` as an MCP tool name (letters, digits, '_' and '-', at most 64 characters)."""
    return _NAME.sub("_", text)[:64] or "agent"


class MCPSurface:
    """The MCP server of a `Service`: its tools (`ask_<agent>`, and the agents' own with `expose_tools`), their
    calls, and the principal of each (`principal` for every call over stdio, else the HTTP request's)."""

    def __init__(
        self, service: Service, *, expose_tools: bool | Iterable[str] = False, principal: str | None = None
    ) -> None:
        self.service = service
        self.principal = principal
        self.on_use: Callable[[str], None] | None = None  # told the MCP session id of each listing and call
        self.asks: dict[str, tuple[str, Agent]] = {}
        self.tools: dict[str, tuple[Agent, BaseTool]] = {}
        for model, agent in service.agents.items():
            self.asks[ASK + tool_name(model)] = (model, agent)
        named = None if isinstance(expose_tools, bool) else set(expose_tools)
        if named is not None and named - set(service.agents):
            raise ValueError(
                f"expose_tools names agents this server does not have: {sorted(named - set(service.agents))}"
            )
        if expose_tools:
            several = len(service.agents) > 1
            for model, agent in service.agents.items():
                if named is not None and model not in named:
                    continue
                unseen = unseen_checks(Plugins(agent.plugins))
                if unseen and named is None:
                    raise ValueError(
                        f"the agent {model!r} has checks that a direct call of its tools cannot reach "
                        f"({', '.join(unseen)}: after_model sees a model's reply, and a direct call has none); expose "
                        f"its tools anyway by naming it: expose_tools=[{model!r}] (--expose-tools {model})"
                    )
                for name, tool in agent.function_map.items():
                    if SERVED_APPROVAL.rule(tool) is True:
                        continue  # always needs a person: reached only through ask_<agent>, which pauses for it
                    exposed = tool_name(f"{model}__{name}" if several else name)
                    if exposed in self.asks or exposed in self.tools:
                        raise ValueError(f"two MCP tools would be named {exposed!r}: rename an agent or a tool")
                    self.tools[exposed] = (agent, tool)

    def server(self) -> Server[Any]:
        """The MCP server (the `mcp` package's low-level one) with these tools."""
        return Server(
            "chatagent",
            description="chatagent agents: ask one with ask_<name>",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    # ---- listing -----------------------------------------------------------------------------------------------

    def listing(self) -> list[Tool]:
        out = []
        for name, (model, agent) in self.asks.items():
            about = agent.description or f"Ask the agent {model!r}."
            out.append(Tool(name=name, description=about, input_schema=ASK_SCHEMA))
        for name, (_, tool) in self.tools.items():
            out.append(Tool(name=name, description=tool.description or name, input_schema=tool.parameters_schema))
        return out

    async def _list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        self._user(ctx)
        return ListToolsResult(tools=self.listing())

    # ---- calling -----------------------------------------------------------------------------------------------

    def _user(self, ctx: Any) -> str:
        if self.principal is not None:
            return self.principal
        request = getattr(ctx, "request", None)
        sid = getattr(request, "headers", {}).get("mcp-session-id")
        if sid is not None and self.on_use is not None:
            self.on_use(sid)
        scope: Mapping[str, Any] = getattr(request, "scope", None) or {}
        user = scope.get(PRINCIPAL_KEY)
        if not isinstance(user, str):  # the HTTP endpoint sets it on every request it lets through
            raise RequestError(401, "no principal for this request", "invalid_api_key")
        return user

    async def _call_tool(self, ctx: Any, params: Any) -> CallToolResult | InputRequiredResult:
        name: str = params.name
        args: dict[str, Any] = dict(params.arguments or {})
        try:
            user = self._user(ctx)
            if name in self.asks:
                model, agent = self.asks[name]
                return await self._ask(ctx, user, model, agent, args, params)
            if name in self.tools:
                agent, tool = self.tools[name]
                return await self._tool(user, agent, tool, args)
            raise RequestError(404, f"no tool {name!r} (this server has {', '.join(sorted(self.asks))[:300]})")
        except RequestError as e:
            return _error(e.message)

    async def _ask(
        self, ctx: Any, user: str, model: str, agent: Agent, args: dict[str, Any], params: Any
    ) -> CallToolResult | InputRequiredResult:
        request, named = ask_request(args)
        answers = elicited(params)
        if answers is not None:  # the client's next round: its answers to the questions the last one asked
            named = checked_session_id(getattr(params, "request_state", None), "requestState")
            if named is None:
                raise RequestError(400, "answers to elicited questions come back with the round's requestState")
            if not answers:  # declined: the conversation stays paused, its questions in the result
                return await self._still_asking(user, model, named)
            request = ChatRequest([Message(USER, "", extra={ANSWERS: answers})], False, False, None, named)
            request.answers = answers
        text, extra = await self._ask_once(ctx, user, model, agent, request, named, len(orjson.dumps(args)))
        questions, sid = extra.get(PENDING_QUESTIONS), extra.get("session_id")
        forms = input_requests(questions) if questions and sid else None
        if forms is not None:  # asked of the client (MCP elicitation); it calls again with the answers
            return InputRequiredResult(input_requests=forms, request_state=sid)
        shown = text
        if extra.get("pending_approval"):
            shown = (text + "\n\n" if text else "") + waiting_text(ASK + tool_name(model), extra)
        elif questions:
            shown = (text + "\n\n" if text else "") + questions_text(ASK + tool_name(model), extra)
        return CallToolResult(content=[TextContent(text=shown)], structured_content={"answer": text, **extra})

    async def _still_asking(self, user: str, model: str, named: str) -> CallToolResult:
        """The result of a round whose questions the client declined: the questions the conversation still waits for."""
        where = self.service.where
        pending = await asyncio.to_thread(lambda: where.store().pending(user, named))
        if pending is None or pending.kind != "question":
            raise RequestError(400, "no question of this conversation waits for an answer")
        extra = {"session_id": named, PENDING_QUESTIONS: pending.waiting}
        text = questions_text(ASK + tool_name(model), extra)
        return CallToolResult(content=[TextContent(text=text)], structured_content={"answer": "", **extra})

    async def _ask_once(
        self, ctx: Any, user: str, model: str, agent: Agent, request: ChatRequest, named: str | None, size: int
    ) -> tuple[str, dict[str, Any]]:
        svc = self.service
        if svc.running >= svc.max_concurrency:
            raise RequestError(429, "the server is busy; retry shortly", "busy")
        svc.running += 1
        try:
            with acting_as(svc.where.trust(user)):
                turn = await start_turn(svc.where, agent, model, request, named, user, size)
                outcome = Outcome()
                progress = Progress(ctx)
                try:
                    async for fragments in turn.run:
                        outcome.add(fragments)
                        await progress.update(fragments)
                except RequestError:
                    raise
                except Exception as e:
                    raise reported(e) from None
                finally:
                    await asyncio.shield(turn.close())  # a cancelled call closes its run all the same
        finally:
            svc.running -= 1
        text, extra, paused = outcome.result()
        turn.reply.mark(extra, paused)
        return text, extra

    async def _tool(self, user: str, agent: Agent, tool: BaseTool, args: dict[str, Any]) -> CallToolResult:
        """One of an agent's own tools, called directly: the agent's input checks on the arguments, the one
        tool-call path (arguments validated), the agent's `before_tool`/`after_tool` hooks, its output checks on
        the result; never when the call needs approval."""
        svc = self.service
        plugins = Plugins(agent.plugins)
        try:
            args = await asyncio.to_thread(checked_arguments, agent, plugins, args)  # a check may block (a judge)
        except Blocked as b:
            return _error(b.message)
        state = f"mcp-tool-{id(args):x}-{asyncio.get_running_loop().time()}"
        call = prepare_call({tool.name: tool}, tool.name, args, kwargs={"session_id": state})
        if not isinstance(call, PreparedCall):
            return _error(str(call.content))
        if needs_approval(tool, call.args, svc.where.trust(user).approval):
            return _error(f"{tool.name} needs a person's approval for these arguments: ask the agent instead")
        try:
            with acting_as(svc.where.trust(user)):
                for p, fn in plugins.each("before_tool"):
                    content = plugins.call(p, "before_tool", fn, agent, call)
                    if content is not None:
                        call.outcome.content, call.ready = content, True
                        break
                outcome = await aexecute(call, None, None)
                for p, fn in plugins.each("after_tool", reverse=True):
                    content = plugins.call(p, "after_tool", fn, agent, outcome)
                    if content is not None:
                        outcome.content = content
            text = await asyncio.to_thread(checked_result, agent, plugins, _content_text(outcome.content))
        except Blocked as b:
            return _error(b.message)
        finally:
            await asyncio.to_thread(agent.close_session, state)
        return CallToolResult(content=[TextContent(text=text)], is_error=outcome.error is not None)


class MCPEndpoint:
    """`/mcp`: the streamable HTTP transport of an `MCPSurface` (an ASGI app). Every request is checked for the API
    key (401) and carries its principal to the tools; an MCP session belongs to the principal that opened it
    (another one's requests for it get 404), and each principal holds a bounded number of them, those never used
    closed soon (`chatagent.server.mcp_sessions`). The transport's sessions run on the serving event loop, started
    with its first request."""

    def __init__(self, surface: MCPSurface, quota: SessionQuota | None = None) -> None:
        self.surface = surface
        self.quota = quota if quota is not None else SessionQuota()
        surface.on_use = self.quota.used
        self.server = surface.server()
        self._managers: dict[asyncio.AbstractEventLoop, tuple[Any, asyncio.Event, asyncio.Task[None]]] = {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        try:
            user = self.surface.service.user_of(headers)
        except RequestError as e:
            await send_error(send, e)
            return
        given = headers.get(b"mcp-session-id")
        sid = given.decode("latin-1") if given is not None else None
        quota = self.quota
        if sid is not None and (quota.owner(sid) or user) != user:
            await send_error(send, RequestError(404, "no such MCP session", "session_not_found"))
            return
        manager = await self._manager()
        holder = holder_of(user, scope)
        if sid is None and scope.get("method") == "POST":  # (it may open a session)
            live: dict[str, Any] = getattr(manager, "_server_instances", {})  # the SDK's open sessions
            for unused in quota.unused():
                quota.closed(unused)
                transport = live.get(unused)
                if transport is not None:
                    await transport.terminate()
            if quota.full(holder, live):
                await send_error(send, RequestError(429, f"you hold {quota.per_principal} MCP sessions, the most this "
                                 "server allows: close one (DELETE /mcp with its mcp-session-id) to open another",
                                 "too_many_sessions"))  # fmt: skip
                return

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start" and sid is None:
                for key, value in message.get("headers", ()):
                    if key.lower() == b"mcp-session-id":
                        quota.opened(value.decode("latin-1"), user, holder)
            await send(message)

        try:
            await manager.handle_request({**scope, PRINCIPAL_KEY: user}, receive, sending)
        finally:
            if sid is not None and scope.get("method") == "DELETE":
                quota.closed(sid)

    async def _manager(self) -> Any:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        loop = asyncio.get_running_loop()
        held = self._managers.get(loop)
        if held is None:
            for gone in [lp for lp in self._managers if lp.is_closed()]:
                del self._managers[gone]
            manager = StreamableHTTPSessionManager(
                app=self.server, security_settings=None,  # Host and Origin: checked for every route by the app
                max_request_body_size=self.surface.service.max_request_bytes,
            )  # fmt: skip
            ready = asyncio.Event()

            async def hold() -> None:
                async with manager.run():
                    ready.set()
                    await asyncio.Event().wait()  # until the serving loop ends

            held = self._managers[loop] = (manager, ready, loop.create_task(hold()))
        await held[1].wait()
        return held[0]


def ask_request(args: Mapping[str, Any]) -> tuple[ChatRequest, str | None]:
    """The chat request an `ask_<agent>` call stands for, and the session it names; RequestError 400 otherwise."""
    unknown = sorted(set(args) - set(ASK_SCHEMA["properties"]))
    if unknown:
        raise RequestError(400, f"unknown argument(s): {', '.join(unknown)[:200]}")
    message = args.get("message", "")
    if not isinstance(message, str):
        raise RequestError(400, "message must be a string")
    named = checked_session_id(args.get("session_id"), "session_id")
    token = args.get("approval_token")
    if token is not None and not isinstance(token, str):
        raise RequestError(400, "approval_token must be the string the paused result gave")
    if "answers" in args:
        answers = client_answers([{"role": USER, "extra": {ANSWERS: args["answers"]}}])
        if named is None:
            raise RequestError(400, "answers need the session_id of the paused result")
        request = ChatRequest([Message(USER, "", extra={ANSWERS: answers})], False, False, None, named)
        request.answers = answers
        return request, named
    if "approval" not in args:
        if not message.strip():
            raise RequestError(400, "message is empty: say what the agent should do")
        if token is not None:
            raise RequestError(400, "an approval_token goes with an approval (true, false or {call id: bool})")
        return ChatRequest([Message(USER, message)], False, False, None, named), named
    decision = checked_decision(args["approval"])
    if named is None and token is None:
        raise RequestError(400, "an approval needs the session_id or the approval_token of the paused result")
    approval = Message(USER, message if named is not None else "", extra={APPROVAL: decision})
    msgs = [approval] if named is not None else [Message(USER, message), approval]
    request = ChatRequest(msgs, False, False, None, named)
    request.decision, request.approval_token = decision, token
    return request, named


class Progress:
    """Progress notifications of one call while its agent works (nothing is sent when the client asked for none):
    one when a message starts (a tool called, its result, the answer) and one every `_PROGRESS_CHARS` of text."""

    __slots__ = ("session", "count", "index", "chars", "told")

    def __init__(self, ctx: Any) -> None:
        self.session = getattr(ctx, "session", None)
        self.count = 0
        self.index = -1
        self.chars = self.told = 0

    async def update(self, fragments: list[Fragment]) -> None:
        if self.session is None:
            return
        said = None
        for f in fragments:
            if f.index != self.index:
                self.index = f.index
                if f.function_call is not None:
                    said = f"calling {f.function_call.name}"
                elif f.role == FUNCTION:
                    said = f"{f.name or 'a tool'} answered"
                else:
                    said = "answering"
            self.chars += len(f.text)
        if said is None and self.chars - self.told < _PROGRESS_CHARS:
            return
        self.count += 1
        self.told = self.chars
        await self.session.report_progress(self.count, None, said or f"{self.chars} characters so far")


async def serve_stdio(service: Service, *, expose_tools: bool | Iterable[str] = False) -> None:
    """Serve `service`'s agents over MCP on this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = MCPSurface(service, expose_tools=expose_tools, principal=STDIO_PRINCIPAL).server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(getattr(i, "text", None) or f"[{getattr(i, 'kind', 'item')}]" for i in content)


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


__all__ = ["ASK", "STDIO_PRINCIPAL", "MCPEndpoint", "MCPSurface", "serve_stdio", "ask_request", "tool_name"]
