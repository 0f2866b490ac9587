"""Guardrails and a person in the loop: card numbers never reach the model, the answer is checked before it is
final, and a payment waits for your yes.

    python examples/guarded_agent.py "Pay Bob 150 euros from my card 4111 1111 1111 1111."

The payment tool needs approval above 100: the run pauses, you answer y or n, and the run goes on (a no reaches
the model as the tool's result).
"""

from __future__ import annotations

import sys

from chatagent import FnCallAgent, OutputGuardrail, TextPolicy, approval_message, pending_approval, tool

CARD = r"\b(?:\d[ -]?){13,16}\b"


@tool(requires_approval=lambda args: args["amount"] > 100)
def send_money(to: str, amount: float) -> str:
    """Send money to someone, in euros."""
    return f"sent {amount} EUR to {to}"


def main() -> None:
    question = " ".join(sys.argv[1:]) or "Pay Bob 150 euros from my card 4111 1111 1111 1111."
    bot = FnCallAgent(
        llm=None,
        function_list=[send_money],
        plugins=[
            TextPolicy(redact=[CARD], replacement="[card]", on="input"),
            OutputGuardrail(lambda text: "a card number" if "4111" in text else None, message="(answer withheld)"),
        ],
    )
    history: list = [{"role": "user", "content": question}]
    while True:
        response = bot.run_nonstream(history)
        history += response
        for m in response:
            if m["role"] == "function":
                print(f"[{m['name']}] {m['content']}")
        waiting = pending_approval(response)
        if not waiting:
            break
        for call in waiting:
            print(f"approve {call['name']}({call['arguments']})? [y/N] ", end="", flush=True)
        answer = sys.stdin.readline().strip().lower()
        history.append(approval_message(answer in ("y", "yes"), "" if answer in ("y", "yes") else "The user said no."))
    final = history[-1]
    blocked = (final.get("extra") or {}).get("blocked_by")
    print(f"assistant: {final['content']}" + (f" (blocked by {blocked})" if blocked else ""))


if __name__ == "__main__":
    main()
