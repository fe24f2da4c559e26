"""Several processes starting at once on a fresh database apply the migrations once
(replicas of ``bot run`` all migrate at start-up; Alembic has no lock of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.store.db import create_engine
from bot.store.migrate import head_revision
from tests import postgres
from tests.cli.helpers import run_bot
from tests.conftest import POSTGRES_URL
from tests.reliability.helpers import MANY_PROCESSES, finish, popen_bot

pytestmark = MANY_PROCESSES

STARTED_TOGETHER = 3


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def fresh_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all: a SQLite file that does not exist yet, or an
    empty PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    if not POSTGRES_URL:
        pytest.skip("TEST_DATABASE_URL is not set")
    with postgres.fresh_database(POSTGRES_URL, "bot_fresh", migrated=False) as url:
        yield url


async def version_rows(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT version_num FROM alembic_version"))
            return [row[0] for row in rows]
    finally:
        await engine.dispose()


def test_upgrades_started_together_migrate_once(fresh_database: str, tmp_path) -> None:
    """3 ``bot db upgrade`` started together on a fresh database -> all exit 0 (one
    migrates, the others wait for it, then find the database at head: the advisory lock on
    PostgreSQL, BEGIN IMMEDIATE on SQLite) -> ``bot db current`` shows head and
    alembic_version has one row."""
    env = {"DATABASE_URL": fresh_database}
    processes = [popen_bot("db", "upgrade", env=env, cwd=tmp_path) for _ in range(STARTED_TOGETHER)]
    results = [finish(process, timeout=60) for process in processes]

    head = head_revision()
    for status, out, err in results:
        assert status == 0, err
        assert out.strip() == f"database at revision {head} (head)"
        assert "Traceback" not in err
    current = run_bot("db", "current", env=env, cwd=tmp_path)
    assert current.returncode == 0 and current.stdout.strip() == f"{head} (head)"
    assert asyncio.run(version_rows(fresh_database)) == [head]
