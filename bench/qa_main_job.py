"""Qwen-Agent's side of bench/main_job.py; runs in the Qwen-Agent venv (see bench/_qwen_agent.py).

    python qa_main_job.py --url URL --api-key K --model M --file R-intro.pdf --questions q.json --follow-up TEXT
                          [--max-tokens 512] [--max-ref-token N]

Its Assistant (default RAG settings unless --max-ref-token) on the embedded model's llama.cpp server at URL:
each question in a new conversation with the file attached, then the follow-up, timed as ours (to the first
answer text and to the end). Its answers carry no sources. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json

import qa_common
from _measure import distinct_ngram_ratio, timed_answer

qa_common.guard()


def ask(bot: object, messages: list[dict]) -> dict:
    try:
        first, total, response = timed_answer(bot, messages)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300], "response": []}
    text = response[-1].get("content") if response else ""
    text = text if isinstance(text, str) else ""
    return {"first_s": first, "total_s": total, "words": len(text.split()), "distinct4": distinct_ngram_ratio(text),
            "cut": False, "sources": None, "response": response, "text": text[:2000]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--url", "--api-key", "--model", "--file", "--questions", "--follow-up"):
        parser.add_argument(name, required=True)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--max-ref-token", type=int, default=None)
    args = parser.parse_args()
    from qwen_agent.agents import Assistant

    llm = {"model": args.model, "model_server": args.url, "api_key": args.api_key,
           "generate_cfg": {"max_tokens": args.max_tokens}}  # fmt: skip
    rag_cfg = {"max_ref_token": args.max_ref_token} if args.max_ref_token else None
    bot = Assistant(llm=llm, rag_cfg=rag_cfg)
    with open(args.questions, encoding="utf-8") as f:
        questions = json.load(f)
    rows = []
    for question, gold in questions:
        messages = [{"role": "user", "content": [{"text": question}, {"file": args.file}]}]
        first = ask(bot, messages)
        follow = ask(bot, messages + first["response"] + [{"role": "user", "content": args.follow_up}])
        for answer in (first, follow):
            answer.pop("response")
        rows.append({"question": question, "gold": gold, "first": first, "follow": follow, "gold_hit": None})
    qa_common.emit({"rows": rows})


if __name__ == "__main__":
    main()
