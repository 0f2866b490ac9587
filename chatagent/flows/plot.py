"""A flow's diagram, drawn here as SVG (in an HTML page, or alone): its methods in layers from the starts, an
arrow from each trigger to what it runs, router labels on the router's arrows. No network, no script."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 180, 44, 40, 70, 30
COLOURS = {"start": "#d9f2d9", "router": "#fde9c8", "listen": "#dde7f7"}


def layers(flow: Any) -> list[list[str]]:
    """The methods in layers: the starts first, then each method one layer below the latest of its triggers."""
    triggered: dict[str, Any] = flow._triggered
    labels = _labels(flow)
    depth = {name: 0 for name in flow._starts}
    for _ in range(len(triggered) + 1):  # relax: a method sits below every trigger it has (cycles stop here)
        changed = False
        for name, condition in triggered.items():
            sources = [s for n in condition.names() for s in ([n] if n in depth else labels.get(n, []))]
            known = [depth[s] for s in sources if s in depth and s != name]
            if known and depth.get(name, -1) < max(known) + 1 and max(known) + 1 <= len(triggered):
                depth[name] = max(known) + 1
                changed = True
        if not changed:
            break
    for name in triggered:
        depth.setdefault(name, 0)
    out: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
    for name in sorted(depth, key=lambda n: (depth[n], n)):
        out[depth[name]].append(name)
    return out


def _labels(flow: Any) -> dict[str, list[str]]:
    """Router labels (the strings listeners name that are not methods) -> the routers that may return them."""
    methods = set(flow._starts) | set(flow._triggered)
    routers = [r for r in flow._routers]
    out: dict[str, list[str]] = {}
    for condition in flow._triggered.values():
        for n in condition.names():
            if n not in methods:
                out[n] = routers
    return out


def edges(flow: Any) -> list[tuple[str, str, str]]:
    """(from, to, label) for every trigger: a method's completion, or a router's label."""
    methods = set(flow._starts) | set(flow._triggered)
    labels = _labels(flow)
    out = []
    for name, condition in sorted(flow._triggered.items()):
        for n in sorted(condition.names()):
            if n in methods:
                out.append((n, name, ""))
            else:
                out += [(r, name, n) for r in labels.get(n, [])]
    return out


def svg(flow: Any) -> str:
    """The diagram as an SVG document."""
    rows = layers(flow)
    width = MARGIN * 2 + max(len(r) for r in rows) * (BOX_W + GAP_X) - GAP_X
    height = MARGIN * 2 + len(rows) * (BOX_H + GAP_Y) - GAP_Y
    at: dict[str, tuple[float, float]] = {}
    for y, row in enumerate(rows):
        offset = (width - (len(row) * (BOX_W + GAP_X) - GAP_X)) / 2
        for x, name in enumerate(row):
            at[name] = (offset + x * (BOX_W + GAP_X), MARGIN + y * (BOX_H + GAP_Y))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="13">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        f"<title>{html.escape(type(flow).__name__ if not isinstance(flow, type) else flow.__name__)}</title>",
    ]
    for a, b, label in edges(flow):
        (x1, y1), (x2, y2) = at[a], at[b]
        sx, sy, ex, ey = x1 + BOX_W / 2, y1 + BOX_H, x2 + BOX_W / 2, y2
        if ey <= sy:  # a loop back up: leave from the side
            sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H / 2, x2 + BOX_W, y2 + BOX_H / 2
        dash = ' stroke-dasharray="5 3"' if label else ""
        parts.append(f'<path class="edge" d="M {sx:.0f} {sy:.0f} L {ex:.0f} {ey:.0f}" stroke="#555" fill="none" '
                     f'marker-end="url(#arrow)"{dash}/>')  # fmt: skip
        if label:
            parts.append(f'<text x="{(sx + ex) / 2 + 4:.0f}" y="{(sy + ey) / 2:.0f}" fill="#a05a00">'
                         f"{html.escape(label)}</text>")  # fmt: skip
    for name, (x, y) in at.items():
        kind = "router" if name in flow._routers else "start" if name in flow._starts else "listen"
        parts.append(f'<g class="method {kind}"><rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" '
                     f'rx="{22 if kind == "router" else 6}" fill="{COLOURS[kind]}" stroke="#333"/>'
                     f'<text x="{x + BOX_W / 2:.0f}" y="{y + BOX_H / 2 + 4:.0f}" text-anchor="middle">'
                     f"{html.escape(name)}</text></g>")  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)


def write_plot(flow: Any, filename: str | os.PathLike[str]) -> str:
    """Write the diagram to `filename` (.svg alone, else an HTML page; .html added to a bare name); the path."""
    path = Path(filename)
    if path.suffix.lower() not in (".html", ".htm", ".svg"):
        path = path.with_name(path.name + ".html")
    drawing = svg(flow)
    if path.suffix.lower() == ".svg":
        text = '<?xml version="1.0" encoding="UTF-8"?>\n' + drawing
    else:
        title = html.escape(flow.__name__)
        text = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
                f"<body><h1>{title}</h1>\n{drawing}\n</body></html>\n")  # fmt: skip
    path.write_text(text, encoding="utf-8")
    return str(path)


__all__ = ["edges", "layers", "svg", "write_plot"]
