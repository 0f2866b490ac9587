"""Plugins: code that takes part in every run of an agent and may change it.

    class Redact(Plugin):
        def before_run(self, agent, messages):
            return [m.copy(content=SECRET.sub('[secret]', m.text)) if m.role == 'user' else m for m in messages]

    bot = FnCallAgent(llm=cfg, function_list=[...], plugins=[Redact(), TextPolicy(max_chars=2000)])

A plugin overrides the hooks it needs (the others cost nothing):

    before_run(agent, messages) -> messages | None      the conversation the agent will answer (may rewrite it)
    check_input(agent, messages) -> None                 a check of what the client supplied (every message, then
                                                         what the agent adds to the model's input in user and
                                                         system messages), in a thread beside the answer (or
                                                         before the model is called, `concurrent = False`):
                                                         nothing is shown and no tool runs until it returns
    before_model(agent, call) -> None                    before each model call: `call.messages`, `call.functions`
                                                         and `call.cfg` may be changed
    after_model(agent, call, reply) -> None              after each model call (observe, or raise Blocked)
    before_tool(agent, call) -> content | None           before a tool runs: `call.tool`, `call.args` (may be
                                                         changed); a return value is the result, the tool not run
    after_tool(agent, outcome) -> content | None         after a tool ran: a return value replaces its result
    check_text(agent, text) -> text | None               a sentence or paragraph of the answer (or reasoning)
                                                         before it is shown: may rewrite it, or raise Blocked
    after_run(agent, response) -> response | None        the final response (may rewrite it, or raise Retry)

`after_model`, `after_run` and `check_text` are output checks: while a run has any, the text and reasoning of its
answer are held back until they pass (`chatagent.run.holding`), so that no caller sees text a check blocks or
rewrites. `releases` says how much a plugin's checks let out before the run's end: None (the default: nothing, the
text goes out once `after_run` passed), or 'sentence' / 'paragraph' (each one once `check_text` passed it; the
plugin's `after_run`, if any, must then leave shown text as it is and not retry).

`before_*` hooks run in the order of `plugins`, `after_*` hooks in reverse order (the first plugin wraps the
others). Any hook may raise `Blocked(message)`: the run stops there, and its last yield carries `message` as the
answer (replacing the answer shown so far, if any) with `extra['blocked_by']` naming the plugin. `after_run` may
raise `Retry(feedback)`: the agent runs again on the conversation, its response, and `feedback` as a user message;
the new answer replaces the rejected one (`current_run().attempt` counts the retries).

A hook that raises anything else fails the run with a `PluginError` naming the plugin and the hook, unless the
plugin sets `on_error = 'ignore'` (then it is logged and the run goes on as if the hook had returned None).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from chatagent.errors import ChatAgentError, LoopExit
from chatagent.run.context import CURRENT

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable
    from chatagent.run.requests import ModelCall
    from chatagent.schema import Message
    from chatagent.tools.calling import PreparedCall, ToolOutcome

logger = logging.getLogger("chatagent.plugins")

HOOKS = (
    "before_run", "check_input", "before_model", "after_model", "before_tool", "after_tool", "check_text", "after_run",
)  # fmt: skip
#: the hooks that see text once it is made: a run that has them holds its text back until they pass
OUTPUT_HOOKS = ("after_model", "check_text", "after_run")
BLOCKED_BY = "blocked_by"
BLOCKED_REASON = "blocked_reason"


class PluginError(ChatAgentError):
    """A plugin failed: `plugin` is its name, `hook` the hook that raised (the cause is chained)."""

    def __init__(self, plugin: str, hook: str, error: BaseException) -> None:
        detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        super().__init__(f"plugin {plugin!r} failed in {hook}: {detail}")
        self.plugin, self.hook = plugin, hook


class Blocked(LoopExit):  # noqa: N818 (a control signal a plugin raises, like StopIteration)
    """Raised by a hook to stop the run: `message` becomes the run's answer, `reason` goes to the log and to
    `extra['blocked_reason']` (keep it free of what was blocked)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(reason or message)
        self.message = message
        self.reason = reason
        self.plugin: str | None = None  # filled in by the run


class Retry(LoopExit):  # noqa: N818
    """Raised by `after_run` to run the agent again with `feedback` (a user message) after its response."""

    def __init__(self, feedback: str) -> None:
        super().__init__(feedback)
        self.feedback = feedback


class Plugin:
    """Base of plugins: override the hooks you need (see the module docstring); the others are skipped.

    `name` (default: the class name) is what `extra['blocked_by']` and errors say. `on_error`: 'raise' (a hook
    that fails fails the run with a PluginError) or 'ignore' (it is logged and skipped).
    """

    name: str = ""
    on_error: str = "raise"
    #: how much text its output checks let out before the run's end: None, 'sentence' or 'paragraph'
    releases: str | None = None
    #: whether its `check_input` runs in a thread beside the answer (else in place, before the model is called)
    concurrent: bool = True
    #: whether its output checks judge what the answer says (block, rewrite: a guardrail) rather than only its form
    #: (structured output's validation): what a plugin derives from the model's text as it streams (the partial
    #: object, `extra['parsed']`) then follows only text those checks have let out (`chatagent.run.holding`)
    checks_content: bool = True

    def __init__(self, *, name: str | None = None, on_error: str | None = None) -> None:
        if name is not None:
            self.name = name
        if on_error is not None:
            self.on_error = on_error
        if self.on_error not in ("raise", "ignore"):
            raise ValueError(f"on_error must be 'raise' or 'ignore', got {self.on_error!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={plugin_name(self)!r})"

    def before_run(self, agent: Runnable, messages: list[Message]) -> list[Message] | None:
        """The conversation the agent will answer (a new list), or None to leave it as it is."""

    def check_input(self, agent: Runnable, messages: list[Message]) -> None:
        """Check what the client supplied (see the module docstring), beside the answer; raise Blocked to stop the
        run."""

    def before_model(self, agent: Runnable, call: ModelCall) -> None:
        """Before a model call: `call.messages`, `call.functions`, `call.cfg` may be replaced or changed."""

    def after_model(self, agent: Runnable, call: ModelCall, reply: list[Message]) -> None:
        """After a model call, with its complete reply (its text not shown yet: see `releases`): observe it, or
        raise Blocked."""

    def before_tool(self, agent: Runnable, call: PreparedCall) -> Any:
        """Before a tool runs (`call.tool`, `call.args`, `call.outcome.call_id`); return a result to skip the tool."""

    def after_tool(self, agent: Runnable, outcome: ToolOutcome) -> Any:
        """After a tool ran: return new content for its result, or None to keep `outcome.content`."""

    def check_text(self, agent: Runnable, text: str) -> str | None:
        """A piece of the answer's text or reasoning (a sentence or a paragraph, as `releases` says) before it is
        shown: the text to show instead, or None to show it as it is; raise Blocked to stop the run."""

    def after_run(self, agent: Runnable, response: list[Message]) -> list[Message] | None:
        """The final response (a new list, at least as long), or None to keep it; may raise Retry or Blocked."""


_DO_NOTHING = {h: getattr(Plugin, h) for h in HOOKS}  # the base's hooks, which a plugin that needs them overrides


def plugin_name(plugin: Any) -> str:
    return getattr(plugin, "name", "") or type(plugin).__name__


#: A plugin's implementation of one hook, as found on the plugin object.
Hook = Callable[..., Any]


class Plugins:
    """An ordered set of plugins, with each hook's implementations found once (a hook nobody overrides costs
    nothing). `call` runs one hook: Blocked gets the plugin's name, other failures become PluginError."""

    __slots__ = ("plugins", "hooks")

    def __init__(self, plugins: Iterable[Any]) -> None:
        self.plugins = tuple(plugins)
        self.hooks: dict[str, list[tuple[Any, Hook]]] = {h: [] for h in HOOKS}
        for p in self.plugins:
            cls, found = p.__class__, False
            for h in HOOKS:
                if getattr(cls, h, None) is _DO_NOTHING[h]:  # Plugin's own: never called
                    continue
                fn: Any = getattr(p, h, None)
                if callable(fn):
                    self.hooks[h].append((p, fn))
                    found = True
            if isinstance(p, (type, str)) or not (found or any(callable(getattr(p, h, None)) for h in HOOKS)):
                raise TypeError(f"a plugin is an object with hooks ({', '.join(HOOKS)}), got {p!r:.80}")

    def __bool__(self) -> bool:
        return bool(self.plugins)

    def __add__(self, other: Iterable[Any]) -> Plugins:
        return Plugins(self.plugins + tuple(other))

    def each(self, hook: str, reverse: bool = False) -> list[tuple[Any, Hook]]:
        found = self.hooks[hook]
        return found[::-1] if reverse else found

    @staticmethod
    def call(plugin: Any, hook: str, fn: Hook, *args: Any) -> Any:
        """`fn(*args)`: Blocked gets the plugin's name; Retry passes; other errors as `plugin.on_error` says. One
        of the ASKING_HOOKS may ask a person something (`chatagent.ask_user`: its PendingQuestion passes, and the
        run pauses), as the call it is about (before_tool, after_tool) or as the hook (`asking_as`)."""
        ctx = CURRENT.get() if hook in ASKING_HOOKS else None  # (a context attribute: no context variable set)
        if ctx is not None:
            before, ctx.asking = ctx.asking, (hook, args)
        try:
            return fn(*args)
        except Blocked as b:
            b.plugin = b.plugin or plugin_name(plugin)
            raise
        except Retry:
            raise
        except Exception as e:
            failed(plugin, hook, e)
            return None
        finally:
            if ctx is not None:
                ctx.asking = before  # pyright: ignore[reportPossiblyUnboundVariable]


ASKING_HOOKS = frozenset(("before_run", "before_model", "after_model", "before_tool", "after_tool", "after_run"))


def asking_as(hook: str, args: tuple[Any, ...]) -> str:
    """The id a hook's questions are asked under: the tool call's for before_tool and after_tool (the call runs
    again when answered), else the hook's and its agent's."""
    about = args[1] if len(args) > 1 else None
    outcome = getattr(about, "outcome", about)  # before_tool: a PreparedCall; after_tool: its ToolOutcome
    cid = getattr(outcome, "call_id", None) if hook in ("before_tool", "after_tool") else None
    return cid if isinstance(cid, str) else f"{hook}:{getattr(args[0], 'name', None) if args else None}"


def failed(plugin: Any, hook: str, error: Exception) -> None:
    """What a failure of `plugin`'s `hook` leads to: a PluginError raised, or (on_error='ignore') a warning."""
    if getattr(plugin, "on_error", "raise") == "ignore":
        logger.warning("plugin %s failed in %s (ignored)", plugin_name(plugin), hook, exc_info=error)
        return
    raise PluginError(plugin_name(plugin), hook, error) from error


def switch_off(plugin: object, *hooks: str) -> None:
    """Switch hooks of one plugin object off: a hook set to None is never called (see `Plugins`)."""
    for hook in hooks:
        setattr(plugin, hook, None)


__all__ = [
    "BLOCKED_BY", "BLOCKED_REASON", "Blocked", "HOOKS", "OUTPUT_HOOKS", "Plugin", "PluginError", "Plugins", "Retry",
]  # fmt: skip
