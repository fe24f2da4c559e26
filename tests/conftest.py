"""Shared fixtures: a migrated database of each kind, one per test.

SQLite always; PostgreSQL when TEST_DATABASE_URL is set (else those cases are skipped).
Each PostgreSQL case gets a database of its own, created on that server and dropped after.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler

from bot.store.migrate import upgrade
from tests.postgres import fresh_database

POSTGRES_URL = os.environ.get("TEST_DATABASE_URL")

# the tests start many `bot` processes: the first ones write the bytecode of the bot and its
# dependencies and the rest reuse it, instead of each compiling them afresh, whatever the
# developer's shell says
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): two workers a core, since the tests spend most of
    their time waiting (on the fakes, Slack's pacing, the bot's timeouts), not computing;
    one a core with PostgreSQL, whose tests' bot processes and pools would otherwise pass
    the server's 100 connections and load the machine past the tests' deadlines."""
    return (1 if POSTGRES_URL else 2) * (os.cpu_count() or 1)


def postgres_database() -> Iterator[str]:
    """A fresh, migrated database on the TEST_DATABASE_URL server; dropped afterwards."""
    if not POSTGRES_URL:
        pytest.skip("TEST_DATABASE_URL is not set")
    with fresh_database(POSTGRES_URL, "bot_test") as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database (skipped without TEST_DATABASE_URL)."""
    yield from postgres_database()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A migrated, empty database: a SQLite file, and PostgreSQL when configured."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'bot.db'}"
        upgrade(url)
        yield url
    else:
        yield from postgres_database()


@pytest.fixture
def sqlite_url(tmp_path) -> str:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(url)
    return url


class _Switch(Sampler):
    """Records spans only while a test asks for them (``spans``): the others make none."""

    on = False

    def should_sample(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return (ALWAYS_ON if self.on else ALWAYS_OFF).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "on while a test records spans"


@pytest.fixture(scope="session")
def _tracing() -> tuple[InMemorySpanExporter, _Switch]:
    # the process's one tracer provider (the API takes only one), as configure_tracing sets
    # it up, but exporting to memory
    exporter, switch = InMemorySpanExporter(), _Switch()
    provider = TracerProvider(sampler=switch)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter, switch


@pytest.fixture
def spans(_tracing) -> Iterator[InMemorySpanExporter]:  # type: ignore[no-untyped-def]
    """The spans this test's code ends, in memory (OpenTelemetry's own exporter)."""
    exporter, switch = _tracing
    exporter.clear()
    switch.on = True
    yield exporter
    switch.on = False
    exporter.clear()


@pytest.fixture(scope="session")
def _openai_server():  # type: ignore[no-untyped-def]
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI(api_key="test-key") as server:
        yield server


@pytest.fixture
def fake_openai(_openai_server):  # type: ignore[no-untyped-def]
    """The strict fake OpenAI server, emptied for this test."""
    _openai_server.reset()
    yield _openai_server
    _openai_server.reset()


@pytest.fixture
async def make_services(database_url, fake_openai):  # type: ignore[no-untyped-def]
    """Build the bot's services for this database, pointed at the fake OpenAI; settings
    overrides as keyword arguments. Closed after the test."""
    from bot.config import load_settings
    from bot.wiring import build_services

    built = []

    def make(**overrides):  # type: ignore[no-untyped-def]
        settings = load_settings(
            **{
                "DATABASE_URL": database_url,
                "OPENAI_API_KEY": "test-key",
                "OPENAI_BASE_URL": fake_openai.base_url,
                "MCP_CONFIG": None,  # none from the developer's shell
                **overrides,
            }
        )
        built.append(build_services(settings))
        return built[-1]

    yield make
    for services in built:
        await services.close()


# the fake Salesforce and HubSpot, one of each a test process (tests/crm_fakes.py)
from tests.crm_fakes import (  # noqa: E402, F401 - fixtures, used by name
    _hubspot,
    _salesforce,
    hubspot,
    salesforce,
)
