"""A flow's checkpoint history (`Flow.history`) and forks from it (`Flow.fork`, `Flow.replay`), on SQLite (steps in
the flow's journal until the flow ends) and PostgreSQL: a fork from the middle step runs a new branch with the
edited state, the original flow and its history unchanged; the newest `history_limit` checkpoints are kept; another
principal neither lists nor forks a flow."""

from __future__ import annotations

import pytest

from chatagent.flows.conditions import listen, start
from chatagent.flows.flow import Flow
from chatagent.flows.state import FlowState
from chatagent.run.trust import Trust, acting_as
from chatagent.sessions.flow_states import FlowStates

ALICE = Trust(principal="client:alice", shared=True)
BOB = Trust(principal="client:bob", shared=True)


class Counts(FlowState):
    size: int = 1
    log: list[str] = []


class Steps(Flow[Counts]):
    """Five methods in a chain; each doubles the size and notes its name (`ran`: every method run, in any flow)."""

    ran: list[str] = []
    seen: list[list[str | None]] = []  # the history each `third` saw while the flow ran

    def _step(self, name: str) -> int:
        type(self).ran.append(name)
        self.state.size *= 2
        self.state.log = [*self.state.log, name]
        return self.state.size

    @start()
    def first(self) -> int:
        return self._step("first")

    @listen(first)
    def second(self) -> int:
        return self._step("second")

    @listen(second)
    def third(self) -> int:
        type(self).seen.append([c.method for c in self.history()])
        return self._step("third")

    @listen(third)
    def fourth(self) -> int:
        return self._step("fourth")

    @listen(fourth)
    def fifth(self) -> int:
        return self._step("fifth")


class Short(Steps):
    history_limit = 3


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Steps.ran, Steps.seen = [], []


def test_a_fork_from_the_middle_step_runs_a_new_branch_and_leaves_the_original(store_url: str) -> None:
    flow = Steps(store=store_url)
    assert flow.kickoff() == 32
    cps = flow.history()
    assert [c.method for c in cps] == [None, "first", "second", "third", "fourth", "fifth"]
    assert [c.state["size"] for c in cps] == [1, 2, 4, 8, 16, 32]
    assert Steps.seen == [[None, "first", "second"]]  # read while the flow ran (on SQLite: from its journal)
    assert all(c.at > 0 for c in cps) and len({c.id for c in cps}) == 6
    middle = cps[3]  # after `third`
    Steps.ran = []
    branch, out = flow.replay(middle.id, {"size": 100})
    assert out == 400 and Steps.ran == ["fourth", "fifth"]  # the first three are not run again
    assert branch.id != flow.id and branch.state.size == 400
    assert branch.state.log == ["first", "second", "third", "fourth", "fifth"]
    assert [c.method for c in branch.history()] == ["third", "fourth", "fifth"]  # from the fork on
    assert [c.state["size"] for c in branch.history()] == [100, 200, 400]
    again = Steps(store=store_url).history(flow.id)  # the original, read anew: unchanged
    assert [(c.id, c.method, c.state) for c in again] == [(c.id, c.method, c.state) for c in cps]
    stored = FlowStates(store_url).load(flow.id)
    assert stored is not None and stored[1] == "done" and stored[2]["state"]["size"] == 32
    assert stored[2]["output"] == 32 and FlowStates(store_url).load(branch.id)[2]["forked_from"] == {  # type: ignore[index]
        "flow_id": flow.id, "checkpoint": middle.id, "at": pytest.approx(branch.history()[0].at, abs=5)}  # fmt: skip


def test_a_fork_is_stored_and_resumed_like_any_flow(store_url: str) -> None:
    flow = Steps(store=store_url)
    flow.kickoff()
    start_cp = flow.history()[0]
    branch = flow.fork(start_cp.id, Counts(size=3))  # a state model: its fields, not its id
    assert FlowStates(store_url).load(branch.id) is not None and Steps.ran.count("first") == 1
    assert Steps.resume(branch.id, store=store_url) == 96 and Steps.ran.count("first") == 2
    assert flow.history()[-1].state["size"] == 32


def test_an_unknown_checkpoint_or_a_given_id_is_refused(store_url: str) -> None:
    flow = Steps(store=store_url)
    flow.kickoff()
    with pytest.raises(ValueError, match="no checkpoint"):
        flow.fork("999")
    with pytest.raises(ValueError, match="no checkpoint"):
        flow.fork("not-a-step")
    with pytest.raises(ValueError, match="'id'"):
        flow.fork(flow.history()[1].id, {"id": "mine"})
    with pytest.raises(TypeError):
        flow.fork(flow.history()[1].id, ["size", 2])
    assert Steps(store=store_url, persist=False).history() == []


def test_the_newest_checkpoints_stay_and_older_ones_go(store_url: str) -> None:
    flow = Short(store=store_url)
    flow.kickoff()
    kept = flow.history()
    assert [c.method for c in kept] == ["third", "fourth", "fifth"]
    assert [c.method for c in Steps(store=store_url).history(flow.id)] == ["third", "fourth", "fifth"]
    with pytest.raises(ValueError, match="no checkpoint"):
        flow.fork("1")  # after `first`: gone
    states = FlowStates(store_url)
    rows = states.store._read("SELECT step FROM chatagent_flow_checkpoints WHERE flow_id = ?", (flow.id,))
    assert sorted(int(r[0]) for r in rows) == [int(c.id) for c in kept]  # deleted from the store, not hidden


def test_no_history_is_kept_with_a_limit_of_zero(store_url: str) -> None:
    class Bare(Steps):
        history_limit = 0

    flow = Bare(store=store_url)
    assert flow.kickoff() == 32 and flow.history() == []
    rows = FlowStates(store_url).store._read("SELECT step FROM chatagent_flow_checkpoints WHERE flow_id = ?",
                                              (flow.id,))  # fmt: skip
    assert rows == []


def test_another_principal_neither_lists_nor_forks_a_flow(store_url: str) -> None:
    with acting_as(ALICE):
        flow = Steps(store=store_url)
        flow.kickoff()
        mine = flow.history()
    assert len(mine) == 6
    with acting_as(BOB):
        other = Steps(store=store_url)
        assert other.history(flow.id) == []
        with pytest.raises(ValueError, match="no Steps"):
            other.fork(mine[3].id, flow_id=flow.id)
    with acting_as(ALICE):
        branch = Steps(store=store_url).fork(mine[3].id, flow_id=flow.id)
    with acting_as(BOB):
        assert other.history(branch.id) == []  # the branch is Alice's too
        with pytest.raises(ValueError):
            Steps.resume(branch.id, store=store_url)
    with acting_as(ALICE):
        assert Steps.resume(branch.id, store=store_url) == 32


def test_a_flow_of_another_class_is_not_forked(store_url: str) -> None:
    class Other(Flow):  # pyright: ignore[reportMissingTypeArgument]
        @start()
        def only(self) -> str:
            return "x"

    other = Other(store=store_url)
    other.kickoff()
    with pytest.raises(ValueError, match="no Steps"):
        Steps(store=store_url).fork(other.history()[0].id, flow_id=other.id)
