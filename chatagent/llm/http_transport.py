"""What every HTTP backend's request goes through, written once: sent on the client every model calling that server
shares (`http_pool`), its failures as `ModelServiceError` (retryable where a retry may help), a streamed answer fed
chunk by chunk to the backend's reader, finished, closed.

A backend (`Transported`: the native ones of `http_backend`, the OpenAI-compatible one) writes only its protocol:
the request (`build_call`, `http_request`), what a refusal means (`refused`), how a stream reads (`reader_for`:
bytes in, fragment lists out), and a whole answer (`whole_reply`, `unstreamed`). `IN_THREAD` carries a request out
in the calling thread (`httpx.Client`), `ON_LOOP` on the running event loop (`httpx.AsyncClient`), as
`chatagent.run.start`'s `Driving` pair drives a run: the two differ only in waiting for the network.

On the event loop a request gives the loop's other tasks a turn (`asyncio.sleep(0)`) after it is built and again
when its answer's headers are in: a fast server's whole answer is there at once, and building, sending, reading
the headers, the body and closing in one go was the loop's longest stretch without a turn (1.2 M instructions
of a new agent's first call, where the loop's other tasks waited).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

# imported with the backend, in the thread that makes the model (see chatagent.llm.openai.chat)
import httpx

from chatagent.errors import ModelServiceError
from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice
from chatagent.llm.http_errors import broken_body, no_answer, unreachable
from chatagent.llm.http_pool import shared_client, shared_sync_client
from chatagent.llm.request import Usage
from chatagent.schema import Message
from chatagent.schema.fragment import Fragment

Prompt = tuple[list[Message], "list[dict[str, Any]] | None"]  # what a request asked: the messages and the functions


@dataclass(slots=True)
class HTTPCall:
    """One request: where it goes, its headers and JSON body (bytes), its timeout, whether it streams."""

    url: str
    headers: dict[str, str]
    body: bytes
    timeout: float | None
    stream: bool
    has_tools: bool = False
    context: Any = None  # what the protocol needs to know of the request (its own)


class StreamReader(Protocol):
    """A protocol's streamed reply, read as the bytes arrive: `feed` gives the fragment lists a chunk completes,
    `finish` what the end of the body amounts to (the rest, the usage added to `usage`, or the error)."""

    def feed(self, chunk: bytes) -> list[list[Fragment]]: ...

    def finish(self, usage: Usage | None) -> list[list[Fragment]]: ...


class Transported(BaseChatModel):
    """A backend whose requests go through the transport (see the module docstring): its four backend methods are
    the transport's, it implements the protocol below."""

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        raise NotImplementedError

    def pool(self) -> tuple[str, dict[str, Any]]:
        """The server and the client options: the key of the shared client a request goes on."""
        raise NotImplementedError

    def http_request(self, client: httpx.Client | httpx.AsyncClient, call: HTTPCall) -> httpx.Request:
        """`call` as an `httpx.Request` on `client` (made again for a request sent again)."""
        raise NotImplementedError

    def refused(self, call: HTTPCall, response: httpx.Response, body: bytes) -> None:
        """After an HTTP error answer (`body` read): raise its ModelServiceError, or return having changed `call`
        to be sent again (what the server refused taken out of it)."""
        raise NotImplementedError

    def reader_for(self, call: HTTPCall, headers: httpx.Headers, prompt: Prompt) -> StreamReader | None:
        """The reader of the streamed answer; None when the answer is not a stream (then `unstreamed` reads it)."""
        raise NotImplementedError

    def unstreamed(
        self, call: HTTPCall, headers: httpx.Headers, body: bytes, usage: Usage | None, prompt: Prompt
    ) -> Iterable[list[Fragment]]:
        """A streaming request answered without a stream: a whole answer (some gateways), else the error."""
        raise NotImplementedError

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        raise NotImplementedError

    def endpoint(self) -> str:
        """The server, as messages name it."""
        raise NotImplementedError

    # ---- the backend methods, through the transport ------------------------------------------------------

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=True)
        return IN_THREAD.stream(self, call, usage, (messages, functions))

    def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=True)
        return ON_LOOP.stream(self, call, usage, (messages, functions))

    def _chat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=False)
        return self.whole_reply(call, IN_THREAD.body(self, call), usage, (messages, functions))

    async def _achat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        call = self.build_call(messages, functions, cfg, tool_choice, stream=False)
        return self.whole_reply(call, await ON_LOOP.body(self, call), usage, (messages, functions))


def unsent(backend: Transported, e: httpx.HTTPError) -> ModelServiceError:
    """A request that got no answer: it timed out, or could not be sent (refused connection, DNS, TLS, ...)."""
    if isinstance(e, httpx.TimeoutException):
        return no_answer(backend.endpoint(), e)
    return unreachable(backend.endpoint(), e, backend.api_key)


def broken(backend: Transported, e: httpx.HTTPError) -> ModelServiceError:
    """A failure of the connection while the body was read, as a retryable ModelServiceError."""
    return broken_body(backend.endpoint(), e, backend.api_key)


class InThread:
    """The transport in the calling thread, on the shared `httpx.Client`."""

    __slots__ = ()

    def stream(
        self, backend: Transported, call: HTTPCall, usage: Usage | None, prompt: Prompt
    ) -> Iterator[list[Fragment]]:
        response = self.send(backend, call)
        try:
            reader = backend.reader_for(call, response.headers, prompt)
            if reader is None:
                yield from backend.unstreamed(call, response.headers, self.read(backend, response), usage, prompt)
                return
            feed = reader.feed
            try:
                for chunk in response.iter_bytes():
                    yield from feed(chunk)
            except httpx.HTTPError as e:
                raise broken(backend, e) from None
            yield from reader.finish(usage)
        finally:
            response.close()

    def body(self, backend: Transported, call: HTTPCall) -> bytes:
        """The whole answer to `call`."""
        response = self.send(backend, call)
        try:
            return self.read(backend, response)
        finally:
            response.close()

    def send(self, backend: Transported, call: HTTPCall) -> httpx.Response:
        """`call` sent (again, as long as the backend changes what the server refused); the answer, its body
        unread."""
        client = shared_sync_client(*backend.pool())
        while True:
            try:
                response = client.send(backend.http_request(client, call), stream=True)
            except httpx.HTTPError as e:
                raise unsent(backend, e) from None
            if response.status_code < 400:
                return response
            try:
                body = self.read(backend, response)
            finally:
                response.close()
            backend.refused(call, response, body)

    def read(self, backend: Transported, response: httpx.Response) -> bytes:
        try:
            return response.read()
        except httpx.HTTPError as e:
            raise broken(backend, e) from None


class OnLoop:
    """The transport on the running event loop, on its shared `httpx.AsyncClient`: `InThread`'s steps, awaited."""

    __slots__ = ()

    async def stream(
        self, backend: Transported, call: HTTPCall, usage: Usage | None, prompt: Prompt
    ) -> AsyncIterator[list[Fragment]]:
        response = await self.send(backend, call)
        try:
            await asyncio.sleep(0)  # the headers are in: the loop's other tasks have a turn before the body's
            reader = backend.reader_for(call, response.headers, prompt)
            if reader is None:
                body = await self.read(backend, response)
                for out in backend.unstreamed(call, response.headers, body, usage, prompt):
                    yield out
                return
            feed = reader.feed
            try:
                async for chunk in response.aiter_bytes():
                    for out in feed(chunk):
                        yield out
            except httpx.HTTPError as e:
                raise broken(backend, e) from None
            for out in reader.finish(usage):
                yield out
        finally:
            await response.aclose()

    async def body(self, backend: Transported, call: HTTPCall) -> bytes:
        response = await self.send(backend, call)
        try:
            await asyncio.sleep(0)  # (as in `stream`)
            return await self.read(backend, response)
        finally:
            await response.aclose()

    async def send(self, backend: Transported, call: HTTPCall) -> httpx.Response:
        client = await shared_client(*backend.pool())
        while True:
            request = backend.http_request(client, call)
            await asyncio.sleep(0)  # built: the loop's other tasks have a turn before it goes
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as e:
                raise unsent(backend, e) from None
            if response.status_code < 400:
                return response
            try:
                body = await self.read(backend, response)
            finally:
                await response.aclose()
            backend.refused(call, response, body)

    async def read(self, backend: Transported, response: httpx.Response) -> bytes:
        try:
            return await response.aread()
        except httpx.HTTPError as e:
            raise broken(backend, e) from None


IN_THREAD = InThread()
ON_LOOP = OnLoop()

__all__ = ["IN_THREAD", "ON_LOOP", "HTTPCall", "Prompt", "StreamReader", "Transported"]
