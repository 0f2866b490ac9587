"""CrewAI's docs (flows.mdx): async methods and kickoff_async on a running event loop."""

import asyncio

from chatagent.crewai.flow.flow import Flow, listen, start

SOURCE = "docs/en/concepts/flows.mdx"


class AsyncFlow(Flow):
    @start()
    async def fetch(self):
        await asyncio.sleep(0)
        self.state["items"] = [1, 2, 3]
        return 3

    @listen(fetch)
    async def total(self, count):
        await asyncio.sleep(0)
        return sum(self.state["items"]) * count


def main(server: str, workdir: str) -> None:
    async def go():
        return await AsyncFlow().kickoff_async()

    assert asyncio.run(go()) == 18


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
