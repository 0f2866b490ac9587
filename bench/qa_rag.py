"""Qwen-Agent's side of bench/rag.py; runs in the Qwen-Agent venv (see bench/_qwen_agent.py).

    QWEN_AGENT_DEFAULT_WORKSPACE=DIR python qa_rag.py --url URL --files a.pdf,b.pdf --queries N

Its Assistant with the files (default RAG settings except max_ref_token=4000, as ours: hybrid keyword +
front-page search, keyword generation by the model), over the instant loopback model at URL, timed as
ours: cold = from the start of this process (imports included) to the first answer chunk of the first
question; warm = each further question to its first answer chunk. The workspace (its parsed-document
cache) is the caller's: empty for a cold run, kept for a restart. Prints one JSON line.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402

import qa_common  # noqa: E402
from _measure import seconds_to_first_text  # noqa: E402

qa_common.guard()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--files", required=True)
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--questions", required=True, help="questions, one per line, in a file")
    args = parser.parse_args()
    from qwen_agent.agents import Assistant

    with open(args.questions, encoding="utf-8") as f:
        questions = [line.strip() for line in f if line.strip()]
    llm = {"model": "instant", "model_server": args.url, "api_key": "k"}
    bot = Assistant(llm=llm, files=args.files.split(","), rag_cfg={"max_ref_token": 4000})

    seconds_to_first_text(bot, questions[0])
    cold = time.perf_counter() - STARTED
    warm = [seconds_to_first_text(bot, q) for q in (questions * 4)[1 : 1 + args.queries]]
    qa_common.emit(
        {
            "cold_s": cold,
            "warm_s": warm,
            "warm_ms_median": statistics.median(warm) * 1000 if warm else None,
            "warm_ms_max": max(warm) * 1000 if warm else None,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


if __name__ == "__main__":
    main()
