"""The chatagent web UI (Gradio): `WebUI(agent).run()`."""

from chatagent.gui.web_ui import WebUI

__all__ = ["WebUI"]
