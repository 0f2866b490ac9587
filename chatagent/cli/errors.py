"""The error of the `chatagent` command."""

from chatagent.errors import ChatAgentError


class CliError(ChatAgentError):
    """A mistake in the command line or its inputs: printed without a traceback."""
