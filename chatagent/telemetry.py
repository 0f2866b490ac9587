"""OpenTelemetry traces of runs, under their documented path: see `chatagent.run.telemetry`.

from chatagent import telemetry
telemetry.instrument()
"""

from chatagent.run.telemetry import instrument, uninstrument

__all__ = ["instrument", "uninstrument"]
