"""CrewAI's docs (custom-llm.mdx): a BaseLLM subclass whose call() gives the answer, used by an agent."""

from chatagent.crewai import Agent, BaseLLM, Crew, Task

SOURCE = "docs/en/learn/custom-llm.mdx"
ASKED = []


class EchoLLM(BaseLLM):
    def __init__(self, model: str = "echo", temperature=None):
        super().__init__(model=model, temperature=temperature)

    def call(
        self, messages, tools=None, callbacks=None, available_functions=None, from_task=None, from_agent=None, **kwargs
    ):
        text = messages if isinstance(messages, str) else messages[-1]["content"]
        ASKED.append(text)
        return "The answer is 4."

    def supports_function_calling(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def main(server: str, workdir: str) -> None:
    agent = Agent(role="Mathematician", goal="Add numbers", backstory="Exact.", llm=EchoLLM())
    task = Task(description="What is 2 + 2?", expected_output="The sum.", agent=agent)
    result = Crew(agents=[agent], tasks=[task]).kickoff()
    assert "4" in result.raw, result.raw
    assert any("What is 2 + 2?" in a for a in ASKED), ASKED


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
