"""What a new agent's first `arun()` leaves to the event loop's thread (issue 43.20, issue 31's goal: < 1 ms).

Counted, never timed: the modules the loop's thread imports, the one-time work it does (patterns compiled, URLs
parsed, cookie parsing), the turns a request gives the loop's other tasks, and where the collector's pass over a
first build's imports falls.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from chatagent import BasicAgent
from chatagent.llm import http_transport
from tests.support import processes
from tests.support.openai_server import OpenAIServer, Reply

DEADLINE = 20

FIRST_RUN = """
import asyncio, gc, json, sys, threading

import chatagent.agents.basic  # what a program imports at its top: the backend is imported at the first run
from chatagent import BasicAgent

LOOP = threading.get_ident()
imported: list[str] = []
done: dict[str, int] = {}
# one-time work the loop's thread must not do at a first call (each is done off the loop, or not at all)
WATCHED = {"urlparse": "a URL parsed", "_compile": "a pattern compiled", "__init__": "a urllib request made"}


class Watch:
    def find_spec(self, name, path=None, target=None):
        if threading.get_ident() == LOOP:
            imported.append(name)
        return None


def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    name, where = code.co_name, code.co_filename
    if (name == "urlparse" and "httpx" in where) or (name == "_compile" and where.endswith("re/_compiler.py")) or (
        name == "__init__" and where.endswith("urllib/request.py")
    ):
        done[WATCHED[name]] = done.get(WATCHED[name], 0) + 1


async def main() -> dict:
    before = set(sys.modules)
    sys.meta_path.insert(0, Watch())
    sys.setprofile(profile)  # the loop's thread only
    bot = BasicAgent(llm={"model": "m", "model_server": sys.argv[1], "api_key": "k"})
    async for rsp in bot.arun([{"role": "user", "content": "hi"}]):
        pass
    sys.setprofile(None)
    # the functions of the modules the first build imported: none left in the collector's young generations
    built = {sys.modules[m].__dict__.get("__name__") for m in set(sys.modules) - before}
    young = [o for g in (0, 1) for o in gc.get_objects(g)
             if type(o).__name__ == "function" and getattr(o, "__module__", None) in built]
    return {"answer": rsp[-1]["content"], "imported": imported, "done": done, "backend_modules": len(built),
            "young_functions": len(young)}


print(json.dumps(asyncio.run(main())))
"""


@pytest.mark.timeout(120)
def test_a_new_process_first_arun_imports_and_builds_nothing_on_the_loop(openai_server, tmp_path) -> None:
    """The loop's thread imported `concurrent.futures.thread` (asyncio's default executor, at the first
    `to_thread`), parsed the request's URL, and at the first answer made a urllib request and an email message of
    its headers for a cookie jar that keeps nothing, compiling urllib's patterns: now the executor's module comes
    with chatagent, the URL is parsed where the model is built (in a worker thread) and cookies are not read. The
    first build imported the backend's modules in its worker, whose young objects the collector then passed over
    on the loop in a later agent's step (1.5-2 ms): the build passes them on to the old generation itself."""
    openai_server.add("pong")
    script = tmp_path / "first.py"
    script.write_text(FIRST_RUN)
    out = processes.run([sys.executable, str(script), openai_server.base_url], capture_output=True, text=True,
                        timeout=100, cwd=str(tmp_path.parent))  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["answer"] == "pong"
    assert got["imported"] == [] and got["done"] == {}, got
    assert got["backend_modules"] > 10 and got["young_functions"] == 0, got


def test_a_request_gives_the_loop_a_turn_when_built_and_when_its_headers_are_in(
    openai_server: OpenAIServer, monkeypatch
) -> None:
    """A fast server's whole answer is there at once: building the request, sending it, reading the headers, the
    body and closing ran in one turn of the loop, its longest stretch at a new agent's first call. The request now
    yields to the loop's other tasks once built and once its headers are in."""
    openai_server.add(Reply(text="hello"))
    order: list[str] = []
    real_send = http_transport.shared_client

    async def client_recording_sends(*args):
        client = await real_send(*args)

        class Recording:
            def __getattr__(self, name):
                return getattr(client, name)

            async def send(self, request, **kwargs):
                order.append("send")
                response = await client.send(request, **kwargs)
                order.append("headers")
                return response

        return Recording()

    monkeypatch.setattr(http_transport, "shared_client", client_recording_sends)
    bot = BasicAgent(llm={"model": "m", "model_server": openai_server.base_url, "api_key": "k"})
    llm: Any = bot.llm
    real_build, real_reader = llm.http_request, llm.reader_for
    monkeypatch.setattr(llm, "http_request", lambda *a: order.append("built") or real_build(*a))
    monkeypatch.setattr(llm, "reader_for", lambda *a: order.append("body") or real_reader(*a))

    async def main() -> str:
        stop = asyncio.Event()

        async def ticks() -> None:
            while not stop.is_set():
                order.append("tick")
                await asyncio.sleep(0)

        ticker = asyncio.create_task(ticks())
        await asyncio.sleep(0)
        try:
            async for rsp in bot.arun([{"role": "user", "content": "hi"}]):
                last = rsp
        finally:
            stop.set()
            await ticker
        return last[-1]["content"]

    assert asyncio.run(asyncio.wait_for(main(), DEADLINE)) == "hello"
    built, headers = order.index("built"), order.index("headers")
    assert order[built + 1] == "tick" and order.index("send") > built + 1, order  # a turn before it goes
    assert order[headers + 1] == "tick" and order.index("body") > headers + 1, order  # and before the body
