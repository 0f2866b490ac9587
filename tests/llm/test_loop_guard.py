"""LoopGuard and stop_loops: a looping answer is ended; quoting, lists and long answers are not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from chatagent.llm.local.loop_guard import LoopGuard, LoopStop, stop_loops
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect

LOOP = "To install a package, use the command install(name) which downloads it from the source code. "


def fragments(text: str, size: int = 7) -> Iterator[list[Fragment]]:
    for i in range(0, len(text), size):
        yield [Fragment("assistant", text[i : i + size], index=0)]


def test_a_looping_answer_is_caught_in_its_third_round() -> None:
    guard = LoopGuard()
    text = LOOP * 6
    at = next(i for i in range(0, len(text), 5) if guard.add(text[i : i + 5]))
    assert len(LOOP) < at < 3 * len(LOOP)


def test_a_long_varied_answer_a_list_and_a_repeated_phrase_are_not_loops() -> None:
    varied = " ".join(f"Step {i}: open the panel number {i * 7} and check valve {i * 3} for leaks." for i in range(60))
    listed = "\n".join(f"- `read.table(file{i}.csv, header=TRUE)` reads file {i}" for i in range(40))
    quoted = "The manual says: the limit is 7 bar. " + "As the manual says, the limit is 7 bar. " * 2
    for text in (varied, listed, quoted):
        guard = LoopGuard()
        assert not any(guard.add(text[i : i + 9]) for i in range(0, len(text), 9)), text[:40]


def test_stop_loops_ends_and_closes_the_stream_and_says_why() -> None:
    closed = []

    def backend() -> Iterator[list[Fragment]]:
        try:
            yield from fragments(LOOP * 40)
        finally:
            closed.append(True)

    reply = collect(stop_loops(backend()))
    assert reply[0].extra == {"stop_reason": "repetition"}
    assert reply[0].text.startswith(LOOP + LOOP) and len(reply[0].content) < 3 * len(LOOP)
    assert closed == [True]
    plain = collect(stop_loops(fragments("A short answer that does not repeat itself.")))
    assert plain[0].content == "A short answer that does not repeat itself." and not plain[0].extra


def test_the_async_stream_is_ended_and_closed_by_the_same_guards() -> None:
    closed = []

    async def backend() -> AsyncIterator[list[Fragment]]:
        try:
            for part in fragments(LOOP * 40):
                yield part
        finally:
            closed.append(True)

    async def read() -> list[list[Fragment]]:
        return [part async for part in LoopStop().arun(backend())]

    reply = collect(asyncio.run(asyncio.wait_for(read(), 30)))
    assert reply == collect(stop_loops(fragments(LOOP * 40))) and reply[0].extra == {"stop_reason": "repetition"}
    assert closed == [True]


def test_going_round_in_circles_with_small_changes_is_a_loop_too() -> None:
    names = ["install.packages()", "install_package()", "install_packages()", "install()", "add_package()"]
    text = "".join(
        f"You can install packages with the command `{names[i % 5]}` in R.\nThis will install packages that "
        f"{'have' if i % 2 else 'are'} not installed before.\n\n"
        for i in range(30)
    )
    guard = LoopGuard()
    at = next((i for i in range(0, len(text), 6) if guard.add(text[i : i + 6])), None)
    assert at is not None and at < len(text) // 2


SYSTEM = (
    "The user's messages may begin with excerpts from their files, each headed by its source as [file, p. N]. "
    "Answer from the excerpts when they are relevant and cite the source of what you use in the same form."
)


def test_an_answer_that_recites_the_system_message_is_taken_back_and_ended() -> None:
    closed = []

    def backend() -> Iterator[list[Fragment]]:
        try:
            yield from fragments("A factor is a vector of categories.\n\n" + SYSTEM.upper() + " And so on " * 50)
        finally:
            closed.append(True)

    reply = collect(stop_loops(backend(), SYSTEM))
    assert reply[0].content == "A factor is a vector of categories." and reply[0].extra == {
        "stop_reason": "prompt_echo"
    }
    assert closed == [True]


def test_quoting_a_few_words_of_the_system_message_is_no_recital() -> None:
    answer = "As the excerpts say, a factor is a vector: each headed by its source as shown. [manual.pdf, p. 3]"
    reply = collect(stop_loops(fragments(answer), SYSTEM))
    assert reply[0].content == answer and not reply[0].extra
    assert collect(stop_loops(fragments(SYSTEM), ""))[0].content == SYSTEM  # no system message: nothing to recite


def caught_at(text: str, size: int = 6) -> int | None:
    """Where in `text` (read `size` characters at a time) the guard says the answer loops; None if it never does."""
    guard = LoopGuard()
    return next((i for i in range(0, len(text), size) if guard.add(text[i : i + size])), None)


def test_a_count_is_a_loop_though_no_words_repeat() -> None:
    """SmolLM2-135M on "What is the capital of France?": it counts to the token limit; no 8 words repeat and every
    4 words are new, so only the count gives it away."""
    counting = "La capitale de France est le 75, " + ", ".join(f"le {n}" for n in range(76, 400)) + "."
    at = caught_at(counting)
    assert at is not None and at < len("La capitale de France est le 75, ") + 20 * len("le 100, ")
    bare = ", ".join(str(n) for n in range(3, 500, 2))  # a unit of one word, counting by two
    assert caught_at(bare) is not None
    assert caught_at(", ".join(str(n) for n in range(1, 13))) is None  # a short count is an answer


def test_numbered_lists_and_tables_of_numbers_are_no_count() -> None:
    steps = " ".join(f"Step {i}: open the panel number {i * 7} and check valve {i * 3} for leaks." for i in range(60))
    cities = " ".join(f"{i}. {c}" for i, c in enumerate(["Paris", "Lyon", "Nice", "Lille", "Metz", "Nancy"] * 8, 1))
    table = "\n".join(f"| {i * 37 % 101} | {i * 53 % 89} |" for i in range(60))  # numbers, but nothing counting
    same = "Version 3, version 3, " * 4 + "and version 4."
    for text in (steps, cities, table, same):
        assert caught_at(text) is None, text[:40]


def test_an_answer_that_drifts_or_repeats_after_answering_ends_there() -> None:
    """What SmolLM2 said under the passage on R-intro.pdf: the answer, then the passage's next heading and text."""
    answer = "A factor is a vector object used to specify a discrete classification. R provides ordered factors.\n"
    drift = answer + "4.2 A specific example\nThe example of the tax accountant is specified by a character vector."
    repeat = "To quit R, use q(). Quit saves nothing unless asked.\nTo quit R, use q(), and quit saves nothing. Quit R."
    for text, question, kept in (
        (drift, "What is a factor?", answer.strip()),
        (repeat, "How do I quit R?", "To quit R, use q(). Quit saves nothing unless asked."),
    ):
        reply = collect(LoopStop(question=question).run(fragments(text)))
        assert reply[0].content == kept and not reply[0].extra
    assert collect(LoopStop().run(fragments(drift)))[0].content == drift  # no question: nothing judged
