"""中文文档问答：从中文文件（Word、PDF、文本，GBK 或 UTF-8 编码均可）中检索并注明出处。

    python examples/chinese_docs.py 手册.docx 笔记.txt -q "如何安装软件包？"
    python examples/chinese_docs.py            # 未给文件时，生成一个示例 Word 文档和一个 GBK 编码的文本文件

Chinese text is indexed with character bigrams (no dictionary to load), so the first question costs
no more than an English one. The model comes from the environment, as in assistant_rag.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from chatagent import Assistant


def demo_files() -> list[str]:
    import docx

    folder = Path(tempfile.mkdtemp(prefix="chatagent-zh-"))
    d = docx.Document()
    d.add_heading("大熊猫保护手册", level=1)
    d.add_paragraph("大熊猫主要以竹子为食，每天要吃十二到三十八公斤竹子。")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "基地"
    table.cell(0, 1).text = "城市"
    table.cell(1, 0).text = "大熊猫繁育研究基地"
    table.cell(1, 1).text = "成都"
    d.save(folder / "熊猫手册.docx")
    (folder / "参观须知.txt").write_bytes("参观时间：每天上午七点半至下午六点。请勿投喂食物。".encode("gbk"))
    return [str(folder / "熊猫手册.docx"), str(folder / "参观须知.txt")]


def main() -> None:
    parser = argparse.ArgumentParser(description="中文文档问答")
    parser.add_argument("files", nargs="*")
    parser.add_argument("-q", "--question", default="大熊猫每天吃多少竹子？参观时间是几点？")
    args = parser.parse_args()
    files = args.files or demo_files()
    print("文件：" + "、".join(Path(f).name for f in files), file=sys.stderr)
    bot = Assistant(llm=None, files=files, system_message="你是一个根据用户文件回答问题的助手。")
    print(f"用户：{args.question}\n助手：", end="", flush=True)
    for fragments in bot.run([{"role": "user", "content": args.question}], delta_stream=True):
        for f in fragments:
            if isinstance(f.get("content"), str):
                print(f["content"], end="", flush=True)
    print()


if __name__ == "__main__":
    main()
