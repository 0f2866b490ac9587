"""The `chatagent` command: chat in the terminal, open the web UI, or serve an agent over the OpenAI API.

    chatagent chat  [--model M] [--server URL] [--agent module:object] [--file F ...] [--session NAME]
    chatagent gui   [--file F ...] [--dir D] [--host H] [--port P] [--agent module:object] [--auth USER:PASS ...]
    chatagent serve [--agent module:object] [--host H] [--port P] [--api-key-file PATH]  (or $CHATAGENT_API_KEY)
                    [--allow-host HOST ...] [--store URL] [--grace SECONDS]
    chatagent sessions [--user U] [--show ID | --delete ID]

Conversations are kept in the session store: --store URL, else $CHATAGENT_SESSION_STORE, else a SQLite file in
the workspace (see `chatagent.sessions`). `chat --session NAME` resumes one; the web UI keeps every user's.

Without --agent the command builds the default agent: the Assistant when it is available, else the
function-calling agent, else the basic chat agent, on the model given by --model/--server or, without
them, on the default model (see `chatagent.llm.registry.default_llm_config`).

The package: `entry` (parser, main), `commands` (each subcommand), `terminal` (the terminal chat), `build` (the agent
from the options), `errors`.
"""

from chatagent.cli.entry import main

__all__ = ["main"]
