"""The CRM tools and the CRMs behind them.

tools.py holds the tools (``crm_find_contacts``, ``crm_get_account``, ``crm_log_note``);
base.py what a backend does (``CrmBackend``); local.py the bot's own tables (the demo),
salesforce.py and hubspot.py the two CRMs, each with its connection (``*_client.py``), and
retry.py what their clients share (retries within the time limit, TLS).
"""

from __future__ import annotations

from bot.config import CrmSettings
from bot.store.crm import CrmStore
from bot.store.db import Engines
from bot.tools.crm.base import Check, CredentialsRefused, CrmBackend
from bot.tools.crm.tools import CrmTools

__all__ = ["Check", "CredentialsRefused", "CrmBackend", "CrmTools", "crm_backend"]


def crm_backend(settings: CrmSettings, engines: Engines | None, time_limit: float) -> CrmBackend:
    """The backend CRM names, its client made now (no request is sent until it is used);
    ``engines`` are the bot's database's (used with CRM=local). A CRM's module is imported
    only when it is the chosen one."""
    if settings.CRM == "salesforce":
        from bot.tools.crm.salesforce import SalesforceCrm

        return SalesforceCrm(settings, time_limit)
    if settings.CRM == "hubspot":
        from bot.tools.crm.hubspot import HubSpotCrm

        return HubSpotCrm(settings, time_limit)
    if engines is None:
        raise ValueError("CRM=local needs the bot's database")
    from bot.tools.crm.local import LocalCrm

    return LocalCrm(CrmStore(engines))
