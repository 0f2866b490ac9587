"""CrewAI's flow template (templates/flow: a flow whose method kicks off a crew, its result kept in the state)."""

from pydantic import BaseModel

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.flow.flow import Flow, listen, start

SOURCE = "lib/crewai/src/crewai/cli/templates/flow"
RULES = [("contains", ["Write a poem with 3 sentences."], "One. Two. Three.")]


class PoemState(BaseModel):
    sentence_count: int = 1
    poem: str = ""


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")

    class PoemFlow(Flow[PoemState]):
        @start()
        def generate_sentence_count(self):
            self.state.sentence_count = 3

        @listen(generate_sentence_count)
        def generate_poem(self):
            poet = Agent(role="Poet", goal="Write poems", backstory="Lyrical.", llm=llm)
            task = Task(
                description="Write a poem with {sentence_count} sentences.", expected_output="The poem.", agent=poet
            )
            result = Crew(agents=[poet], tasks=[task]).kickoff(inputs={"sentence_count": self.state.sentence_count})
            self.state.poem = result.raw

        @listen(generate_poem)
        def save_poem(self):
            return self.state.poem.upper()

    flow = PoemFlow()
    assert flow.kickoff() == "ONE. TWO. THREE."
    assert flow.state.poem == "One. Two. Three."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
