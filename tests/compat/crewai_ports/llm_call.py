"""CrewAI's docs (llms.mdx, "Direct LLM Calls"): LLM(...).call with a text and with messages."""

from chatagent.crewai import LLM

SOURCE = "docs/en/concepts/llms.mdx"
RULES = [
    ("contains", ["Say hello in French."], "Bonjour."),
    ("contains", ["You translate.", "Say thanks in German."], "Danke."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY", temperature=0.2, max_tokens=50)
    assert llm.call("Say hello in French.") == "Bonjour."
    messages = [{"role": "system", "content": "You translate."}, {"role": "user", "content": "Say thanks in German."}]
    assert llm.call(messages) == "Danke."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
