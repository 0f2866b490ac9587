"""RAG speed on real documents (the R manuals), beside Qwen-Agent's figures from issue 5.

    .venv/bin/python bench/rag.py [--cache DIR] [--queries N]

Fetches Debian's r-doc-pdf package once (`apt-get download r-doc-pdf`, then `dpkg -x`) into the cache
directory (default ~/.cache/chatagent-bench). Each scenario runs in a fresh process with an empty
workspace and measures: cold = imports + parse + chunk + index + the first question; warm = one more
question (the index is reused), median and max over the questions; retrieval alone; restart = a new process whose workspace has the
disk cache; and the process's peak memory (max RSS). Cold and warm are timed like Qwen-Agent's figures:
through the Assistant, with an instant loopback model (tests/support/openai_server.py), to the first
answer chunk; cold starts with the process (imports included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MANUALS = ["R-FAQ", "R-admin", "R-data", "R-exts", "R-intro", "R-ints", "R-lang"]
QUERIES = [
    "How do I install packages?",
    "What is lazy evaluation of function arguments?",
    "How do I call C code with .Call and protect objects from garbage collection?",
    "How do I read a CSV file into a data frame?",
    "What does the environment of a closure contain?",
    "How can I set the library path for installing packages?",
    "How are factors stored internally?",
    "What is the difference between lapply and sapply?",
]
# Issue 5: Qwen-Agent's Assistant with an instant loopback model, time to the first answer chunk.
QWEN_AGENT = {"manuals7": ("47 s", "5.7-6.3 s"), "refman": ("136 s", "18-22 s")}
TARGETS = {"manuals7": ("5 s", "50 ms"), "refman": ("15 s", "100 ms")}


def fetch_manuals(cache: Path) -> Path:
    """The directory holding the R manuals' PDFs, downloading and unpacking r-doc-pdf once."""
    manual_dir = cache / "x" / "usr" / "share" / "R" / "doc" / "manual"
    if (manual_dir / "refman.pdf").exists():
        return manual_dir
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob("r-doc-pdf_*.deb"))
    if not debs:
        print(f"fetching r-doc-pdf into {cache} ...", flush=True)
        subprocess.run(["apt-get", "download", "r-doc-pdf"], cwd=cache, check=True)
        debs = sorted(cache.glob("r-doc-pdf_*.deb"))
    subprocess.run(["dpkg", "-x", str(debs[-1]), str(cache / "x")], check=True)
    return manual_dir


def child(scenario: str, manual_dir: Path, n_queries: int) -> dict[str, object]:
    """Run one scenario in this process (a fresh one) and return its measurements."""
    started = time.perf_counter()
    from chatagent import Assistant
    from chatagent.rag import DocStore
    from tests.support.openai_server import OpenAIServer, Reply

    files = [manual_dir / f"{m}.pdf" for m in MANUALS] if scenario == "manuals7" else [manual_dir / "refman.pdf"]
    with OpenAIServer().start() as server:  # an instant loopback model, as in Qwen-Agent's measurement
        server.add(Reply(text="An instant answer from the loopback model.", repeat=True))
        llm = {"model": "instant", "model_server": server.base_url, "api_key": "k"}
        store = DocStore()  # the workspace comes from CHATAGENT_WORKSPACE, set by the parent
        bot = Assistant(llm=llm, files=[str(f) for f in files], rag_cfg={"store": store, "max_ref_token": 4000})

        def first_chunk(question: str) -> float:
            t = time.perf_counter()
            run = bot.run([{"role": "user", "content": question}])
            for rsp in run:
                if rsp and rsp[-1].get("content"):
                    break
            elapsed = time.perf_counter() - t
            run.close()
            return elapsed

        first_chunk(QUERIES[0])
        cold = time.perf_counter() - started
        warm = [first_chunk(q) for q in (QUERIES * 4)[:n_queries]]
    retrieval = []
    for query in (QUERIES * 4)[:n_queries]:
        t = time.perf_counter()
        found = store.retrieve(files, query, max_tokens=4000)
        retrieval.append(time.perf_counter() - t)
        assert found.chunks, query
    file_index, _ = store.load(files)
    search = []
    for query in (QUERIES * 4)[:n_queries]:
        t = time.perf_counter()
        file_index.select(query, 4000)
        search.append(time.perf_counter() - t)
    first = store.retrieve(files, QUERIES[0], max_tokens=4000)
    return {
        "pages": sum(len(e.pages) for e in file_index.entries),
        "chunks": len(file_index.chunks),
        "parses": store.parses,
        "cold_s": cold,
        "first_chunks": [f"{c.source} {c.pages}" for c in first.chunks[:3]],
        "warm_ms_median": statistics.median(warm) * 1000,
        "warm_ms_max": max(warm) * 1000,
        "retrieve_ms_median": statistics.median(retrieval) * 1000,
        "search_ms_median": statistics.median(search) * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def compare_pdf_parsers(manual_dir: Path) -> None:
    """PDFium (pypdfium2, used) against pypdf (the fallback) on two manuals: the gain that justifies PDFium."""
    from chatagent.rag.parsers import _parse_pdf_pdfium, _parse_pdf_pypdf

    for name in ("R-FAQ", "R-data"):
        data = (manual_dir / f"{name}.pdf").read_bytes()
        timings = {}
        for label, parse in (("pypdfium2", _parse_pdf_pdfium), ("pypdf", _parse_pdf_pypdf)):
            t = time.perf_counter()
            pages = parse(data, name, None)
            timings[label] = (time.perf_counter() - t, len(pages))
        (fast, n), (slow, _) = timings["pypdfium2"], timings["pypdf"]
        print(f"pdf_parse {name} ({n} pages): pypdfium2 {fast:.2f} s   pypdf {slow:.2f} s   ({slow / fast:.0f}x)")


def run_child(scenario: str, manual_dir: Path, workspace: Path, n_queries: int) -> dict[str, object]:
    env = {**os.environ, "CHATAGENT_WORKSPACE": str(workspace)}
    cmd = [sys.executable, __file__, "--child", scenario, "--manuals", str(manual_dir), "--queries", str(n_queries)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "chatagent-bench" / "r-doc-pdf")
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--child")
    parser.add_argument("--manuals", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.manuals, args.queries)))
        return
    manual_dir = fetch_manuals(args.cache)
    compare_pdf_parsers(manual_dir)
    for scenario in ("manuals7", "refman"):
        workspace = Path(tempfile.mkdtemp(prefix="chatagent-bench-"))
        try:
            cold = run_child(scenario, manual_dir, workspace, args.queries)
            restart = run_child(scenario, manual_dir, workspace, args.queries)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
        qa_cold, qa_warm = QWEN_AGENT[scenario]
        target_cold, target_warm = TARGETS[scenario]
        print(f"== {scenario}: {cold['pages']} pages, {cold['chunks']} chunks; first hits: {cold['first_chunks']}")
        print(f"{scenario} cold_s_to_first_chunk: {cold['cold_s']:.2f}   target: {target_cold}   qwen-agent: {qa_cold}")
        print(
            f"{scenario} warm_ms_to_first_chunk: {cold['warm_ms_median']:.1f} (max {cold['warm_ms_max']:.1f})   "
            f"target: {target_warm}   qwen-agent: {qa_warm}"
        )
        print(f"{scenario} retrieve_ms (hash files + search + select): {cold['retrieve_ms_median']:.1f}")
        print(f"{scenario} search_only_ms: {cold['search_ms_median']:.2f}")
        print(f"{scenario} restart_cold_s (disk cache): {restart['cold_s']:.2f}   parses: {restart['parses']}")
        print(f"{scenario} peak_rss_mb: {cold['peak_rss_mb']:.0f}")
    print("note: cold and warm are measured to the first answer chunk through the Assistant (loopback model)")


if __name__ == "__main__":
    main()
