"""Qwen-Agent programs, imports renamed, run on chatagent against the protocol-speaking loopback model.

Each port (tests/compat/ports) is checked three ways: its own assertions (those of the Qwen-Agent test or
what its example shows), every model decision it scripted was asked for (no more, no fewer), and nothing
was sent that a strict OpenAI-compatible server rejects. The same programs run on Qwen-Agent itself in
test_ports_on_qwen_agent.py.
"""

from __future__ import annotations

import pytest

from tests.compat.ports import PORTS, load


def setup_server(server, port, resources) -> None:
    """Queue the port's model decisions (`MODEL`, or `MODEL(resources)`) and set its server rules."""
    for rule in getattr(port, "RULES", ()):
        if rule == "keywords":
            server.answer_keyword_generation()
        elif rule[0] == "members":
            server.answer_members(rule[1], rule[2])
        elif rule[0] == "contains":  # an answer to any request whose messages hold all these texts
            server.rules.append({"contains": list(rule[1]), "say": rule[2]})
    server.script(*(port.MODEL(str(resources)) if callable(port.MODEL) else port.MODEL))


@pytest.mark.parametrize("name", PORTS)
def test_port_runs_unchanged(name, protocol_server, resources, request):
    port = load(name)
    expect = getattr(port, "EXPECT", "pass")
    if expect != "pass":
        request.applymarker(pytest.mark.xfail(reason=expect, strict=True))
    setup_server(protocol_server, port, resources)
    port.main(protocol_server.base_url, str(resources))
    assert not protocol_server.rejected, f"sent what a strict server rejects: {protocol_server.rejected[0][1]}"
    assert protocol_server.pending == 0, f"{protocol_server.pending} scripted model decisions were never asked for"
