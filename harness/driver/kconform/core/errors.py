"""The driver's error type: anything that stops kconform from running (exit 2)."""


class ToolError(Exception):
    """kconform itself could not run: bad input, missing dependency, build failure.

    The message names the file and field (or the command) and, where there is
    one, the fix.
    """


EXIT_CLEAN = 0
EXIT_VIOLATIONS = 1
EXIT_TOOL_ERROR = 2
