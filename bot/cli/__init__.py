"""The ``bot`` command: noun then verb. Exit status 0 done, 1 the work failed, 2 bad usage
or settings; errors are one line, never a traceback."""

from __future__ import annotations

import sys

import click

from bot.cli.agent import ask, chat
from bot.cli.crm import crm
from bot.cli.db import db
from bot.cli.history import history
from bot.errors import BotError, SettingsError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """A Slack agent for Jira tickets and CRM look-ups, with reviewable histories."""


for command in (ask, chat, crm, db, history):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    try:
        result = cli.main(args=argv, prog_name="bot", standalone_mode=False)
    except click.UsageError as exc:
        exc.show()
        sys.exit(2)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except BotError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)
