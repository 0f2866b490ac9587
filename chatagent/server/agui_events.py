"""chatagent's typed run events (`chatagent.run.event_stream.RunEvent`) as AG-UI events, for
`chatagent.server.agui`, as the JSON the protocol's schema says (the tests check every event against the
`ag-ui-protocol` package's models).

One `AGUIEvents` per AG-UI run: `started()` opens it (RUN_STARTED), `map(event)` turns each run event into what
AG-UI says of it, `finished()` / `failed()` close it (RUN_FINISHED, RUN_ERROR). The mapping:

- text and reasoning deltas: TEXT_MESSAGE_START/CONTENT/END, REASONING_START, REASONING_MESSAGE_START/CONTENT/END,
  REASONING_END (a message per model reply, its id made of the run's and the reply's);
- a tool call's arguments as the model streams them: TOOL_CALL_START, TOOL_CALL_ARGS (one per piece),
  TOOL_CALL_END when the model's reply ends; the tool's result: TOOL_CALL_RESULT (not for the client's own tools).
  A retried model stream sends only what goes past the arguments already sent; when it starts a call's arguments
  again differently (`tool_call_restart`), the call sent so far ends and the new arguments go under a new
  TOOL_CALL_START (its id `<the call's id>-<n>`, the id the call's result, the run's snapshot, its interrupt and
  `pendingToolCallIds` then give it, and under which a client's result answers it), so that each call's
  TOOL_CALL_ARGS add up to its arguments;
- a nested run (an agent called as a tool, a handoff's receiver) and a task's, crew's or flow's step:
  STEP_STARTED/STEP_FINISHED (the step's name: the nested agent's, or the step's; ids in `metadata`);
- a handoff, a retrieval, a memory recall or store, progress: CUSTOM events named `chatagent.<type>`;
- the thread as the server keeps it, once the run ended: MESSAGES_SNAPSHOT (`messages_snapshot`);
- what the run waits for: a tool's question (`chatagent.ask_user`) or a call waiting for approval ends the run
  with RUN_FINISHED's interrupt outcome (AG-UI 1.0's interrupts: one per question, its `responseSchema` the
  question's schema); a call of a client's tool ends it with the success outcome naming the call in
  `pendingToolCallIds`, for the client to run.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from chatagent.run.approval import APPROVAL
from chatagent.run.event_stream import RunEvent
from chatagent.run.interrupts import ANSWERS
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, Message

#: the run events that become CUSTOM events (named `chatagent.<type>`)
CUSTOM = ("handoff", "retrieval", "memory", "progress")
INTERRUPTED = "interrupted"  # a tool_end's error when its tool asked a person (ask_user)
Event = dict[str, Any]  # an AG-UI event, as its JSON says it


class AGUIEvents:
    """The AG-UI events of one run (see the module docstring). `frontend`: the names of the client's tools."""

    def __init__(self, thread_id: str, run_id: str, frontend: frozenset[str]) -> None:
        self.thread_id, self.run_id, self.frontend = thread_id, run_id, frontend
        self.text: str | None = None  # the open text message's id
        self.reasoning: str | None = None  # the open reasoning message's id
        self.calls: dict[tuple[str | None, int], str] = {}  # the calls whose arguments stream: (run, index) -> id
        self.restarted: dict[str, str] = {}  # a call's id -> the id it went on under after a retry restarted it
        self.client_calls: set[str] = set()  # the calls of the client's tools in this run
        self.interrupts: list[dict[str, Any]] = []
        self.pending_calls: list[str] = []  # client tool calls left for the client to run
        self.usage: dict[str, Any] | None = None

    def started(self) -> list[Event]:
        return [_ev("RUN_STARTED", threadId=self.thread_id, runId=self.run_id)]

    def map(self, ev: RunEvent) -> list[Event]:
        """The AG-UI events of `ev`, in order."""
        kind, data = ev.type, ev.data
        if kind == "text_delta":
            return self._text(ev, data["text"])
        if kind == "reasoning_delta":
            return self._reasoning(ev, data["text"])
        out = self._close_text()
        if kind == "tool_call_delta":
            out += self._call_piece(ev)
        elif kind == "tool_call_restart":
            out += self._restart(ev)
        elif kind == "model_end":
            out += self._close_calls()
        elif kind == "tool_start" and data["tool"] in self.frontend and data["call_id"]:
            self.client_calls.add(data["call_id"])
        elif (
            kind == "tool_end"
            and data["call_id"]
            and data["call_id"] not in self.client_calls
            and (data["error"] != INTERRUPTED)
        ):
            content = data["result"] if data["error"] is None else data["error"]
            cid = self.restarted.get(str(data["call_id"]), str(data["call_id"]))
            out.append(_ev("TOOL_CALL_RESULT", ev, messageId=f"result-{cid}", toolCallId=cid, content=_text_of(content),
                           role="tool"))  # fmt: skip
        elif kind in ("run_start", "run_end") and ev.parent_id is not None:  # a nested run: a step of this one
            step = "STEP_STARTED" if kind == "run_start" else "STEP_FINISHED"
            meta = {"run_id": ev.run_id, "parent_id": ev.parent_id}
            out.append(_ev(step, ev, stepName=ev.agent or "agent", metadata=meta))
        elif kind == "run_end":
            self.usage = data.get("usage")
        elif kind in ("step_start", "step_end"):
            step = "STEP_STARTED" if kind == "step_start" else "STEP_FINISHED"
            name = str(data.get("name") or data.get("step") or "step")
            out.append(_ev(step, ev, stepName=name, metadata={"step": data.get("step")}))
        elif kind == "interrupt":
            self._waiting(data["questions"])
        elif kind in CUSTOM:
            out.append(_ev("CUSTOM", ev, name=f"chatagent.{kind}", value=_jsonable(data)))
        return out

    def finished(self) -> list[Event]:
        """What closes a run that did not fail: the open messages, then RUN_FINISHED with its outcome and usage."""
        out = self._close_text() + self._close_calls()
        if self.interrupts:
            outcome: dict[str, Any] = {"type": "interrupt", "interrupts": self.interrupts}
        else:
            outcome = {"type": "success"} | ({"pendingToolCallIds": self.pending_calls} if self.pending_calls else {})
        finished = _ev("RUN_FINISHED", threadId=self.thread_id, runId=self.run_id, outcome=outcome)
        if self.usage:
            given, made = int(self.usage.get("prompt_tokens") or 0), int(self.usage.get("completion_tokens") or 0)
            finished["usage"] = [{"inputTokens": given, "outputTokens": made, "totalTokens": given + made}]
        out.append(finished)
        return out

    def failed(self, message: str, code: str | None) -> list[Event]:
        """What closes a run that failed: the open messages, then RUN_ERROR (`message` is for the client)."""
        return self._close_text() + self._close_calls() + [_ev("RUN_ERROR", message=message, code=code)]

    # ---- parts -----------------------------------------------------------------------------------------------------

    def _text(self, ev: RunEvent, delta: str) -> list[Event]:
        mid = f"{ev.run_id}-{ev.data['index']}"
        if self.text == mid and self.reasoning is None and not self.calls:  # the usual case: the message goes on
            return [
                {"type": "TEXT_MESSAGE_CONTENT", "timestamp": int(ev.time * 1000), "messageId": mid, "delta": delta}
            ]
        out = self._close_reasoning() + self._close_calls()
        if self.text != mid:
            out += self._close_text()
            out.append(_ev("TEXT_MESSAGE_START", ev, messageId=mid, role="assistant"))
            self.text = mid
        out.append(_ev("TEXT_MESSAGE_CONTENT", ev, messageId=mid, delta=delta))
        return out

    def _reasoning(self, ev: RunEvent, delta: str) -> list[Event]:
        mid = f"{ev.run_id}-{ev.data['index']}-reasoning"
        out: list[Event] = []
        if self.reasoning != mid:
            out += self._close_reasoning()
            out += [_ev("REASONING_START", ev, messageId=mid),
                    _ev("REASONING_MESSAGE_START", ev, messageId=mid, role="reasoning")]  # fmt: skip
            self.reasoning = mid
        out.append(_ev("REASONING_MESSAGE_CONTENT", ev, messageId=mid, delta=delta))
        return out

    def _call_piece(self, ev: RunEvent) -> list[Event]:
        data = ev.data
        key = (ev.run_id, int(data["index"]))
        out: list[Event] = self._close_reasoning()
        cid = self.calls.get(key)
        if cid is None:
            cid = str(data.get("call_id") or f"call-{uuid.uuid4().hex}")
            self.calls[key] = cid
            out.append(_ev("TOOL_CALL_START", ev, toolCallId=cid, toolCallName=str(data.get("name") or "")))
        if data.get("arguments"):
            out.append(_ev("TOOL_CALL_ARGS", ev, toolCallId=cid, delta=data["arguments"]))
        return out

    def _restart(self, ev: RunEvent) -> list[Event]:
        """A retry started a call's arguments again, differently: the call sent so far ends; the new one (if any)
        starts under an id of its own with the deltas that follow."""
        data = ev.data
        key = (ev.run_id, int(data["index"]))
        old = self.calls.pop(key, None)
        if old is None:
            return []
        out = [_ev("TOOL_CALL_END", ev, toolCallId=old)]
        if data.get("name"):
            given = str(data.get("call_id") or old)
            cid = f"{given}-{len(self.restarted) + 2}"
            self.restarted[given] = self.calls[key] = cid
            out.append(_ev("TOOL_CALL_START", ev, toolCallId=cid, toolCallName=str(data["name"])))
        return out

    def _waiting(self, questions: list[dict[str, Any]]) -> None:
        for q in questions:
            given = q.get("call_id")
            cid = self.restarted.get(given, given) if isinstance(given, str) else given  # the id the client knows
            if isinstance(cid, str) and given in self.client_calls:
                self.pending_calls.append(cid)  # the client runs it: its result answers the question
            elif q.get("kind") == "approval":
                self.interrupts.append({"id": q["id"], "reason": "tool_approval", "toolCallId": q["id"],
                                        "message": f"Run {q['name']} with {q['arguments']}?",
                                        "responseSchema": {"type": "boolean"}})  # fmt: skip
            else:
                schema = q.get("schema") or {"type": "string"}
                self.interrupts.append({"id": q["id"], "reason": "input_required", "message": q.get("question"),
                                        "toolCallId": cid, "responseSchema": schema})  # fmt: skip

    def _close_text(self) -> list[Event]:
        out: list[Event] = self._close_reasoning()
        if self.text is not None:
            out.append(_ev("TEXT_MESSAGE_END", messageId=self.text))
            self.text = None
        return out

    def _close_reasoning(self) -> list[Event]:
        if self.reasoning is None:
            return []
        mid, self.reasoning = self.reasoning, None
        return [_ev("REASONING_MESSAGE_END", messageId=mid), _ev("REASONING_END", messageId=mid)]

    def _close_calls(self) -> list[Event]:
        out: list[Event] = [_ev("TOOL_CALL_END", toolCallId=cid) for cid in self.calls.values()]
        self.calls.clear()
        return out


def messages_snapshot(messages: list[Message], renamed: dict[str, str] | None = None) -> Event:
    """MESSAGES_SNAPSHOT of a thread's stored conversation: its user, system and assistant messages (a reply's calls
    as the assistant message's `toolCalls`) and tool results, ids by position, a call's id the one the run's events
    gave it (`renamed`: `AGUIEvents.restarted`); what the server keeps to pause and resume (questions waiting,
    answers, approvals) is left out."""
    renamed = renamed or {}
    out: list[dict[str, Any]] = []
    prev: str | None = None
    for n, m in enumerate(messages):
        extra, mid = m.extra or {}, f"message-{n}"
        if m.role in (SYSTEM, USER) and not (ANSWERS in extra or APPROVAL in extra):
            out.append({"id": mid, "role": m.role, "content": m.text})
        elif m.role == ASSISTANT and m.function_call is not None:
            fc = m.function_call
            cid = str(extra.get("function_id") or mid)
            call = {"id": renamed.get(cid, cid), "type": "function",
                    "function": {"name": fc.name, "arguments": fc.arguments}}  # fmt: skip
            if prev == ASSISTANT and out and out[-1]["role"] == "assistant":  # the same reply's text or calls
                out[-1].setdefault("toolCalls", []).append(call)
            else:
                out.append({"id": mid, "role": "assistant", "toolCalls": [call]})
        elif m.role == ASSISTANT and m.text:
            out.append({"id": mid, "role": "assistant", "content": m.text})
        elif m.role == FUNCTION:
            cid = str(extra.get("function_id") or "")
            out.append({"id": mid, "role": "tool", "toolCallId": renamed.get(cid, cid), "content": m.text})
        prev = m.role
    return _ev("MESSAGES_SNAPSHOT", messages=out)


def _ev(kind: str, at: RunEvent | None = None, **fields: Any) -> Event:
    """An AG-UI event of type `kind` (its fields by their wire names; None ones left out, as the protocol does),
    stamped with the time of `at` (else now), in milliseconds."""
    out: Event = {"type": kind, "timestamp": int((at.time if at is not None else time.time()) * 1000)}
    out.update((k, v) for k, v in fields.items() if v is not None)
    return out


def encoded(events: list[Event]) -> bytes:
    """AG-UI events as server-sent events (`data: <json>` each)."""
    if len(events) == 1:  # the usual case: a piece of text
        return b"data: " + orjson.dumps(events[0]) + b"\n\n"
    return b"".join([b"data: " + orjson.dumps(e) + b"\n\n" for e in events])


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def _jsonable(data: dict[str, Any]) -> Any:
    return orjson.loads(orjson.dumps(data, default=str))


__all__ = ["AGUIEvents", "encoded", "messages_snapshot"]
