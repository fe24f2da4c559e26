"""The ``bot`` command: noun then verb. Exit status 0 done, 1 the work failed, 2 bad usage
or settings, 3 Slack refuses the bot's token (a supervisor should not restart it as is);
errors are one line, never a traceback."""

from __future__ import annotations

import importlib
import sys

import click

from bot.errors import AccessRevoked, BotError, SettingsError

#: command name -> "module:attribute"; imported only when used, so `bot history` does not
#: pay for the model client or Slack
COMMANDS = {
    "ask": "bot.cli.agent:ask",
    "channels": "bot.cli.channels:channels",
    "chat": "bot.cli.agent:chat",
    "crm": "bot.cli.crm:crm",
    "db": "bot.cli.db:db",
    "history": "bot.cli.history:history",
    "run": "bot.cli.run:run",
    "tools": "bot.cli.tools:tools",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bot", prog_name="bot", message="%(prog)s %(version)s")
def cli() -> None:
    """A Slack agent for Jira tickets and CRM look-ups, with reviewable histories."""


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
        _report(str(exc))
        sys.exit(2)
    except AccessRevoked as exc:
        _report(str(exc))
        sys.exit(3)
    except BotError as exc:
        _report(str(exc))
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)


def _report(text: str) -> None:
    """The one error line, in the format of the logs (set up now if the command failed
    before it set them up: a bad setting)."""
    from bot.config import requested_log_format
    from bot.logs import configure_logging, logs_configured, report_error

    if not logs_configured():
        configure_logging(fmt=requested_log_format())
    report_error(text)
