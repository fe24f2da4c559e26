"""``bot db upgrade`` / ``bot db current`` through ``alembic.command``.

These run Alembic's async environment with ``asyncio.run``: call them from synchronous
code, or from async code through ``asyncio.to_thread``.
"""

from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

import bot


def _script_location() -> Path:
    package = Path(bot.__file__).resolve().parent
    for candidate in (package / "migrations", package.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise FileNotFoundError("the migrations folder is missing from this installation")


def alembic_config(database_url: str, output: io.StringIO | None = None) -> Config:
    config = Config(stdout=output) if output is not None else Config()
    config.set_main_option("script_location", str(_script_location()))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str) -> None:
    """Apply every pending migration (a no-op at head)."""
    command.upgrade(alembic_config(database_url), "head")


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current(database_url: str) -> str:
    """The database's revision as ``alembic current`` prints it."""
    output = io.StringIO()
    command.current(alembic_config(database_url, output))
    return output.getvalue().strip() or "(none: the database has no tables yet)"
