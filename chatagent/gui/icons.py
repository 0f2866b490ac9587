"""The web UI's icons: small inline SVG drawings, so that they show on every machine (emoji need an emoji font,
which headless servers and many Linux desktops lack: there they were empty boxes).

`icon(name)` is the markup, for message texts and block titles (Gradio renders both as Markdown and keeps an
inline `<svg>` with its `class`, `style`, `width` and `height`; it drops `viewBox`, so each drawing is made in a
14 x 14 pixel space). The strokes use `currentColor`: the icons follow the theme's text colour. `badge(i)` is the
coloured dot that marks a speaker.
"""

from __future__ import annotations

SIZE = 14
_SVG = (
    '<svg class="chatagent-icon" style="display:inline;vertical-align:-2px;margin-right:2px" '
    f'xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" fill="none" stroke="currentColor" '
    'stroke-width="1.5" stroke-linecap="round" stroke-linejoin="round">{}</svg>'
)
_DRAWINGS = {
    "thinking": '<path d="M2 3h10v6H6l-3 3V9H2z"/>',  # a speech bubble
    "cut": '<circle cx="3.5" cy="10.5" r="2"/><circle cx="10.5" cy="10.5" r="2"/><path d="M5 9l7-8M9 9L2 1"/>',
    "sources": '<path d="M2 2h4a1 1 0 0 1 1 1v10a1 1 0 0 0-1-1H2zM12 2H8a1 1 0 0 0-1 1v10a1 1 0 0 1 1-1h4z"/>',
    "stopped": '<rect x="3" y="3" width="8" height="8" rx="1"/>',
    "waiting": '<path d="M3 1h8M3 13h8M4 1c0 4 6 4 6 6s-6 2-6 6M10 1c0 4-6 4-6 6s6 2 6 6"/>',  # an hourglass
    "blocked": '<path d="M7 1l5 2v4c0 3-2 5-5 6-3-1-5-3-5-6V3z"/>',  # a shield
    "paused": '<path d="M5 3v8M9 3v8"/>',
    "approved": '<path d="M2 7.5l3.5 3.5L12 3"/>',
    "denied": '<path d="M3 3l8 8M11 3l-8 8"/>',
    "result": '<path d="M4 2h6v11H4z"/><path d="M6 5h2M6 8h2"/>',  # a sheet
    "tool": '<path d="M9 2a3 3 0 0 0 2.8 4.2L6 12a1.4 1.4 0 0 1-2-2l5.8-5.8A3 3 0 0 0 9 2z"/>',  # a wrench
    "error": '<path d="M7 1.5l6 11H1z"/><path d="M7 6v3M7 11v.1"/>',  # a warning triangle
    "image": '<rect x="1.5" y="2.5" width="11" height="9" rx="1"/><path d="M2 11l3.5-4 3 3 1.5-1.5 2.5 2.5"/>',
    "audio": '<path d="M2 5h3l3-3v10L5 9H2zM10 5a3 3 0 0 1 0 4"/>',
    "video": '<rect x="1.5" y="3" width="8" height="8" rx="1"/><path d="M9.5 6l3-2v6l-3-2"/>',
    "file": '<path d="M3 1.5h5l3 3v8H3z"/><path d="M8 1.5v3h3"/>',
}
#: speakers' dot colours, in turn
BADGE_COLOURS = ("#2563eb", "#16a34a", "#9333ea", "#ea580c", "#dc2626", "#ca8a04", "#92400e", "#374151")


def icon(name: str) -> str:
    """The inline SVG of icon `name` (KeyError for a name not drawn here)."""
    return _SVG.format(_DRAWINGS[name])


def badge(i: int) -> str:
    """A filled dot of the i-th speaker colour (they repeat after len(BADGE_COLOURS))."""
    colour = BADGE_COLOURS[i % len(BADGE_COLOURS)]
    return _SVG.format(f'<circle cx="7" cy="7" r="5" fill="{colour}" stroke="none"/>')


__all__ = ["BADGE_COLOURS", "badge", "icon"]
