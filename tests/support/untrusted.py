"""Tool results reach the model marked as untrusted data (`chatagent.llm.prepare.untrusted`): `data_of` takes the
marks off again, for scripted models and loopback servers that answer from a result."""

from __future__ import annotations

import re

_MARKED = re.compile(r'<untrusted-data source="[^"]*">\n(.*)\n</untrusted-data>', re.S)


def data_of(text: str) -> str:
    """`text` without the untrusted-data marks around it; AssertionError when it has none."""
    found = _MARKED.fullmatch(text)
    assert found, f"a tool result reached the model unmarked: {text[:80]!r}"
    return found.group(1)
