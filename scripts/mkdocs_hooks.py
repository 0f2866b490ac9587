"""MkDocs hook (mkdocs.yml `hooks:`): the pages under docs/ that `nav` does not name join the navigation under
"More", in the order of their paths, so that a new page is reachable without being listed."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.nav import Navigation, Section


def on_nav(nav: Navigation, config: Any, files: Any) -> Navigation:
    listed = {page.file.src_uri for page in nav.pages}
    unlisted = sorted(
        (f for f in files.documentation_pages() if f.src_uri not in listed and f.page is not None),
        key=lambda f: f.src_uri,
    )
    if not unlisted:
        return nav
    pages = [f.page for f in unlisted]
    more = Section("More", pages)
    for page in pages:
        page.parent = more
    every = [*nav.pages, *pages]
    for before, after in zip(every[:-1], every[1:], strict=True):
        before.next_page, after.previous_page = after, before
    return Navigation([*nav.items, more], every)
