"""CrewAI programs, `crewai` renamed to `chatagent.crewai`, run on chatagent against the protocol-speaking loopback
model (tests/compat/crewai_ports). Each port is checked three ways, as the Qwen-Agent ports are: its own
assertions, every scripted model decision was asked for, and nothing was sent that a strict OpenAI-compatible
server rejects. The same programs run on CrewAI itself in test_crewai_ports_on_crewai.py."""

from __future__ import annotations

import pytest

from tests.compat.crewai_ports import PORTS, load


def setup_server(server, port) -> None:
    """Queue the port's model decisions and set its rules."""
    for rule in getattr(port, "RULES", ()):
        server.rules.append({"contains": list(rule[1]), "say": rule[2]} if isinstance(rule[2], str)
                            else {"contains": list(rule[1]), **rule[2]})  # fmt: skip
    server.script(*getattr(port, "MODEL", ()))


@pytest.mark.parametrize("name", PORTS)
def test_crewai_port_runs_on_chatagent(name, protocol_server, tmp_path, monkeypatch, request):
    port = load(name)
    expect = getattr(port, "EXPECT", "pass")
    if expect != "pass":
        request.applymarker(pytest.mark.xfail(reason=expect, strict=True))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "storage"))
    setup_server(protocol_server, port)
    port.main(protocol_server.base_url, str(tmp_path))
    assert not protocol_server.rejected, f"sent what a strict server rejects: {protocol_server.rejected[0][1]}"
    assert protocol_server.pending == 0, f"{protocol_server.pending} scripted model decisions were never asked for"
