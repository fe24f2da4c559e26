"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.crm import CrmStore
from bot.store.db import create_engine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
async def example_crm(database_url: str) -> AsyncIterator[CrmStore]:
    """A CrmStore holding the sample contacts and accounts of ``examples/``."""
    engine = create_engine(database_url)
    crm = CrmStore(engine)
    await crm.import_csv(EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv")
    yield crm
    await engine.dispose()
