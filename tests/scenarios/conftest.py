"""The CRM fakes (tests/crm_fakes.py) for the scenarios here and in slack/."""

from tests.crm_fakes import (  # noqa: F401 - fixtures, used by name
    _hubspot,
    _salesforce,
    hubspot,
    salesforce,
)
