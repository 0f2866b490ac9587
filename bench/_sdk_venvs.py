"""The providers' official SDKs, each pinned in an offline venv of its own (bench/_venv.py), the references of
bench/native_backends.py: nothing of chatagent is importable beside them.

    .venv/bin/python bench/_sdk_venvs.py [provider ...]      # make the venvs (once), print where they are
"""

from __future__ import annotations

import sys

from _venv import ReferenceUnavailable, ReferenceVenv

ANTHROPIC, GOOGLE_GENAI, BOTO3, OPENAI = "2.15.0", "3.6.1", "1.44.8", "3.57.0"

SDKS = {
    "anthropic": ReferenceVenv(
        "sdk-anthropic", f"anthropic {ANTHROPIC}", [f"anthropic=={ANTHROPIC}"], "import anthropic"
    ),
    "gemini": ReferenceVenv(
        "sdk-google-genai",
        f"google-genai {GOOGLE_GENAI}",
        [f"google-genai=={GOOGLE_GENAI}"],
        "from google import genai",
    ),
    "bedrock": ReferenceVenv("sdk-boto3", f"boto3 {BOTO3}", [f"boto3=={BOTO3}"], "import boto3"),
    "responses": ReferenceVenv("sdk-openai", f"openai {OPENAI}", [f"openai=={OPENAI}"], "import openai"),
}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(SDKS):
        sdk = SDKS[name]
        try:
            print(f"{sdk.label}: {sdk.ensure()}", flush=True)
        except ReferenceUnavailable as exc:
            print(f"{sdk.label} reference missing: {exc}", flush=True)
