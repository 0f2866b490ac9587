"""The error of the `chatagent` command."""


class CliError(Exception):
    """A mistake in the command line or its inputs: printed without a traceback."""
