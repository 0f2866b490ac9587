"""WebUI: a Gradio chat page over one agent, several agents (with a selector) or a group chat.

    from chatagent import BasicAgent
    from chatagent.gui import WebUI
    WebUI(BasicAgent(llm=...), chatbot_config={'prompt.suggestions': ['Hello!']}).run()

Each browser session gets its own conversation (a `ChatSession` in `gr.State`). Agents keep no state
between runs, so one agent object serves every session; to give each session its own agents (say, for
a tool with a live process), pass a factory instead: `WebUI(lambda: make_agent())`.

Nothing reaches the internet: Gradio's analytics are off, no share link unless asked, fonts are local.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.group_chat import find_mention
from chatagent.errors import ModelServiceError
from chatagent.gui.control import ApprovalControls
from chatagent.gui.notes import model_note
from chatagent.gui.questions import QuestionForm
from chatagent.gui.render import escape_html, escape_markdown, render_conversation, safe_name
from chatagent.gui.security import (
    DEFAULT_BROWSER_IDLE,
    DEFAULT_MAX_BROWSERS,
    BrowserIdentity,
    Browsers,
    HostGuard,
    SecurityHeaders,
    identity_key,
)
from chatagent.gui.session import ChatSession, box_value, user_message
from chatagent.run.trace_writer import trace_store
from chatagent.run.traces import TraceRecorder
from chatagent.schema import Message, to_messages
from chatagent.sessions import Session, open_store
from chatagent.utils.extras import missing_dependency
from chatagent.utils.origins import HostCheck

logger = logging.getLogger("chatagent.gui")

AgentSource = Agent | Sequence[Agent] | Callable[[], Agent | Sequence[Agent]]


CLEAR_CONFIRM_S = 10.0  # Clear clears when clicked again within this many seconds
CLEAR_CONFIRM_LABEL = "Clear: click again to erase this conversation"


def _offline_env() -> None:
    """Keep Gradio and huggingface_hub off the network (they read these when first imported)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _members(agent: Agent) -> list[Agent] | None:
    """A group chat's members (any agent with an `agents` list or tuple); None for other agents."""
    members = getattr(agent, "agents", None)
    return list(members) if isinstance(members, (list, tuple)) else None


def _is_group_chat(agent: Agent) -> bool:
    return _members(agent) is not None


def _agent_names(agents: Sequence[Agent]) -> list[str]:
    names: list[str] = []
    for i, a in enumerate(agents):
        base = a.name or f"Agent {i + 1}"
        name, n = base, 2
        while name in names:
            name, n = f"{base} ({n})", n + 1
        names.append(name)
    return names


def _as_agent_list(value: Agent | Sequence[Agent]) -> list[Agent]:
    agents = [value] if isinstance(value, Agent) else list(value)
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise TypeError("WebUI needs an Agent, a non-empty list of Agents, or a function returning one")
    return agents


class WebUI:
    """A chat web page over agents.

    Args:
        agent: an Agent, a list of Agents (the page shows a selector), a group chat (an agent with an
            `agents` list: each speaker's name is shown), or a function returning one of those, called
            once per browser session so each session has its own agent objects.
        chatbot_config: optional settings: `title`, `description`, `prompt.suggestions` (list of str),
            `input.placeholder`, `user.avatar`, `agent.avatar` (image paths), `height` (pixels),
            `max_file_size` (e.g. '50mb'), `show_names` (force speaker names on or off), `show_model` (say
            which model answers at the top of the page; default True).
        conversations: keep each user's conversations in a session store, with a sidebar to switch between
            them (see `chatagent.gui.conversations`): True for the default store, or a store URL; off by default.
        traces: record the page's runs, each the signed-in user's, and add the trace page (`/traces`, see
            `chatagent.gui.traces`): True (in the conversations' store) or a store URL; needs `conversations`.
    """

    def __init__(
        self,
        agent: AgentSource,
        chatbot_config: dict[str, Any] | None = None,
        *,
        conversations: bool | str = False,
        traces: bool | str = False,
    ) -> None:
        if traces and not conversations:
            raise ValueError("traces=True needs conversations=True (or a store): a trace is the signed-in user's")
        if callable(agent) and not isinstance(agent, Agent):
            self._factory: Callable[[], Agent | Sequence[Agent]] | None = agent
            sample = _as_agent_list(agent())
        else:
            self._factory = None
            sample = _as_agent_list(agent)
        self._agents = sample
        self.agent_names = _agent_names(sample)
        self.config = dict(chatbot_config or {})
        show = self.config.get("show_names")
        self.show_names = bool(show) if show is not None else len(sample) > 1 or any(map(_is_group_chat, sample))
        self.demo: Any = None  # the gr.Blocks, once built
        self._initial: list[Message] = []
        self.concurrency_limit: int | None = None  # turns streamed at once (None: no limit); see run()
        self.enable_mention = False  # see run()
        self.conversations = conversations
        self.traces = traces
        self.recorder = TraceRecorder(self._trace_store()) if traces else None  # the page's runs, recorded
        self.identity_key: bytes | None = None  # signs browsers' identities when the page has no login (see run())

    # ---- sessions ------------------------------------------------------------------------------------

    def new_session(self) -> ChatSession:
        """A fresh session: its own agents when a factory was given, its own copy of the initial messages."""
        agents = _as_agent_list(self._factory()) if self._factory is not None else self._agents
        return ChatSession(agents, [m.copy() for m in self._initial], show_names=self.show_names)

    def _agent_for(self, session: ChatSession, name: str | None) -> Agent:
        if name in self.agent_names:
            return session.agents[self.agent_names.index(name)]
        return session.agents[0]

    # ---- the page ----------------------------------------------------------------------------------------

    def build(self, messages: list[dict[str, Any] | Message] | None = None) -> Any:
        """The Gradio Blocks of the page (`messages`: a conversation every session starts with)."""
        _offline_env()
        try:
            import gradio as gr
        except ModuleNotFoundError as e:
            raise missing_dependency(e, "the web UI") from None

        self._initial = to_messages(messages) if messages else []
        cfg = self.config
        avatars = (cfg.get("user.avatar"), cfg.get("agent.avatar"))
        with gr.Blocks(title=cfg.get("title", "chatagent"), analytics_enabled=False, fill_height=True) as demo:
            state = gr.State(None, delete_callback=_close_session)  # the tab closed: end its sandbox
            if cfg.get("title") or cfg.get("description"):
                gr.Markdown(f"## {cfg.get('title', '')}\n{cfg.get('description', '')}")
            if cfg.get("show_model", True):
                gr.Markdown(self.model_note(), elem_id="model-note")
            for chat in self._agents:
                members = _members(chat)
                if members is None:
                    continue
                names = ", ".join(f"**@{escape_html(safe_name(a.name or '?'))}**" for a in members)
                gr.Markdown(
                    f"{escape_html(safe_name(chat.name or 'Group chat'))}: {names}. Write @name to ask one of them."
                )
            selector = gr.Dropdown(
                choices=self.agent_names,
                value=self.agent_names[0],
                label="Agent",
                interactive=True,
                visible=len(self.agent_names) > 1,
                elem_id="agent-selector",
            )
            # Gradio's annotation of `value` leaves out the typed text parts it accepts (see chatagent.gui.render.chat_message)
            initial: list[Any] = render_conversation(self._initial, show_names=self.show_names)
            chatbot = gr.Chatbot(
                value=initial,
                elem_id="chatbot",
                label=self.agent_names[0] if len(self.agent_names) == 1 else "Chat",
                height=cfg.get("height", 560),
                avatar_images=avatars if any(avatars) else None,
                sanitize_html=True,
                allow_tags=False,
                buttons=["copy", "copy_all"],
                feedback_options=None,
                group_consecutive_messages=not any(map(_is_group_chat, self._agents)),
                scale=1,
            )
            textbox = gr.MultimodalTextbox(
                placeholder=cfg.get("input.placeholder", "Type a message, or attach files…"),
                file_count="multiple",
                sources=["upload"],
                show_label=False,
                elem_id="chat-input",
                autofocus=True,
                interactive=not self.conversations,  # with conversations: once the user's one is open
            )
            with gr.Row():
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn", size="sm")
                regen_btn = gr.Button("Regenerate", elem_id="regenerate-btn", size="sm")
                clear_btn = gr.Button("Clear", elem_id="clear-btn", size="sm")

            approval = ApprovalControls(self._turn)  # Approve / Deny, shown while a tool call waits for them
            questions = QuestionForm(self._turn)  # a tool's questions (ask_user), shown while the run waits for them
            suggestions = [s if isinstance(s, str) else s.get("text", "") for s in cfg.get("prompt.suggestions") or []]
            if suggestions:
                gr.Examples(examples=[[s] for s in suggestions], inputs=[textbox], label="Try")

            outputs = [chatbot, textbox, state]
            submitted = textbox.submit(
                self._on_submit,
                [textbox, state, selector],
                outputs,
                concurrency_limit=self.concurrency_limit,
                show_progress="hidden",
                api_name="chat",
            )
            regenerated = regen_btn.click(
                self._on_regenerate,
                [state, selector],
                outputs,
                concurrency_limit=self.concurrency_limit,
                show_progress="hidden",
                api_name="regenerate",
            )
            stop_btn.click(self._on_stop, [state], [], queue=False, api_name="stop")
            clear_outputs = [*outputs, clear_btn]
            cleared = clear_btn.click(self._on_clear, [state], clear_outputs, queue=False, api_name="clear")
            chatbot.clear(self._on_clear, [state], clear_outputs, queue=False, api_visibility="private")
            answered = questions.wire(chatbot, textbox, state, selector, [submitted, regenerated, cleared])
            decided = approval.wire(chatbot, textbox, state, selector, [submitted, regenerated, cleared, answered])
            for event in decided:  # a decision's run may stop on a question
                event.then(questions.shown, [state, *questions.inputs], questions.outputs, queue=False)
            page = None
            if self.conversations:
                from chatagent.gui import conversations, history, memories, traces  # gradio parts: with a store only

                panel = history.HistoryPanel(self, self._store())  # "try again from here" under the chat
                retried = panel.wire(chatbot, textbox, state, selector)
                turns = [submitted, regenerated, cleared, retried]
                opening = conversations.Conversations(self, self._store()).attach(demo, state, chatbot, textbox, turns)
                panel.show_after([*opening, submitted, regenerated, cleared, answered, *decided])
                memory = memories.page_memory(self._agents)
                if memory is not None:  # with conversations only: runs are then on the signed-in user's Session
                    memories.MemoryPanel(memory, self).attach(demo, turns)
                if self.traces:
                    page = traces.TracePage(self, self._trace_store())
        if page is not None:
            page.attach(demo)  # a page of its own (Gradio adds one outside the Blocks context)
        self.demo = demo
        return demo

    def forget_user(self, user: str) -> None:
        """Delete what the page keeps of `user`: its conversations (with their uploads), memories and traces."""
        if self.conversations:
            store = open_store(self._store())
            for info in store.list(user):
                Session(info.id, store, user=user).delete()
        for memory in {id(m): m for a in self._agents if (m := getattr(a, "memory", None)) is not None}.values():
            memory.for_user(user).forget_all()
        if self.traces:
            trace_store(self._trace_store()).clear(user)

    def _store(self) -> str | None:
        """The conversations' store (None: the default one)."""
        return None if self.conversations is True else str(self.conversations)

    def _trace_store(self) -> str | None:
        """Where the page's runs are recorded: the `traces=` store, else the conversations'."""
        return self.traces if isinstance(self.traces, str) else self._store()

    def model_note(self) -> str:
        """Which model answers (the agents' models; a group chat's members' too), as Markdown for the page."""
        llms, missing = [], []
        for agent in self._agents:
            members = _members(agent)
            if members is None:
                members = [agent]
            elif getattr(agent, "selection", None) == "auto":
                members.insert(0, agent)  # the host model picks the speakers
            for a in members:
                if getattr(a, "is_human", False):
                    continue
                try:
                    llms.append(a.llm)
                except ModelServiceError as e:  # shown on the page; asking will show the same error
                    missing.append(escape_markdown(str(e)))
        note = model_note(llms)
        if missing:
            note += " **No model:** " + "; ".join(dict.fromkeys(missing))
        return note

    # ---- handlers ----------------------------------------------------------------------------------------

    async def _on_submit(
        self, message: dict | str | None, session: ChatSession | None, agent_name: str | None
    ) -> AsyncIterator[tuple]:
        import gradio as gr

        session = session or self.new_session()
        if isinstance(message, str):
            message = {"text": message, "files": []}
        message = message or {}
        text = (message.get("text") or "").strip()
        files = [f if isinstance(f, str) else f.get("path", "") for f in message.get("files") or []]
        if session.running or (not text and not files):  # nothing to send, or a turn is streaming already
            yield gr.skip(), gr.skip(), session
            return
        if self.enable_mention and "@" in text:  # "@name" picks that agent
            agent_name = find_mention(text, self.agent_names) or agent_name
        session.add_user(user_message(text, [f for f in files if f]))
        async for update in self._turn(session, agent_name):
            yield update

    async def _on_regenerate(self, session: ChatSession | None, agent_name: str | None) -> AsyncIterator[tuple]:
        import gradio as gr

        session = session or self.new_session()
        if session.running or not session.pop_response():
            yield gr.skip(), gr.skip(), session
            return
        async for update in self._turn(session, agent_name):
            yield update

    async def _turn(self, session: ChatSession, agent_name: str | None) -> AsyncIterator[tuple]:
        import gradio as gr

        busy = gr.MultimodalTextbox(value=None, interactive=False)
        yield session.display, busy, session
        generation = session.generation
        recording = {"callbacks": [self.recorder]} if self.recorder is not None else {}
        async for display in session.stream_turn(self._agent_for(session, agent_name), **recording):
            yield display, gr.skip(), session
        if session.generation == generation:
            bounced, session.bounced = session.bounced, None  # another tab is answering: the text goes back
            value = box_value(bounced) if bounced is not None else None
            yield session.display, gr.MultimodalTextbox(value=value, interactive=True), session

    def _on_stop(self, session: ChatSession | None) -> None:
        if session is not None:
            session.request_stop()

    def _on_clear(self, session: ChatSession | None) -> tuple:
        """Clear asks first: the first click (or the chatbot's own clear icon) only arms it, and the conversation
        stays (shown again, if the chatbot had emptied itself); a second click within CLEAR_CONFIRM_S clears."""
        import gradio as gr

        session = session or self.new_session()
        now = time.monotonic()
        if session.history and now - session.clear_armed_at > CLEAR_CONFIRM_S:
            session.clear_armed_at = now
            armed = gr.Button(value=CLEAR_CONFIRM_LABEL, variant="stop")
            return session.display, gr.skip(), session, armed
        session.clear_armed_at = 0.0
        session.clear()
        return (
            [],
            gr.MultimodalTextbox(value=None, interactive=True),
            session,
            gr.Button(value="Clear", variant="secondary"),
        )

    # ---- serving -----------------------------------------------------------------------------------------

    def run(
        self,
        messages: list[dict[str, Any] | Message] | None = None,
        share: bool = False,
        server_name: str | None = "127.0.0.1",
        server_port: int | None = 7860,
        concurrency_limit: int | None = None,
        enable_mention: bool = False,
        *,
        block: bool = True,
        max_threads: int = 64,
        server_names: Sequence[str] = (),
        allow_unauthenticated: bool = False,
        max_browsers: int = DEFAULT_MAX_BROWSERS,
        browser_idle: float = DEFAULT_BROWSER_IDLE,
        **launch_kwargs: Any,
    ) -> str:
        """Serve the page; blocks until stopped unless `block=False`. Returns the local URL.

        `concurrency_limit`: turns streamed at once across all sessions (None, the default: no limit; others
        wait in Gradio's queue). `enable_mention=True`: with several agents, "@name" in a message sends it
        to that agent. `share=True` asks Gradio for a public link, which contacts Gradio's share server: off
        by default. Other keyword arguments go to `gr.Blocks.launch`.

        The page answers only requests that name it (a loopback name, the address it is bound to, or one of
        `server_names`: DNS rebinding is refused) and come from itself (another site's `Origin` is refused).
        Without a login (`auth=`), each browser gets its own signed identity and sees only its own conversations;
        binding to an address other than loopback without a login raises ValueError unless
        `allow_unauthenticated=True` (then anyone who reaches the address can use the agent). Such a page keeps
        `max_browsers` identities with their state; a new browser beyond takes the place (and forgets the
        conversations, uploads, memories and traces) of the one unseen longest, unseen for `browser_idle` seconds,
        else it is refused (503) for now (`chatagent.gui.security.Browsers`).
        """
        if concurrency_limit is not None and (not isinstance(concurrency_limit, int) or concurrency_limit < 1):
            raise ValueError(f"concurrency_limit must be a positive integer or None, got {concurrency_limit!r}")
        self.concurrency_limit, self.enable_mention = concurrency_limit, bool(enable_mention)
        from starlette.middleware import Middleware

        bound = server_name or "127.0.0.1"
        if not launch_kwargs.get("auth") and not _loopback(bound) and not allow_unauthenticated:
            raise ValueError(
                f"the web UI would serve {bound} without a login: anyone who reaches it could use the agent and its "
                "tools. Give auth=[(user, password)] (--auth USER:PASS), bind to 127.0.0.1, or say "
                "allow_unauthenticated=True (--allow-no-auth)"
            )
        guards = [Middleware(HostGuard, check=HostCheck(bound, server_names))]
        if not launch_kwargs.get("auth"):
            self.identity_key = identity_key()
            browsers = Browsers(self.forget_user, max_browsers, browser_idle)
            guards.append(Middleware(BrowserIdentity, key=self.identity_key, browsers=browsers))
        demo = self.build(messages)
        demo.queue(default_concurrency_limit=None)
        if share:
            logger.warning("share=True: Gradio will contact its share server to make a public link")
        app_kwargs = dict(launch_kwargs.pop("app_kwargs", None) or {})
        app_kwargs["middleware"] = [*guards, Middleware(SecurityHeaders), *app_kwargs.get("middleware", [])]
        _, url, _ = demo.launch(
            server_name=server_name,
            server_port=server_port,
            share=share,
            prevent_thread_lock=True,
            show_error=False,
            quiet=not block,
            max_threads=max_threads,
            max_file_size=self.config.get("max_file_size", "50mb"),
            footer_links=[],
            app_kwargs=app_kwargs,
            **launch_kwargs,
        )
        logger.info("chatagent web UI on %s", url)
        if block:
            try:
                demo.block_thread()
            finally:
                demo.close()
        return url

    def close(self) -> None:
        """Stop serving (for `run(block=False)`)."""
        if self.demo is not None:
            self.demo.close()


def _loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _close_session(session: ChatSession | None) -> None:
    if session is not None:
        session.close()
