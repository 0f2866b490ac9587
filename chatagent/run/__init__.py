"""The run machinery, named by phase.

An agent's `_run` is a generator that does no I/O itself: it yields what to show (lists of `Fragment`s, each
with its place in the response) and *requests* (`requests`: call the model, run tools, run something that
blocks, wait for a tool) and is sent each request's result. A driver (`driver`) carries the requests out: `drive`
in the calling thread for `run()`, `adrive` on an asyncio event loop for `arun()`. So one loop definition serves
both, and everything that watches or controls a run sits between the loop and the driver as a `stage.Stage`,
run by the one pump, `stage.relay`. The machinery knows an agent only as a `protocol.Runnable`; `chatagent.Agent`
implements it.

In reading order: `protocol` (what the machinery needs of an agent) < `requests` (what a `_run` yields) < `stage` <
`context` (the run's state, `current_run()`) < `steps` (the helpers a `_run` calls with `yield from`:
`_call_llm`, `_run_tools`, ...; `tool_call`: one tool call) < `start` (messages in, the controlled loop out, driven
as its `Driving` pair says: `SYNC` or `ASYNC`) <
`control` (plugins and approval around the loop, with `input_checks` and `holding`: output held back until its
checks pass) < `driver` < `handle` (`Run`/`ARun`: what the caller gets). Beside them: `events`, `plugin` (the
hooks), `approval`, `subagent` (another agent run inside this one), `handoffs` < `agent_calls` (a tool loop's
calls that are agents' work: agents as tools, transfers), `telemetry`, and `compat`: Qwen-Agent-style
`_run`s, used only by agents that are not `fragment_native`.
"""
