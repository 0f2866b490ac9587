"""FnCallAgent: the tool loop. The model asks for tools, the agent runs them, the model continues.

    bot = FnCallAgent(llm=cfg, function_list=[get_weather, 'code_interpreter', {'name': 'my_tool', 'timeout': 5}])
    for rsp in bot.run([{'role': 'user', 'content': 'Weather in Paris?'}]):
        ...

Limits: at most `max_llm_calls` model calls per run; when they are used up while the model still
wants tools, it is asked once more, without tools, for a final answer, and that message carries
`extra['stop_reason'] = 'max_llm_calls'`. Parallel calls run concurrently (up to
`max_parallel_tools` threads) and their results keep the call order; a reply's calls past
`max_calls_per_reply` do not run (the model is told why). The same call (name and
arguments) three times in a row is not run again: the model is told it is looping. A tool with
`return_direct` ends the run with its result as the answer (`stop_reason = 'return_direct'`).

The agent keeps no per-run state on itself, so one instance serves many threads at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import orjson

from chatagent.agent import Agent, current_run, emit_tool_end, emit_tool_start
from chatagent.run.agent_calls import (
    resume_agent_call,
    run_agent_call,
    split_calls,
    transfer,
    unanswered_calls,
)
from chatagent.run.agent_tool import AgentTool
from chatagent.run.handoffs import Handoff, HandoffTool, as_handoffs, holder
from chatagent.run.interrupts import Asked
from chatagent.run.nested import paused_nested
from chatagent.schema import ASSISTANT, FUNCTION, USER, ContentItem, FunctionCall, Message, content_text
from chatagent.schema.fragment import Fragment, fragment
from chatagent.schema.stop_reason import StopReason
from chatagent.tools.calling import PreparedCall, ToolErrorKind, ToolOutcome, call_key, prepare_call

logger = logging.getLogger("chatagent.agent")

MAX_LLM_CALLS = 20  # model calls per run, by default
MAX_CALLS_PER_REPLY = 32  # tool calls one model reply may make, by default; the rest are answered with an error
REPEAT_LIMIT = 3  # the same call this many times in a row is reported as a loop
FINAL_ANSWER_PROMPT = (
    "You have used all the tool calls available for this request. Do not call any more tools: answer now "
    "with what you have found so far, and say briefly what is still missing, if anything."
)
FINAL_ANSWER_PROMPT_ZH = (
    "可用的工具调用次数已经用完。请不要再调用工具，根据目前已有的信息直接回答，如有缺失请简要说明。"
)


class FnCallAgent(Agent):
    """An agent that calls tools (native function calling, or prompt-based where the model lacks it).

    Args:
        function_list: the tools (see `Agent`).
        llm, system_message, name, description: see `Agent`.
        files: paths or URLs the tools see as attached to the conversation (the code interpreter copies
            them into its work directory, `retrieval` searches them).
        max_llm_calls: model calls per run before the model is asked for a final answer (default 20).
        max_parallel_tools: threads for the calls of one reply (default 8).
        max_calls_per_reply: how many calls of one reply run (default 32); each call past it is answered with an
            error saying so, not run (a hostile text of 3,000 calls runs none of the rest).
        handoffs: agents (or `handoff(...)`s) the model may hand the conversation over to with `transfer_to_<name>`
            (see `chatagent.run.handoffs`).
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        files: list[str] | None = None,
        max_llm_calls: int = MAX_LLM_CALLS,
        max_parallel_tools: int = 8,
        handoffs: list[Any] | None = None,
        max_calls_per_reply: int = MAX_CALLS_PER_REPLY,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, **kwargs)
        self._handoffs: list[Handoff] = []
        self.handoffs = handoffs or []
        self.files = [os.fspath(f) for f in files or []]
        if not isinstance(max_llm_calls, int) or max_llm_calls < 1:
            raise ValueError(f"max_llm_calls must be a positive integer, got {max_llm_calls!r}")
        self.max_llm_calls = max_llm_calls
        self.max_parallel_tools = max(1, int(max_parallel_tools))
        if not isinstance(max_calls_per_reply, int) or max_calls_per_reply < 1:
            raise ValueError(f"max_calls_per_reply must be a positive integer, got {max_calls_per_reply!r}")
        self.max_calls_per_reply = max_calls_per_reply
        self.extra_generate_cfg.setdefault("max_calls_per_reply", max_calls_per_reply)  # recovery reads no more

    async_safe = True
    fragment_native = True

    @property
    def functions(self) -> list[dict] | None:
        """The tool schemas sent to the model."""
        return [t.function for t in self.function_map.values()] or None

    @property
    def handoffs(self) -> list[Handoff]:
        """Whom the model may hand the conversation over to (a copy; assign a new list of agents or handoffs)."""
        return list(self._handoffs)

    @handoffs.setter
    def handoffs(self, value: list[Any]) -> None:
        made = as_handoffs(value)
        tools = {n: t for n, t in self.function_map.items() if not isinstance(t, HandoffTool)}
        for h in made:
            if h.tool.name in tools:
                raise ValueError(f"two tools are named {h.tool.name!r}; give handoff(...) another tool_name")
            tools[h.tool.name] = h.tool
        self.function_map, self._handoffs = tools, made

    def _sub_agents(self) -> list[Agent]:
        return [h.agent for h in self._handoffs if isinstance(h.agent, Agent)]

    def _overridden_call(self, name: str, arguments: str, call_id: str | None, kwargs: dict) -> ToolOutcome:
        """A call through an overridden `_call_tool`: in order, here, with Qwen-Agent's arguments (and chatagent's,
        if it takes them)."""
        outcome = ToolOutcome(name, arguments, call_id)
        outcome.content = self._call_tool(name, arguments, call_id=call_id, **kwargs)
        return outcome

    def _past_cap(self, calls: list[Message], callbacks: tuple) -> list[ToolOutcome]:
        """The outcomes of a reply's calls past `max_calls_per_reply`: an error each, the first saying how many the
        reply made (recovery read one past the cap of a longer text: `extra['calls_made']`)."""
        cap, ctx = self.max_calls_per_reply, current_run()
        made = max([len(calls)] + [int((m.extra or {}).get("calls_made") or 0) for m in calls[cap:]])
        outcomes: list[ToolOutcome] = []
        for m in calls[cap:]:
            fc = m.function_call
            assert fc is not None
            call_id = (m.extra or {}).get("function_id")
            if callbacks:
                emit_tool_start(self.name, fc.name, fc.arguments, call_id, ctx)
            outcome = ToolOutcome(fc.name, fc.arguments, call_id)
            outcomes.append(outcome.fail(ToolErrorKind.TOO_MANY_CALLS, too_many_message(made, cap, not outcomes)))
        return outcomes

    def _tool_calls(self, reply: list[Message]) -> list[Message]:
        """The reply's messages that call a tool (as an overridden `_detect_tool` sees them, if there is one)."""
        if "_detect_tool" not in self.overridden_steps:
            return [m for m in reply if m.function_call is not None]
        calls: list[Message] = []
        for m in reply:
            use, name, args, _ = self._detect_tool(m)
            if use:
                args = args if isinstance(args, str) else orjson.dumps(args).decode()
                fc = m.function_call
                calls.append(
                    m
                    if fc and (fc.name, fc.arguments) == (name, args)
                    else m.copy(function_call=FunctionCall(name, args))
                )
        return calls

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        """The tool loop. Returns the whole response (a subclass adding to the answer finds it there)."""
        receiver = holder(self, messages) if self._handoffs and current_run().parent is None else self
        if receiver is not self:  # the conversation was handed over to it on an earlier turn
            return (yield from self._subagent(receiver, messages, lang))
        functions = self.functions
        response: list[Message] = []
        history = CallHistory()
        if paused_nested(messages) is not None:  # an agent run as a tool waited for approval: resume it
            messages, stop = yield from self._resume_nested(messages, history, response, lang, kwargs)
            if stop:
                return response
        for _ in range(self.max_llm_calls):
            reply = yield from self._call_llm(messages + response, functions, start=len(response))
            response.extend(reply)
            calls = self._tool_calls(reply) if self.overridden_steps else [m for m in reply if m.function_call]
            if not calls:
                return response
            outcomes = yield from self._run_calls(calls, history, messages + response, response, lang, kwargs)
            if any(o.error in _STOPPED for o in outcomes):
                return response
            if any(o.return_direct and o.error is None for o in outcomes):
                return (yield from self._direct_answer(outcomes, response))
        return (yield from self._final_answer(messages, response, lang))

    def _direct_answer(self, outcomes: list[ToolOutcome], response: list[Message]) -> Iterator[list[Message]]:
        """The results of the `return_direct` tools among `outcomes` are the answer: shown and appended as it."""
        direct = [o for o in outcomes if o.return_direct and o.error is None]
        text = "\n\n".join(content_text(o.content) if isinstance(o.content, list) else o.content for o in direct)
        extra = {"stop_reason": StopReason.RETURN_DIRECT}
        yield [Fragment.unchecked(ASSISTANT, text, None, None, None, extra, len(response))]
        response.append(Message.unchecked(ASSISTANT, text))
        return response

    def _final_answer(self, messages: list[Message], response: list[Message], lang: str) -> Iterator[list[Message]]:
        """The budget is spent: ask once more, without tools, and mark the answer with why the run stopped.
        Returns the response with the answer."""
        logger.warning(
            "%s used all %d model calls; asking for a final answer", self.name or "agent", self.max_llm_calls
        )
        note = Message.unchecked(USER, FINAL_ANSWER_PROMPT_ZH if lang == "zh" else FINAL_ANSWER_PROMPT)
        start = len(response)
        reply = yield from self._call_llm(messages + response + [note], None, start=start)
        texts = [i for i, m in enumerate(reply) if m.function_call is None]
        if not texts or not any(content_text(reply[i].content).strip() for i in texts):
            extra = {"stop_reason": StopReason.MAX_LLM_CALLS}
            text = f"Stopped after {self.max_llm_calls} model calls without reaching a final answer."
            yield [Fragment.unchecked(ASSISTANT, text, None, None, None, extra, start + len(reply))]
            return response + list(reply) + [Message.unchecked(ASSISTANT, text)]
        yield [
            Fragment.unchecked(
                ASSISTANT, "", None, None, None, {"stop_reason": StopReason.MAX_LLM_CALLS}, start + texts[-1]
            )
        ]
        return response + list(reply[: texts[-1] + 1])

    def _run_calls(self, calls: list[Message], history: CallHistory, context: list[Message], response: list[Message],
                   lang: str, kwargs: dict) -> Iterator[list[Message]]:  # fmt: skip
        """Run one reply's calls (concurrently when there are several); yield and append their results in order."""
        ctx = current_run()
        callbacks = ctx.callbacks if "_call_tool" not in self.overridden_steps else ()  # an override's base tells them
        if self.files:  # the agent's own files, as if the user had attached them
            context = [Message.unchecked(USER, [ContentItem(file=f) for f in self.files])] + context
        tool_kwargs = {**kwargs, "messages": context, "lang": lang}
        prepared: list[PreparedCall | ToolOutcome] = []
        counts, cache = ctx.tool_calls, self.tool_cache
        for m in calls[: self.max_calls_per_reply]:
            fc = m.function_call
            assert fc is not None, "_run_calls is given the reply's messages that call a tool"
            call_id = (m.extra or {}).get("function_id")
            if callbacks:
                emit_tool_start(self.name, fc.name, fc.arguments, call_id, ctx)
            if history.repeated(fc.name, fc.arguments):
                outcome = ToolOutcome(fc.name, fc.arguments, call_id)
                prepared.append(outcome.fail(ToolErrorKind.LOOP, loop_message(fc.name)))
                continue
            if "_call_tool" in self.overridden_steps:
                prepared.append(self._overridden_call(fc.name, fc.arguments, call_id, tool_kwargs))
                continue
            prepared.append(prepare_call(self.function_map, fc.name, fc.arguments, call_id=call_id, counts=counts,
                                         cache=cache, kwargs=tool_kwargs))  # fmt: skip
        if len(calls) > self.max_calls_per_reply:  # the calls past the cap: answered, not run
            prepared += self._past_cap(calls, callbacks)
        shown = len(response)  # the reply's results go after it
        steps = split_calls(prepared)  # agents run as tools and a transfer come after the other calls
        pending = [p for p in steps.tools if isinstance(p, PreparedCall)]
        handle = (yield from self._run_tools(pending, self.max_parallel_tools)) if pending else None
        outcomes: list[ToolOutcome] = []
        waited = 0
        for p in steps.tools + steps.agents + steps.transfer:
            if isinstance(p, ToolOutcome):
                outcome = p
            elif isinstance(p.tool, AgentTool):
                outcome = yield from run_agent_call(p, response, lang)
            elif isinstance(p.tool, HandoffTool):
                outcome = p.outcome
            else:
                outcome = yield from self._tool_result(handle, waited)
                waited += 1
            if callbacks:
                emit_tool_end(self.name, outcome, ctx)
            outcomes.append(outcome)
            if outcome.error == ToolErrorKind.PAUSED:
                return outcomes
            if (
                outcome.error == ToolErrorKind.INTERRUPTED
            ):  # it asked a person: no result yet (the run pauses after the others)
                continue
            if isinstance(p, PreparedCall) and isinstance(p.tool, HandoffTool):
                yield from transfer(p.tool.handoff, outcome, context + response[shown:], response, lang)
                return outcomes
            extra = {"function_id": outcome.call_id} if outcome.call_id is not None else None
            msg = Message.unchecked(FUNCTION, self._shown_result(outcome, lang), outcome.name, None, None, extra)
            yield [fragment(msg, len(response))]
            response.append(msg)
        asked = [o.content for o in outcomes if o.error == ToolErrorKind.INTERRUPTED]
        if asked:  # a call asked a person something: the run pauses here (chatagent.run.interrupts)
            raise Asked(asked, len(response))
        ctx.check_deadline()
        return outcomes

    def _resume_nested(
        self, messages: list[Message], history: CallHistory, response: list[Message], lang: str, kwargs: dict
    ) -> Iterator[list[Message]]:
        """Resume the agent run as a tool that paused for approval, then the reply's calls still unanswered;
        returns (the conversation to go on from, whether the run stops again)."""
        conversation = messages[:-1]
        outcome = yield from resume_agent_call(self.function_map, messages, response, lang)
        if outcome.error == ToolErrorKind.PAUSED:
            return conversation, True
        unanswered = unanswered_calls(conversation + response)
        if unanswered:
            outcomes = yield from self._run_calls(unanswered, history, conversation + response, response, lang, kwargs)
            if any(o.error in _STOPPED for o in outcomes):
                return conversation, True
        return conversation, False

    def _shown_result(self, outcome: ToolOutcome, lang: str) -> str | list:
        """The content of the function message for a call's outcome (the tool's result; subclasses may
        put it elsewhere, as VirtualMemoryAgent does with retrieved excerpts)."""
        return outcome.content


_STOPPED = (ToolErrorKind.PAUSED, ToolErrorKind.HANDED_OVER)  # a call after which this agent's run ends


class CallHistory:
    """The run's calls in order, to notice the same call repeated."""

    __slots__ = ("last", "count")

    def __init__(self) -> None:
        self.last: str | None = None
        self.count = 0

    def repeated(self, name: str, arguments: str) -> bool:
        """Record a call; True when it is the REPEAT_LIMIT-th identical call in a row."""
        key = _canonical(name, arguments)
        if key == self.last:
            self.count += 1
        else:
            self.last, self.count = key, 1
        return self.count >= REPEAT_LIMIT


def _canonical(name: str, arguments: str) -> str:
    """(name, arguments) with key order and spacing made canonical when the arguments are strict JSON."""
    try:
        args = orjson.loads(arguments)
    except (ValueError, RecursionError):
        args = None
    key = call_key(name, args) if isinstance(args, dict) else None
    return key if key is not None else name + "\x00" + arguments.strip()


def loop_message(name: str) -> str:
    return (
        f"Error: you called {name} with the same arguments {REPEAT_LIMIT} times in a row; it was not run again "
        "because the result will not change. Use the results you already have, try different arguments, "
        "or answer the user."
    )


def too_many_message(made: int, cap: int, first: bool = True) -> str:
    if not first:
        return f"Error: not run (more than {cap} tool calls in one reply)."
    return (
        f"Error: you made {made} tool calls in one reply; more than {cap} tool calls in one reply are not run, so "
        f"the first {cap} ran and this one and the {made - cap - 1} after it did not. Make at most {cap} at a time."
    )


__all__ = ["CallHistory", "FnCallAgent", "loop_message", "too_many_message"]
