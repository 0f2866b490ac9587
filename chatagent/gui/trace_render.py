"""HTML of the trace page (`chatagent.gui.traces`): a trace as a tree with a timeline, each step opening on what it did (the
exact request a model got and its reply, a tool call's arguments and result, a task's output, the sources
retrieved), and an evaluation report with each case linked to its trace.

Everything that comes from a trace (messages, tool results, names, errors) is escaped: a step holding `<script>`
shows it as text. Links go only to this page (`traces?trace=<id>`).
"""

from __future__ import annotations

import html
import json
import time
from typing import Any
from urllib.parse import quote

from chatagent.run.trace_body import summary, walk

STYLE = """<style>
.ca-trace { font-size: 14px; }
.ca-trace .head { margin: 0 0 8px 0; }
.ca-trace details.step { border-bottom: 1px solid rgba(128,128,128,.2); }
.ca-trace summary { display: grid; grid-template-columns: minmax(220px, 2fr) 70px minmax(120px, 3fr) 180px;
  gap: 8px; align-items: center; cursor: pointer; padding: 3px 0; }
.ca-trace .name b { font-weight: 600; }
.ca-trace .kind { font-size: 11px; padding: 1px 5px; border-radius: 4px; margin-right: 4px; color: #fff; }
.ca-trace .k-run { background: #555; } .ca-trace .k-model { background: #2563eb; } .ca-trace .k-tool { background: #059669; }
.ca-trace .k-task, .ca-trace .k-flow, .ca-trace .k-flow_step, .ca-trace .k-case { background: #7c3aed; }
.ca-trace .k-handoff, .ca-trace .k-retrieval, .ca-trace .k-memory { background: #b45309; }
.ca-trace .about { color: #666; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.ca-trace .bar { position: relative; height: 10px; background: rgba(128,128,128,.15); border-radius: 2px; }
.ca-trace .bar i { position: absolute; top: 0; bottom: 0; background: #2563eb; border-radius: 2px; min-width: 2px; }
.ca-trace .error { color: #b91c1c; }
.ca-trace .body { padding: 6px 0 10px 24px; }
.ca-trace pre { white-space: pre-wrap; word-break: break-word; background: rgba(128,128,128,.08); padding: 6px;
  margin: 2px 0 8px 0; max-height: 420px; overflow: auto; }
.ca-trace .msg b { text-transform: uppercase; font-size: 11px; }
.ca-report table { border-collapse: collapse; width: 100%; }
.ca-report td, .ca-report th { border-bottom: 1px solid rgba(128,128,128,.25); padding: 4px 6px; text-align: left; }
</style>"""


def e(value: Any) -> str:
    """`value` as escaped HTML text."""
    return html.escape(value if isinstance(value, str) else "" if value is None else str(value), quote=True)


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return f"<pre>{e(text)}</pre>"


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _money(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def trace_html(trace: dict[str, Any]) -> str:
    """A trace: its totals, then its steps as a tree, each with its bar on the timeline and what it did."""
    usage = trace.get("usage") or {}
    steps = trace.get("steps") or []
    tools = sum(1 for s in steps if s.get("kind") == "tool")
    status = trace.get("status")
    head = (f"<div class='head'><b>{e(trace.get('kind'))} {e(trace.get('name'))}</b> · "
            f"<span class='{'error' if status == 'error' else ''}'>{e(status)}</span> · {_when(trace.get('started'))} · "
            f"{_ms(trace.get('duration'))} · {usage.get('calls', 0)} model calls, {tools} tool calls · "
            f"{usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out · cost "
            f"{_money(usage.get('cost'))}</div>")  # fmt: skip
    if trace.get("error"):
        head += f"<div class='error'>{e(trace['error'])}</div>"
    begin = float(trace.get("started") or 0)
    total = max(float(trace.get("duration") or 0), max((s.get("start", begin) + (s.get("duration") or 0) - begin
                                                        for s in steps), default=0.0), 1e-6)  # fmt: skip
    rows = [_step_html(depth, step, trace, begin, total) for depth, step in walk(trace)]
    return f"{STYLE}<div class='ca-trace' data-trace='{e(trace.get('id'))}'>{head}{''.join(rows)}</div>"


def _step_html(depth: int, step: dict[str, Any], trace: dict[str, Any], begin: float, total: float) -> str:
    kind = str(step.get("kind") or "")
    left = max(0.0, min(100.0, (float(step.get("start") or begin) - begin) / total * 100))
    width = max(0.3, min(100.0 - left, float(step.get("duration") or 0) / total * 100))
    error = step.get("error")
    about = f"<span class='error'>{e(error)}</span>" if error else e(summary(step, trace))
    return (
        f"<details class='step' data-kind='{e(kind)}' data-step='{e(step.get('id'))}'><summary>"
        f"<span class='name' style='padding-left:{depth * 18}px'><span class='kind k-{e(kind)}'>{e(kind)}</span>"
        f" <b>{e(step.get('name'))}</b></span><span>{_ms(step.get('duration'))}</span><span class='about'>{about}</span>"
        f"<span class='bar'><i style='left:{left:.2f}%;width:{width:.2f}%'></i></span></summary>"
        f"<div class='body'>{_details(step, trace)}</div></details>"
    )


def _messages(indexes: Any, trace: dict[str, Any]) -> str:
    stored = trace.get("messages") or []
    out = []
    for i in indexes or ():
        if not isinstance(i, int) or not 0 <= i < len(stored):
            continue
        m = stored[i]
        who = m.get("role", "?") + (f" ({m['name']})" if m.get("name") else "")
        parts = [] if m.get("content") in ("", None, []) else [_pre(m.get("content"))]
        if m.get("function_call"):
            call = m["function_call"]
            parts.append(f"<div>calls <code>{e(call.get('name'))}</code></div>{_pre(call.get('arguments'))}")
        if m.get("reasoning_content"):
            parts.append("thinking" + _pre(m["reasoning_content"]))
        out.append(f"<div class='msg'><b>{e(who)}</b>{''.join(parts) or _pre('')}</div>")
    return "".join(out)


def _details(step: dict[str, Any], trace: dict[str, Any]) -> str:
    kind = step.get("kind")
    parts: list[str] = []
    if step.get("error"):
        parts.append(f"<div class='error'>Error{_pre(step['error'])}</div>")
    if kind == "model":
        usage = step.get("usage") or {}
        fns = trace.get("functions") or []
        tools = (
            fns[step["functions"]] if isinstance(step.get("functions"), int) and step["functions"] < len(fns) else None
        )
        parts.append(f"<div>{e(step.get('model_type'))} model <b>{e(step.get('name'))}</b>: "
                     f"{usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out, cost "
                     f"{_money(usage.get('cost'))}</div>")  # fmt: skip
        parts.append("<h4>The request</h4>" + _messages(step.get("input"), trace))
        if step.get("cfg"):
            parts.append("settings" + _pre(step["cfg"]))
        if tools:
            parts.append(f"<details><summary>{len(tools)} tool{'s' if len(tools) != 1 else ''} offered</summary>"
                         f"{_pre(tools)}</details>")  # fmt: skip
        parts.append("<h4>The reply</h4>" + _messages(step.get("output"), trace))
    elif kind == "tool":
        parts.append("arguments" + _pre(step.get("arguments") or ""))
        parts.append("result" + _pre(step.get("result")))
        if step.get("cached"):
            parts.append("<div>(from the tool cache)</div>")
    elif kind == "retrieval":
        data = step.get("data") or {}
        parts.append("searched for" + _pre(data.get("query") or ""))
        for s in data.get("sources") or []:
            pages = ", ".join(map(str, s.get("pages") or []))
            parts.append(f"<div><b>{e(s.get('file'))}</b> p. {e(pages)}</div>{_pre(s.get('text') or '')}")
    elif step.get("data"):
        data = {k: v for k, v in step["data"].items() if k not in ("on_trace",)}
        parts.append(_pre(data))
    return "".join(parts)


def report_html(report: dict[str, Any]) -> str:
    """An evaluation report: the totals, then one row per case, linked to its trace."""
    rows = []
    for c in report.get("cases") or []:
        first = (c.get("attempts") or [{}])[0]
        reasons = "; ".join(f"{r['name']}: {r.get('reason') or ''}" for r in first.get("results") or []
                            if r.get("passed") is False) or (first.get("error") or "")  # fmt: skip
        trace = c.get("trace_id")
        name = f"<a href='traces?trace={quote(trace)}'>{e(c.get('name'))}</a>" if trace else e(c.get("name"))
        runs = c.get("attempts") or []
        rows.append(f"<tr data-case='{e(c.get('name'))}'><td>{'✓' if c.get('passed') else '✗'}</td><td>{name}</td>"
                    f"<td>{c.get('score', 0):.2f}</td><td>{sum(a.get('passed', False) for a in runs)}/{len(runs)}</td>"
                    f"<td>{first.get('seconds', 0):.2f} s</td>"
                    f"<td>{first.get('input_tokens', 0) + first.get('output_tokens', 0)}</td>"
                    f"<td>{_money(first.get('cost'))}</td><td>{e(reasons)}</td></tr>")  # fmt: skip
    lat = report.get("latency") or {}
    head = (f"<div><b>{e(report.get('name'))}</b> · {_when(report.get('created'))} · pass rate "
            f"{(report.get('pass_rate') or 0):.0%} · score {(report.get('score') or 0):.2f} · "
            f"{(report.get('input_tokens') or 0) + (report.get('output_tokens') or 0)} tokens · cost "
            f"{_money(report.get('cost'))} · {lat.get('mean', 0):.2f} s a run</div>")  # fmt: skip
    table = ("<table><tr><th></th><th>case</th><th>score</th><th>runs passed</th><th>time</th><th>tokens</th>"
             f"<th>cost</th><th>why</th></tr>{''.join(rows)}</table>")  # fmt: skip
    return f"{STYLE}<div class='ca-report' data-report='{e(report.get('id'))}'>{head}{table}</div>"


__all__ = ["report_html", "trace_html"]
