"""The web UI's trace page (`/traces`, with `WebUI(..., traces=True)` or `chatagent gui --traces`): the signed-in
user's recorded runs, filtered (by agent, status, kind, question), with their token and cost totals; one run as a
tree and a timeline of its steps, each opening on the exact request a model got, a tool call's arguments and result,
...; the user's evaluation reports, each case linked to its trace (`/traces?trace=<id>`).

Every handler reads the store as the user Gradio signed in (or the browser's signed identity, `chatagent.gui.conversations`),
never as a name the page sends: another user's trace id shows nothing.

(No `from __future__ import annotations` here: Gradio finds the `gr.Request` parameter by its annotation.)
"""

import os
import time
from typing import Any

import gradio as gr

from chatagent.gui.conversations import user_of
from chatagent.gui.trace_render import report_html, trace_html
from chatagent.sessions.traces import TraceInfo, TraceStore

ALL = "all"
SHOWN = 200  # runs in the list, newest first
NOTHING = "<p>Pick a run to see its steps.</p>"
NO_REPORT = "<p>Pick an evaluation report to see its cases.</p>"
NOT_FOUND = "<p>No such trace.</p>"


class TracePage:
    """The page and its handlers over one store (`store`: a URL or path, or None for the default session store)."""

    def __init__(self, ui: Any, store: "str | os.PathLike[str] | None" = None) -> None:
        self.ui = ui  # the WebUI: its identity key says whose the browser is
        self.store = TraceStore(store)  # opened now: a bad URL is an error at start

    def attach(self, demo: Any) -> None:
        """Add the page to `demo` (after its main page is built: Gradio adds pages outside the Blocks context)."""
        with demo.route("Traces", "/traces"):
            gr.Markdown("## Traces\nWhat your runs did, step by step (newest first).")
            with gr.Row():
                name = gr.Dropdown([ALL], value=ALL, label="Agent", allow_custom_value=True, elem_id="trace-agent")
                status = gr.Dropdown([ALL, "ok", "error"], value=ALL, label="Status", elem_id="trace-status")
                kind = gr.Dropdown([ALL, "run", "flow", "case"], value=ALL, label="Kind", elem_id="trace-kind")
                search = gr.Textbox(label="Question holds", elem_id="trace-search")
                refresh = gr.Button("Refresh", elem_id="trace-refresh", size="sm")
            totals = gr.Markdown(elem_id="trace-totals")
            listing = gr.Radio(choices=[], value=None, label="Runs", elem_id="trace-list")
            view = gr.HTML(NOTHING, elem_id="trace-view")
            gr.Markdown("## Evaluations")
            reports = gr.Radio(choices=[], value=None, label="Reports", elem_id="report-list")
            report_view = gr.HTML(NO_REPORT, elem_id="report-view")
            filters = [name, status, kind, search]
            demo.load(self._on_load, filters, [listing, totals, name, view, reports, report_view], queue=False)
            for changed in (refresh.click, status.input, kind.input, name.input, search.submit):
                changed(self._on_filter, filters, [listing, totals], queue=False, api_visibility="private")
            listing.input(self._on_open, [listing], [view], queue=False, api_visibility="private")
            reports.input(self._on_report, [reports], [report_view], queue=False, api_visibility="private")

    # ---- handlers ------------------------------------------------------------------------------------------

    def _on_load(self, name: str, status: str, kind: str, search: str, request: gr.Request) -> tuple:
        user = self._user(request)
        found = self._found(user, name, status, kind, search)
        names = sorted({t.name for t in self.store.list(user, limit=1000)})
        asked = dict(getattr(request, "query_params", None) or {})
        view = NOTHING
        if asked.get("trace"):
            trace = self.store.get(user, str(asked["trace"]))
            view = trace_html(trace) if trace is not None else NOT_FOUND
        report_view = NO_REPORT
        if asked.get("report"):
            report = self.store.report(user, str(asked["report"]))
            report_view = report_html(report) if report is not None else "<p>No such report.</p>"
        listed = [(f"{r.name} · {r.cases} cases · pass rate {(r.pass_rate or 0):.0%}", r.id)
                  for r in self.store.reports(user)]  # fmt: skip
        return (_listing(found, asked.get("trace")), _totals(found), gr.Dropdown(choices=[ALL, *names]), view,
                gr.Radio(choices=listed, value=asked.get("report")), report_view)  # fmt: skip

    def _on_filter(self, name: str, status: str, kind: str, search: str, request: gr.Request) -> tuple:
        found = self._found(self._user(request), name, status, kind, search)
        return _listing(found), _totals(found)

    def _on_open(self, trace_id: str | None, request: gr.Request) -> str:
        if not trace_id:
            return NOTHING
        trace = self.store.get(self._user(request), trace_id)
        return trace_html(trace) if trace is not None else NOT_FOUND

    def _on_report(self, report_id: str | None, request: gr.Request) -> str:
        if not report_id:
            return NO_REPORT
        report = self.store.report(self._user(request), report_id)
        return report_html(report) if report is not None else "<p>No such report.</p>"

    # ---- helpers ---------------------------------------------------------------------------------------------

    def _user(self, request: gr.Request) -> str:
        return user_of(request, getattr(self.ui, "identity_key", None))

    def _found(self, user: str, name: str, status: str, kind: str, search: str) -> list[TraceInfo]:
        def chosen(value: str) -> str | None:
            return value if value and value != ALL else None

        return self.store.list(user, name=chosen(name), status=chosen(status), kind=chosen(kind),
                               text=(search or "").strip() or None, limit=SHOWN)  # fmt: skip


def _listing(found: list[TraceInfo], current: Any = None) -> Any:
    choices = [(_label(t), t.id) for t in found]
    return gr.Radio(choices=choices, value=current if any(t.id == current for t in found) else None)


def _label(t: TraceInfo) -> str:
    when = time.strftime("%m-%d %H:%M:%S", time.localtime(t.started))
    mark = "✓" if t.status == "ok" else "✗"
    cost = "" if t.cost is None else f" · ${t.cost:.4f}"
    took = "" if t.duration is None else f" · {t.duration:.2f} s"
    title = f" · {t.title}" if t.title and t.title != t.name else ""
    return f"{mark} {when} · {t.kind} {t.name}{title}{took} · {t.input_tokens + t.output_tokens} tokens{cost}"


def _totals(found: list[TraceInfo]) -> str:
    tokens_in = sum(t.input_tokens for t in found)
    tokens_out = sum(t.output_tokens for t in found)
    costs = [t.cost for t in found if t.cost is not None]
    errors = sum(t.status == "error" for t in found)
    cost = f"${sum(costs):.4f}" if costs else "-"
    return f"**{len(found)} runs** ({errors} failed): {tokens_in} tokens in, {tokens_out} out, cost {cost}"


__all__ = ["TracePage"]
