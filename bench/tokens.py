"""Token counting: our calibrated estimate against the real tokenizers, on English, Chinese, code, JSON and numbers.

    .venv/bin/python bench/tokens.py [--no-local]

The references are measured in the same run: Qwen's BPE (the qwen.tiktoken file inside the dashscope package,
through tiktoken) and the embedded model's own tokenizer (llama.cpp's, SmolLM2; skipped with --no-local). Printed
per kind of text: the estimate's error against each (goal: within ±10% of Qwen's BPE), the estimate before this
issue (issue 12: +64% on Chinese, -65% on digits), and how fast each counts.

The texts: `english` (the prose of our manual), `chinese` (prose written for this benchmark), code, JSON and
numbers; and real text written by others for readers, `english_real` and `chinese_real`: the README of the
dashscope package's examples in English and its Chinese version (technical prose mixing Chinese with names and
code, as documentation does), shipped inside that package. The manual states the worst errors measured here.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatagent.utils.tokens import count_tokens, qwen_tokenizer  # noqa: E402

CHINESE = """第一章 安装与配置

本软件可以在常见的操作系统上运行，包括 Linux、macOS 和 Windows。安装之前，请先确认计算机上已经安装了三点一零或更高版本的解释器，\
并且磁盘上至少有两百兆字节的可用空间。如果您所在的网络环境无法访问外部服务器，可以先在另一台计算机上下载安装包，再通过移动硬盘复制过来。

安装完成后，程序会在用户目录下创建一个配置文件。配置文件采用简单的键值格式，每一行写一个设置项。常用的设置项包括：工作目录、日志级别、\
默认语言以及模型服务的地址。修改配置文件以后，需要重新启动程序，新的设置才会生效。

第二章 日常使用

打开程序以后，您会看到一个简洁的对话窗口。在输入框中输入问题，然后按回车键，助手就会开始回答。回答的内容会逐字显示，您不必等到整段文字\
生成完毕再阅读。如果回答偏离了您的意图，可以随时点击“停止”按钮，然后换一种说法重新提问。

您也可以把文件拖到窗口里。程序会读取文件中的文字，把它们分成若干小段，并为每一段建立索引。提问时，助手会先在这些小段中查找与问题最相关的\
内容，再根据找到的内容作答，并在回答末尾注明出处，例如文件名和页码。这样，您可以方便地核对答案是否可靠。

第三章 常见问题

问：为什么第一次提问比较慢？
答：第一次提问时，程序需要读取并整理您提供的文件。文件越大，需要的时间越长。整理好的结果会保存在缓存目录中，之后再次使用同一个文件时，\
就不需要重新整理了。

问：回答中出现了文件里没有的内容，怎么办？
答：小型模型有时会根据自己的知识补充内容，这些内容不一定准确。建议您查看回答下方列出的出处，对照原文进行判断。如果需要更高的准确性，\
可以在设置中改用更大的模型。

第四章 数据与隐私

程序默认只在本机上处理您的文件，不会把文件内容上传到任何服务器。只有当您在设置中配置了远程模型服务时，与问题相关的片段才会随问题一起\
发送给该服务。请根据您所在单位的规定，决定是否启用远程服务。日志文件只记录运行状态，不包含对话内容。
"""

# The estimate before issue 12, for comparison: a CJK character 1 token, letters 6 per token, digits 3 per token.
_OLD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|[^\W\d_]{1,6}|\d{1,3}|[^\w\s]")


def old_estimate(text: str) -> int:
    return len(_OLD.findall(text))


def samples() -> dict[str, str]:
    rnd = random.Random(7)
    manual = "\n\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))])
    prose = "\n\n".join(p for p in manual.split("\n\n") if not p.lstrip().startswith(("```", "|", "#")))
    records = [
        {"id": i, "name": f"user_{rnd.randint(1000, 9999)}", "email": f"person{i}@example.com",
         "active": rnd.random() > 0.5, "score": round(rnd.uniform(0, 100), 2), "tags": ["admin", "beta"],
         "created": f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:00:00Z"}
        for i in range(80)
    ]  # fmt: skip
    rows = ["date,station,temperature,humidity,pressure,rain_mm"] + [
        f"2023-{d // 28 % 12 + 1:02d}-{d % 28 + 1:02d},{rnd.randint(10000, 99999)},{rnd.uniform(-10, 35):.1f},"
        f"{rnd.randint(20, 100)},{rnd.uniform(980, 1040):.2f},{rnd.uniform(0, 40):.1f}"
        for d in range(400)
    ]
    sources = ["agent.py", "schema/stream.py", *(f"cli/{m}.py" for m in ("build", "terminal", "commands", "entry"))]
    code = "".join((ROOT / "chatagent" / f).read_text(encoding="utf-8") for f in sources)
    return {
        "english": prose,
        "chinese": CHINESE * 4,
        "code": code,
        "json": json.dumps(records[:40], indent=2) + "\n" + json.dumps(records[40:], ensure_ascii=False),
        "numbers": "\n".join(rows),
        **real_texts(),
    }


def real_texts() -> dict[str, str]:
    """`english_real` and `chinese_real`: the dashscope package's examples READMEs (English, and Chinese), each
    as a whole; none when the installed dashscope does not ship them."""
    import dashscope

    examples = Path(dashscope.__file__).parent / "examples"
    pairs = {"english_real": ("README.md", "04_real_world_scenarios/README.md"),
             "chinese_real": ("README_zh.md", "04_real_world_scenarios/README_zh.md")}  # fmt: skip
    found = {}
    for kind, names in pairs.items():
        paths = [examples / n for n in names]
        if all(p.is_file() for p in paths):
            found[kind] = "\n\n".join(p.read_text(encoding="utf-8") for p in paths)
    return found


def timed(count, text: str) -> tuple[int, float]:
    start = time.perf_counter()
    n = count(text)
    return n, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-local", action="store_true", help="skip the embedded model's tokenizer")
    args = parser.parse_args()
    started = time.perf_counter()
    qwen = qwen_tokenizer()
    print(f"qwen_bpe_load_seconds: {time.perf_counter() - started:.2f}")
    if qwen is None:
        print("qwen_bpe: missing (tiktoken or dashscope's qwen.tiktoken not installed): nothing to compare")
        return
    local = None
    if not args.no_local:
        from chatagent.llm.local import LocalModel

        local = LocalModel().tokenizer
    worst: dict[str, float] = {}
    for kind, text in samples().items():
        exact, t_bpe = timed(qwen.count, text)
        ours, t_est = timed(count_tokens, text)
        error = (ours - exact) / exact
        language = "chinese" if kind.startswith("chinese") else "other"
        worst[language] = max(worst.get(language, 0.0), abs(error))
        line = (f"{kind}: qwen_bpe {exact} tokens, estimate {ours} ({error:+.1%}), before this issue "
                f"{old_estimate(text)} ({(old_estimate(text) - exact) / exact:+.1%})")  # fmt: skip
        if local is not None:
            smol = local.count(text)
            line += f"; smollm2 {smol} (estimate {(ours - smol) / smol:+.1%})"
        print(line + f"; {len(text) / t_est / 1e6:.1f} MB/s estimate, {len(text) / t_bpe / 1e6:.1f} MB/s qwen_bpe")
    print(f"estimate_worst_error_vs_qwen_bpe_english_code_json_numbers: {worst['other']:.1%}   goal: <= 10%")
    print(f"estimate_worst_error_vs_qwen_bpe_chinese: {worst['chinese']:.1%}   goal: <= 10% (the manual states it)")


if __name__ == "__main__":
    main()
