"""Start a stdio MCP server with only the environment that MCP_CONFIG gives it, and PATH.

The SDK's stdio transport adds part of the bot's own environment (HOME, USER, SHELL, ...)
to the variables it is given. This small program, run by the bot with the server's command
after it, replaces itself (exec) with the server and keeps only the variables it names, so
the server sees nothing of the bot's settings. It imports nothing of the bot:

    python -I -S launch.py NAME,NAME,... -- COMMAND [ARG...]
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: launch.py NAMES -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    keep = {name for name in argv[1].split(",") if name}
    command = argv[3:]
    # the environment this process was given is the server's, not the bot's settings
    env = {name: value for name, value in os.environ.items() if name in keep}
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
