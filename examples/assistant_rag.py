"""Answer questions from your files, citing file and page.

    python examples/assistant_rag.py manual.pdf notes.docx https://example.com/faq.html -q "How do I install packages?"
    python examples/assistant_rag.py            # no files: a small demo document is written and used

Files are parsed and indexed once (cached by content under ~/.cache/chatagent, or CHATAGENT_WORKSPACE);
progress is printed while they load (page by page for a PDF). Each answer streams, then its sources are
listed (file, page, the start of the excerpt). Without -q, questions are read from standard input, one per line.
The model comes from the environment: DASHSCOPE_API_KEY, or OPENAI_API_KEY with OPENAI_BASE_URL and
OPENAI_MODEL, or else the embedded local model.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from chatagent import Assistant
from chatagent.rag import Progress
from chatagent.rag.chunking import source_label

DEMO = """# Greenhouse manual

## Watering
Water the tomatoes every morning; in July, water them again in the evening.

## Heating
The heater switches on below 8 degrees Celsius. Its filter is cleaned every March.
"""


def show_progress(p: Progress) -> None:
    """One line per step on stderr; the pages of a large file overwrite each other."""
    end = "\r" if p.stage == "read" and p.done < p.total else "\n"
    print(f"  {p.describe():<70}", end=end, file=sys.stderr, flush=True)


def show_sources(answer: dict) -> None:
    extra = answer.get("extra") or {}
    if extra.get("stop_reason") == "length":
        print("[cut off: the answer reached its token limit]")
    for n, src in enumerate(extra.get("sources") or [], 1):
        print(f"  [{n}] {source_label(src)}: {src['text'][:90]}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Answer questions from files.")
    parser.add_argument("files", nargs="*", help="paths or http(s) URLs (pdf, docx, pptx, xlsx, csv, html, md, txt)")
    parser.add_argument("-q", "--question", help="one question (else read from standard input)")
    parser.add_argument("--max-ref-token", type=int, default=None, help="token budget for the excerpts")
    args = parser.parse_args()
    files = args.files
    if not files:
        demo = Path(tempfile.mkdtemp(prefix="chatagent-demo-")) / "greenhouse.md"
        demo.write_text(DEMO, encoding="utf-8")
        files = [str(demo)]
        print(f"(no files given: using the demo document {demo})", file=sys.stderr)
    rag_cfg: dict = {"on_progress": show_progress}
    if args.max_ref_token:
        rag_cfg["max_ref_token"] = args.max_ref_token
    bot = Assistant(
        llm=None, files=files, rag_cfg=rag_cfg, system_message="You answer questions about the user's documents."
    )
    questions = [args.question] if args.question else (line.strip() for line in sys.stdin if line.strip())
    history: list[dict] = []
    for question in questions:
        history.append({"role": "user", "content": question})
        print(f"user: {question}")
        response: list[dict] = []
        shown = 0
        for response in bot.run(history):  # cumulative: each yield is the whole answer so far
            text = response[-1].get("content") or "" if response else ""
            if text and not shown:
                print("assistant: ", end="")
            print(text[shown:], end="", flush=True)  # only what is new
            shown = len(text)
        print()
        if response:
            show_sources(response[-1])
        history.extend(response)


if __name__ == "__main__":
    main()
