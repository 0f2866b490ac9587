"""The chatagent web UI (Gradio): `WebUI(agent).run()`."""

from gui.web_ui import WebUI

__all__ = ["WebUI"]
