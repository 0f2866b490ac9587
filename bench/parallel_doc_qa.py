"""ParallelDocQA's members run concurrently: wall time of one question over a long document, beside the same run
with one member at a time (max_workers=1), measured in the same run.

    .venv/bin/python bench/parallel_doc_qa.py [--quick]

The model is the loopback OpenAI-compatible server (tests/support), answering every member after MODEL_DELAY
seconds, as a real model takes time to read a part: the ratio shows how much of that waiting the members'
threads overlap. The document is Markdown of PARTS * ~1000 tokens; its parsing and index are cached before
timing, so both figures are model time plus the framework's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _measure import best, show  # noqa: E402

from chatagent.agents.doc_qa.parallel_doc_qa import PART_TOKENS, ParallelDocQA, parts  # noqa: E402
from chatagent.rag.store import DocStore  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402
from tests.support.openai_server import Reply as ServerReply  # noqa: E402

MODEL_DELAY = 0.2
SENTENCE = "The committee reviewed the quarterly figures and noted steady progress in every region. "


def reply(request) -> ServerReply:
    prompt = request.json["messages"][-1]["content"]
    if "<None>" not in prompt:
        return ServerReply(text="The vault code is 4242.", delay=MODEL_DELAY)
    found = "4242" in prompt.split("# Question")[0]
    answer = {"res": "ans", "content": "4242"} if found else {"res": "none", "content": "<None>"}
    return ServerReply(text=json.dumps(answer), delay=MODEL_DELAY)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sections = 6 if args.quick else 16
    repeats = 1 if args.quick else 3
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as server:
        doc = Path(tmp) / "report.md"
        body = [f"## Section {i}\n\n" + SENTENCE * 60 for i in range(sections)]
        body[sections // 2] += "\n\nThe vault code is 4242."
        doc.write_text("\n\n".join(body))
        store = DocStore(Path(tmp) / "store")
        n = len(parts(store.load([str(doc)])[0], PART_TOKENS))
        llm = {"model": "m", "model_server": server.base_url, "api_key": "k"}
        question = [{"role": "user", "content": [{"text": "What is the vault code?"}, {"file": str(doc)}]}]

        def run(workers: int) -> float:
            bot = ParallelDocQA(llm=llm, rag_cfg={"store": store}, max_workers=workers)

            def once() -> None:
                server.add(*[reply] * (n + 1))
                answer = bot.run_nonstream(question)
                assert "4242" in answer[-1]["content"], answer

            return best(once, repeats, time.perf_counter)

        parallel = run(8)
        sequential = run(1)
    show("parallel_doc_qa_parts", f"{n} members of ~{PART_TOKENS} tokens, model answers after {MODEL_DELAY}s")
    show(
        "parallel_doc_qa_8_workers_s",
        f"{parallel:.2f} (sequential, 1 worker: {sequential:.2f}; ratio {sequential / parallel:.1f}x)",
    )


if __name__ == "__main__":
    main()
