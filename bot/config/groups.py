"""The groups of settings: each field is named as its variable is, and its ``description``
is what to put in it, quoted by the line that says it is missing or malformed."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from bot.errors import SettingsError

#: an admin token short enough to guess is refused at start-up
ADMIN_TOKEN_MIN_CHARS = 32

_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*")
_ON_OFF = "on or off"
_SECONDS = "a number of seconds, e.g. {}"


def _on_off(value: object) -> object:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in {"on", "true", "1", "yes"}:
            return True
        if lowered in {"off", "false", "0", "no"}:
            return False
    return value


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


#: on/off, true/false, 1/0, yes/no
OnOff = Annotated[bool, BeforeValidator(_on_off)]
#: a comma list (pydantic-settings would otherwise expect JSON)
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list)]


class SettingsGroup(BaseModel):
    """A group of settings, as bot.config read them; not changed after."""

    model_config = ConfigDict(frozen=True)


class SlackSettings(SettingsGroup):
    """Reaching Slack, and how the bot behaves there."""

    SLACK_BOT_TOKEN: str | None = Field(
        None, description="the bot token from your Slack app's OAuth page (xoxb-...)"
    )
    """Bot token (xoxb-); needed by `run`."""
    SLACK_SIGNING_SECRET: str | None = Field(
        None, description="the signing secret from your Slack app's Basic Information page"
    )
    """Verifies that HTTP requests come from Slack; needed in HTTP mode."""
    SLACK_APP_TOKEN: str | None = Field(
        None, description="an app-level token with connections:write (xapp-...)"
    )
    """App-level token (xapp-); when set, `run` uses Socket Mode."""
    SLACK_API_URL: str = "https://slack.com/api/"
    """Base URL of every Slack Web API call."""
    ADMIN_SLACK_USERS: CommaList = Field(default_factory=list)
    """Comma list of Slack user IDs who may approve any write."""
    STREAM_ANSWERS: OnOff = Field(True, description=_ON_OFF)
    """on: the answer is streamed with Slack's streaming methods as the model writes it,
    each tool call a step of it; off: steps in a live message, the answer posted when done."""
    LONG_ANSWER_MESSAGES: int = Field(
        3, ge=0, description="a whole number of messages, e.g. 3 (0: never a file)"
    )
    """An answer that would take more messages than this is posted as its first part and
    the whole of it as a Markdown file in the thread (0: always as messages)."""


class ModelSettings(SettingsGroup):
    """The model server, the model and what it is asked with."""

    OPENAI_API_KEY: str | None = Field(
        None, description="your OpenAI API key (or any key your OpenAI-compatible server accepts)"
    )
    """Key for the model server."""
    OPENAI_BASE_URL: str | None = None
    """Any OpenAI-compatible server; the OpenAI default when unset."""
    OPENAI_MODEL: str = "gpt-5-mini"
    """Model name."""
    LLM_API: Literal["chat", "responses"] = Field("chat", description="chat or responses")
    """`chat` (Chat Completions) or `responses` (Responses API)."""
    OPENAI_DEFAULT_HEADERS: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description='a JSON object of header names and values, e.g. {"X-Team": "ops"}',
    )
    """Headers sent with every model request (a JSON object), e.g. for a gateway."""
    OPENAI_REASONING_EFFORT: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = (
        Field(None, description="none, minimal, low, medium, high or xhigh")
    )
    """How hard a reasoning model thinks; unset: the server's default (not sent)."""
    OPENAI_TEMPERATURE: float | None = Field(
        None, ge=0, le=2, description="a number from 0 to 2, e.g. 0.2"
    )
    """Sampling temperature; unset: the server's default (not sent)."""
    MAX_OUTPUT_TOKENS: int = Field(
        16000, ge=16, description="a whole number of tokens from 16 on, e.g. 16000"
    )
    """The most tokens one model reply may use (reasoning included)."""
    SYSTEM_PROMPT: str | None = None
    """The system message; the built-in one when unset."""
    SYSTEM_PROMPT_FILE: Path | None = None
    """A file holding the system message."""

    @field_validator("OPENAI_DEFAULT_HEADERS", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("not valid JSON") from None

    def system_prompt(self, default: str) -> str:
        if self.SYSTEM_PROMPT:
            return self.SYSTEM_PROMPT
        if self.SYSTEM_PROMPT_FILE:
            try:
                return self.SYSTEM_PROMPT_FILE.read_text(encoding="utf-8")
            except OSError as exc:
                raise SettingsError(
                    f"SYSTEM_PROMPT_FILE cannot be read ({exc.strerror}): "
                    "put the path of a readable text file in it."
                ) from None
        return default


class LimitSettings(SettingsGroup):
    """How far a turn may go: rounds, time limits, rates, the files it reads."""

    MAX_TOOL_ROUNDS: int = Field(5, ge=1, le=50, description="a whole number from 1 to 50")
    """Tool rounds per turn before the answer is forced."""
    TOOL_TIMEOUT_S: float = Field(30, gt=0, description=_SECONDS.format(30))
    """One tool call's time limit."""
    MODEL_TIMEOUT_S: float = Field(60, gt=0, description=_SECONDS.format(60))
    """One model request's time limit (the SDK's own default is 600 s)."""
    TURN_DEADLINE_S: float = Field(300, gt=0, description=_SECONDS.format(300))
    """A whole turn's time limit, all rounds included."""
    APPROVAL_TIMEOUT_S: float = Field(86400, gt=0, description=_SECONDS.format(86400))
    """An unanswered approval request expires after this."""
    RATE_LIMIT_PER_USER: int = Field(
        20,
        ge=0,
        description="a whole number of turns per person per 10 minutes (0: no limit)",
    )
    """New turns one person may start in any 10 minutes (per process); 0: no limit."""
    MAX_CONCURRENT_TURNS: int = Field(
        32, ge=1, description="a whole number of model requests at once, e.g. 32"
    )
    """Model requests in flight at once in one process."""
    FILE_MAX_BYTES: int = Field(
        10_000_000, ge=0, description="a whole number of bytes, e.g. 10000000"
    )
    """Largest file attached to a question that is read (an image, a text file)."""
    FILE_TEXT_TOKENS: int = Field(8000, ge=0, description="a whole number of tokens, e.g. 8000")
    """Most tokens of a question's text files added to it; the rest is cut, with a note."""


class ConversationSettings(SettingsGroup):
    """What the core reads for a turn (bot.agent): what its requests carry of the past
    (``Memory``), who may follow up in a thread without a mention (``Threads``), and which
    writes wait for a person (the approval rule, ``bot.agent.approval``)."""

    HISTORY_TOKEN_BUDGET: int = Field(
        12000, ge=0, description="a whole number of tokens, e.g. 12000"
    )
    """Most tokens of stored history replayed into one request."""
    HISTORY_SUMMARY: OnOff = Field(True, description=_ON_OFF)
    """Summarise what leaves the window; the summary opens each later request."""
    THREAD_CONTEXT_TOKENS: int = Field(
        4000, ge=0, description="a whole number of tokens, e.g. 4000 (0: none)"
    )
    """Most tokens of a thread's earlier messages shown with a question asked in it (0: none)."""
    FOLLOW_UPS: OnOff = Field(True, description=_ON_OFF)
    """on: in a thread where the bot answered someone, their next messages there are
    questions without a mention; off: every question needs a mention."""
    WRITE_APPROVAL: OnOff = Field(True, description=_ON_OFF)
    """on: a writing tool waits for the requester's approval; off: it runs at once."""


class JiraSettings(SettingsGroup):
    """The Jira the Jira tools reach; without JIRA_URL they are not offered."""

    JIRA_URL: str | None = Field(
        None, description="your Jira base URL, e.g. https://example.atlassian.net"
    )
    """Jira base URL; unset = the Jira tools are not offered to the model."""
    JIRA_EMAIL: str | None = None
    """Jira Cloud account email (with JIRA_API_TOKEN)."""
    JIRA_API_TOKEN: str | None = None
    """Jira Cloud API token (with JIRA_EMAIL)."""
    JIRA_PAT: str | None = None
    """Jira Server / Data Center personal access token."""
    JIRA_PROJECT: str | None = None
    """Project key for new tickets when the model names none."""
    JIRA_ALLOWED_PROJECTS: CommaList | None = None
    """Comma list of project keys the bot may create and change issues in; JIRA_PROJECT
    when unset."""
    JIRA_READ_ONLY: OnOff = Field(False, description=_ON_OFF)
    """on: the model is offered no Jira write (create, comment, assign, move, edit, link)."""

    @property
    def allowed_projects(self) -> list[str]:
        if self.JIRA_ALLOWED_PROJECTS:
            return [p.upper() for p in self.JIRA_ALLOWED_PROJECTS]
        return [self.JIRA_PROJECT.upper()] if self.JIRA_PROJECT else []


class CrmSettings(SettingsGroup):
    """The CRM the CRM tools read and write: the bot's own tables (the demo), Salesforce or
    HubSpot; and the CA bundle their HTTPS clients trust."""

    CRM: Literal["local", "salesforce", "hubspot"] = Field(
        "local", description="local, salesforce or hubspot"
    )
    """local: the bot's own tables (`bot crm import`); salesforce or hubspot: that CRM."""
    SALESFORCE_LOGIN_URL: str | None = Field(
        None, description="your org's My Domain URL, e.g. https://example.my.salesforce.com"
    )
    """Where the client-credentials token is asked for ({URL}/services/oauth2/token)."""
    SALESFORCE_CLIENT_ID: str | None = Field(
        None, description="the consumer key of your Salesforce connected app"
    )
    """The consumer key of the app whose client-credentials flow the bot uses."""
    SALESFORCE_CLIENT_SECRET: str | None = Field(
        None, description="the consumer secret of your Salesforce connected app"
    )
    """The consumer secret of that app."""
    SALESFORCE_API_VERSION: str = Field(
        "67.0", pattern=r"^[1-9][0-9]\.0$", description="a Salesforce API version, e.g. 67.0"
    )
    """The REST API version the bot speaks (Summer '26 is 67.0)."""
    HUBSPOT_ACCESS_TOKEN: str | None = Field(
        None, description="the access token of your HubSpot private app (pat-...)"
    )
    """A private app's access token."""
    HUBSPOT_BASE_URL: str = Field(
        "https://api.hubapi.com", description="an https:// URL, e.g. https://api.hubapi.com"
    )
    """HubSpot's API (change it only for a proxy or a test server)."""
    SSL_CERT_FILE: Path | None = Field(
        None, description="the path of a PEM file of CA certificates"
    )
    """A CA bundle the CRM clients trust instead of the default ones (a company's own CA)."""
    REQUESTS_CA_BUNDLE: Path | None = Field(
        None, description="the path of a PEM file of CA certificates"
    )
    """The same, under the name requests reads; it wins over SSL_CERT_FILE."""

    @field_validator("SALESFORCE_LOGIN_URL", "HUBSPOT_BASE_URL")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith("https://"):
            raise ValueError("not an https:// URL (the CRM is only reached over TLS)")
        return value.rstrip("/") if value else value

    @field_validator("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no file at {value}")
        return value

    @property
    def required(self) -> tuple[str, ...]:
        """The settings the chosen CRM cannot do without."""
        if self.CRM == "salesforce":
            return ("SALESFORCE_LOGIN_URL", "SALESFORCE_CLIENT_ID", "SALESFORCE_CLIENT_SECRET")
        if self.CRM == "hubspot":
            return ("HUBSPOT_ACCESS_TOKEN",)
        return ()

    @property
    def ca_bundle(self) -> Path | None:
        """The CA bundle to verify the CRM's certificate with; None: the clients' default."""
        return self.REQUESTS_CA_BUNDLE or self.SSL_CERT_FILE


class McpSettings(SettingsGroup):
    """The MCP servers whose tools are offered."""

    MCP_CONFIG: Path | None = Field(
        None, description="the path of a JSON file in the mcpServers format"
    )
    """A JSON file of MCP servers (the mcpServers format) whose tools are offered."""


class StoreSettings(SettingsGroup):
    """The database, and how long the history is kept."""

    DATABASE_URL: str = Field(
        "sqlite:///./bot.db",
        description="sqlite:///./bot.db or postgresql://user:password@host:5432/dbname",
    )
    """sqlite:///... or postgresql://...; the async driver is chosen here."""
    HISTORY_RETENTION_DAYS: float | None = Field(
        None, gt=0, description="a number of days, e.g. 90 (empty: keep everything)"
    )
    """`bot run` deletes stored messages older than this, daily; unset: kept."""

    @field_validator("DATABASE_URL")
    @classmethod
    def _known_database(cls, value: str) -> str:
        async_database_url(value)
        return value


class WebSettings(SettingsGroup):
    """Where `bot run` listens, and who may read /admin and /metrics."""

    HOST: str = Field(
        "0.0.0.0", description="0.0.0.0 (every interface), 127.0.0.1, :: or a host name"
    )
    """The address `bot run` listens on (0.0.0.0: every IPv4 interface)."""
    PORT: int = Field(3000, ge=1, le=65535, description="a TCP port number, e.g. 3000")
    """HTTP port of the Events API endpoint, /healthz and /admin."""
    ADMIN_TOKEN: str | None = Field(
        None,
        description=(
            f"a random string of at least {ADMIN_TOKEN_MIN_CHARS} characters "
            "(`openssl rand -hex 32` makes one)"
        ),
    )
    """Enables /admin; unset = /admin answers 404."""
    METRICS_TOKEN: str | None = None
    """Bearer token for /metrics; ADMIN_TOKEN when unset; neither = /metrics answers 404."""

    @field_validator("HOST")
    @classmethod
    def _address(cls, value: str) -> str:
        value = value.strip()
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not _HOST_NAME.fullmatch(value):
                raise ValueError("not an IP address or a host name") from None
        return value

    @field_validator("ADMIN_TOKEN")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < ADMIN_TOKEN_MIN_CHARS:
            raise ValueError(f"shorter than {ADMIN_TOKEN_MIN_CHARS} characters")
        return value


class TelemetrySettings(SettingsGroup):
    """Logs and traces."""

    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="DEBUG, INFO, WARNING or ERROR"
    )
    """Log level."""
    LOG_FORMAT: Literal["text", "json"] = Field("text", description="text or json")
    """text, or json for one JSON object a line."""
    OTEL_EXPORTER_OTLP_ENDPOINT: str | None = Field(
        None, description="your OTLP/HTTP collector, e.g. http://127.0.0.1:4318"
    )
    """OTLP/HTTP collector base URL (traces go to its /v1/traces); unset = no tracing."""
    OTEL_SERVICE_NAME: str = "bot"
    """The service name traces carry."""
    OTEL_CAPTURE_CONTENT: OnOff = Field(False, description=_ON_OFF)
    """on: spans carry message text, tool arguments and results; off: ids, counts, names."""

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


def async_database_url(url: str) -> str:
    """``sqlite:///x`` -> ``sqlite+aiosqlite:///x``; ``postgresql://`` -> ``+asyncpg``."""
    scheme, sep, rest = url.partition("://")
    base = scheme.split("+", 1)[0].lower()
    if not sep or base not in {"sqlite", "postgresql", "postgres"}:
        raise ValueError("must start with sqlite:/// or postgresql://")
    if base == "sqlite":
        return f"sqlite+aiosqlite://{rest}"
    return f"postgresql+asyncpg://{rest}"
