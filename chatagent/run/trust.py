"""Who a run acts for, what in it waits for a person, where it may connect, and where the text its models read came
from: properties of the run, never decided by a feature.

    with acting_as(Trust(principal="client:alice", shared=True, approval=ApprovalPolicy(code=True),
                         egress=URLPolicy())):
        run = agent.arun(messages)         # and every run nested in it, every tool call, memory read or write,
                                           # crew task, flow step and outbound connection it makes

A surface that runs agents for someone (`chatagent serve` and its MCP and A2A endpoints, the web UI) says whom with
`acting_as`; the code that works for a run reads it from the run's context (`current_run().trust`), or outside a run
from `chatagent.run.context.current_trust()`:

- `principal`: whose state the run reaches (long-term memory, flows); None: the machine's own user (your code, the
  command line). On a `shared` surface a run without a principal (a client of `serve` without keys) reaches no
  one's: per-principal state is kept per conversation the server issued, or not at all; never the local user's.
- `approval`: what waits for a person besides each tool's own `requires_approval` (`chatagent.run.approval`).
- `egress`: the URL policy every outbound connection of the run is held to (`chatagent.utils.url_fetch`); None: any.

`Provenance` is the fourth property: the untrusted sources (tools, files, remote agents, memories, earlier tasks)
whose text the models of a run have read, shared by the runs nested in it, so that what the run writes (a memory)
keeps the label of what it may have been drawn from.

A `RunContext` takes all four from the run it is part of, else from the run whose code is executing (a tool that
starts another agent's run), else from `acting_as` (`chatagent.run.context`): a new kind of nested run inherits them
without doing anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple

from chatagent.llm.prepare import marked_sources
from chatagent.schema import Message, content_text
from chatagent.utils.url_fetch import URLPolicy, public_urls_only, url_policy


class ApprovalPolicy(NamedTuple):
    """A run's rule for what waits for a person, beyond each tool's own `requires_approval` (a property of the run,
    `RunContext.trust.approval`, which every run nested in it inherits: see `chatagent.run.trust`).

    `code=True`: a tool that runs code the model wrote (`BaseTool.runs_code`, the code interpreter) asks before each
    call unless its own `requires_approval` was set (what `chatagent serve`, MCP, A2A and the web UI run under: the
    text a model reads there can tell it what to run)."""

    code: bool = False

    def rule(self, tool: Any) -> Any:
        """The `requires_approval` of `tool` under this policy: its own when it was set, else True for a tool that
        runs code under `code=True`, else the class's default."""
        if self.code and getattr(tool, "runs_code", False) and "requires_approval" not in vars(tool):
            return True
        return getattr(tool, "requires_approval", False)


TOOLS_OWN_RULES = ApprovalPolicy()  # each tool's own requires_approval, nothing more (the machine's own user)


class Trust(NamedTuple):
    """Who a run acts for and what it may do (see the module docstring)."""

    principal: str | None = None
    shared: bool = False
    approval: ApprovalPolicy = TOOLS_OWN_RULES
    egress: URLPolicy | None = None


LOCAL = Trust()  # the machine's own user: its own state, each tool's own approval rule, any URL (unless in a
# `public_urls_only` block: `surface_trust`)
SERVED_APPROVAL = ApprovalPolicy(code=True)  # what a run a remote party asked for waits for a person for
_TRUST: ContextVar[Trust | None] = ContextVar("chatagent_trust", default=None)


def served(principal: str | None, egress: URLPolicy | None) -> Trust:
    """The trust of a run a remote party asked for: its principal (None: one that names no one, as every client of a
    server without keys), code run only with approval, outbound connections under `egress`."""
    return Trust(principal, True, SERVED_APPROVAL, egress)


@contextlib.contextmanager
def acting_as(trust: Trust) -> Generator[Trust]:
    """Within this block (and the tasks and worker threads it starts), runs act as `trust` says, and URLs are held to
    its egress policy (`chatagent.utils.url_fetch.public_urls_only`)."""
    token = _TRUST.set(trust)
    try:
        if trust.egress is None:
            yield trust
        else:
            with public_urls_only(trust.egress):
                yield trust
    finally:
        _TRUST.reset(token)


def surface_trust() -> Trust:
    """The trust a surface set with `acting_as`, else the machine's own user's (under the URL policy in force)."""
    trust = _TRUST.get()
    return trust if trust is not None else LOCAL if (egress := url_policy()) is None else Trust(egress=egress)


class Provenance:
    """The untrusted sources whose text the models of a run (and of the runs nested in it) have read: a tool's
    results ('tool fetch_page'), files' excerpts ('files'), memories, earlier tasks' outputs, as each was marked
    (`chatagent.llm.prepare.untrusted`). What the run writes may have been drawn from any of them."""

    __slots__ = ("sources", "_seen", "_unread")
    sources: dict[str, None]
    _seen: dict[int, object]
    _unread: list[Sequence[Any]]

    def __init__(self) -> None:
        # the sources in the order first read; the messages read already, by id (held, so that no id is reused); the
        # model calls' inputs not looked at yet (they are when a label is asked for: most runs never ask)
        self.sources, self._seen, self._unread = {}, {}, []

    def read(self, messages: Sequence[Message | dict[str, Any]]) -> None:
        """Note a model call's input (its marked text's sources are found when `label` is asked for)."""
        self._unread.append(messages)

    def add(self, sources: Sequence[str]) -> None:
        """Note sources read through something that stands for their text (a summary of the turns that held it)."""
        self.sources.update(dict.fromkeys(sources))

    def label(self) -> list[str]:
        """The sources read so far, in order (empty: only the principal's own words and the model's)."""
        unread, self._unread = self._unread, []
        for messages in unread:
            for m in messages:
                if id(m) not in self._seen:
                    self._seen[id(m)] = m
                    text = m.text if type(m) is Message else content_text(m.get("content") or "")
                    if "<untrusted-data" in text:
                        self.sources.update(dict.fromkeys(marked_sources(text)))
        return list(self.sources)


__all__ = ["LOCAL", "SERVED_APPROVAL", "Provenance", "Trust", "acting_as", "served", "surface_trust"]
