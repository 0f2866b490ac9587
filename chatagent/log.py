"""chatagent's logger, under Qwen-Agent's `qwen_agent.log` names.

Every chatagent module logs under `chatagent.*`; as a library it adds no handler of its own. Call
`setup_logger()` to see its records on stderr (DEBUG when CHATAGENT_DEBUG=1, else INFO).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("chatagent")


class _Handler(logging.StreamHandler):
    """The stderr handler `setup_logger` adds (told apart from others so that it is added once)."""


def setup_logger(level: int | None = None) -> logging.Logger:
    """Send chatagent's records to stderr at `level` (once: calling it again only changes the level)."""
    if level is None:
        level = (
            logging.DEBUG if os.environ.get("CHATAGENT_DEBUG", "").strip().lower() in ("1", "true") else logging.INFO
        )
    if not any(isinstance(h, _Handler) for h in logger.handlers):
        handler = _Handler()
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    return logger


__all__ = ["logger", "setup_logger"]
