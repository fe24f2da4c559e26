"""histbench plugin: the product's store with one speed device off, a lane each, to set
beside ``product-locked`` in the same run (bench/README.md says which lane is which).

    DATABASE_URL=... python histbench.py --plugin bench/product_devices.py \
        --phases levels --stores reference,product-locked,product-locked-transactions

Every lane is ``product-locked`` (bench/product_store.py, loaded with this file) with one
difference in its engines or its windows; on PostgreSQL each has a database of its own.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from product_store import (  # noqa: E402
    ProductLockedStore,
    ProductNoCacheStore,
    ProductStore,
)
from stores import DbTarget  # noqa: E402

# the product's own lanes, found here too (histbench looks for Store classes in a plugin)
__all__ = ["ProductLockedStore", "ProductNoCacheStore", "ProductStore"]


class _DeviceOff(ProductLockedStore):
    tables = ()
    #: the backend the device is on
    backend = "postgresql"

    @classmethod
    def supports(cls, target: DbTarget) -> bool:
        return target.kind == cls.backend


class LockedNoCacheStore(ProductLockedStore):
    name = "product-locked-nocache"
    tables = ()
    db_suffix = "product_locked_nocache"
    keep_windows = False
    description = "product-locked without the window cache (every turn reads its window)"


class LockedTransactionsStore(_DeviceOff):
    name = "product-locked-transactions"
    db_suffix = "product_locked_transactions"
    description = (
        "product-locked with every write a transaction (the one-statement writes off: "
        "Engines.transaction ignores one_statement)"
    )

    def create_engines(self, url: str) -> Any:
        from bot.store.db import Engines

        @dataclasses.dataclass(frozen=True)
        class TransactionsOnly(Engines):
            async def transaction(self, work, *, one_statement=None):  # type: ignore[no-untyped-def]
                return await super().transaction(work)

        return _rebuilt(TransactionsOnly, super().create_engines(url))


class LockedPerStatementEngineStore(_DeviceOff):
    name = "product-locked-engine-per-statement"
    db_suffix = "product_locked_engine_per_statement"
    description = "product-locked with the single-statement engine built for each write"

    def create_engines(self, url: str) -> Any:
        from bot.store.db import Engines, single_statements

        @dataclasses.dataclass(frozen=True)
        class BuiltEachTime(Engines):
            @property
            def _single_statements(self):  # type: ignore[no-untyped-def]
                return single_statements(self.writes)

        return _rebuilt(BuiltEachTime, super().create_engines(url))


class LockedSyncedLedgerStore(_DeviceOff):
    name = "product-locked-synced-ledger"
    db_suffix = "product_locked_synced_ledger"
    description = "product-locked with the holds' commits waiting for the disk"

    def create_engines(self, url: str) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        from bot.config import async_database_url

        engines = super().create_engines(url)
        ledger = create_async_engine(async_database_url(url), pool_size=5, max_overflow=10)
        return dataclasses.replace(engines, bookkeeping=ledger)


class LockedPrePingStore(_DeviceOff):
    name = "product-locked-pre-ping"
    db_suffix = "product_locked_pre_ping"
    description = (
        "product-locked with SQLAlchemy's pool_pre_ping on every pool, the ledger's too, "
        "instead of the one-query ping on the writes' pool only"
    )

    def create_engines(self, url: str) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        from bot.config import async_database_url

        engines = super().create_engines(url)
        pinged = create_async_engine(
            async_database_url(url), pool_size=10, max_overflow=20, pool_pre_ping=True
        )
        ledger = create_async_engine(
            async_database_url(url),
            pool_size=5,
            max_overflow=10,
            pool_pre_ping=True,
            connect_args={"server_settings": {"synchronous_commit": "off"}},
        )
        return dataclasses.replace(engines, writes=pinged, reads=pinged, bookkeeping=ledger)


class LockedAiosqliteStore(_DeviceOff):
    name = "product-locked-aiosqlite"
    backend = "sqlite"
    description = "product-locked with the writes through aiosqlite (no writer thread)"

    def create_engines(self, url: str) -> Any:
        return dataclasses.replace(super().create_engines(url), writer=None)


def _rebuilt(cls: type, engines: Any) -> Any:
    fields = {f.name: getattr(engines, f.name) for f in dataclasses.fields(engines)}
    return cls(**fields)
