"""build_services(settings): the one place that names the concrete adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import openai

from bot import telemetry
from bot.agent.admin_logins import AdminLogins
from bot.agent.channels import Channels
from bot.agent.conversations import Conversations
from bot.agent.limits import ModelSlots, PerPerson
from bot.agent.loop import Loop
from bot.agent.memory import Memory
from bot.agent.prompt import DEFAULT_SYSTEM_PROMPT
from bot.agent.sessions import Sessions
from bot.agent.threads import Threads
from bot.config import ConversationSettings, Settings
from bot.jobs import open_jobs
from bot.jobs.runner import Jobs
from bot.llm.base import ChatModel, ModelOptions
from bot.llm.chat_completions import ChatCompletionsModel
from bot.llm.responses import ResponsesModel
from bot.people import People
from bot.store.admin_sessions import AdminSessionStore
from bot.store.channels import ChannelSettingsStore
from bot.store.db import Engines, create_engines
from bot.store.history import HistoryStore
from bot.store.summaries import SummaryStore
from bot.store.threads import ThreadStore
from bot.store.turns import TurnStore
from bot.store.window import Windows
from bot.tools.base import ToolRegistry
from bot.tools.clock import get_current_time
from bot.tools.crm import CrmTools, crm_backend
from bot.tools.jira import add_jira_tools
from bot.tools.mcp import mcp_servers


@dataclass
class Services:
    """What the shells use: turns (``conversations``), the channels' work (``jobs``), the
    stored sessions (``sessions``), each channel's own settings (``channels``), the
    threads the bot answers in (``threads``: follow-ups, people's names) and, with
    ADMIN_TOKEN set, the admin pages' logins."""

    settings: Settings
    engines: Engines
    registry: ToolRegistry
    model: ChatModel
    conversations: Conversations
    sessions: Sessions
    jobs: Jobs
    channels: Channels
    threads: Threads
    admin_logins: AdminLogins | None = None
    #: who people are, for the tools: a shell plugs its directory in (``People.use``)
    people: People = field(default_factory=People)

    def start(self) -> None:
        """In the event loop that serves: MCP servers begin connecting in the background."""
        self.registry.start()

    async def close(self) -> None:
        await self.registry.close()  # MCP servers: sessions closed, processes stopped
        client = getattr(self.model, "client", None)
        if isinstance(client, openai.AsyncOpenAI):
            await client.close()
        await self.engines.dispose()


def build_model(settings: Settings) -> ChatModel:
    settings.require("OPENAI_API_KEY")
    model, timeout_s = settings.model, settings.limits.MODEL_TIMEOUT_S
    client = openai.AsyncOpenAI(
        api_key=model.OPENAI_API_KEY,
        base_url=model.OPENAI_BASE_URL,
        default_headers=model.OPENAI_DEFAULT_HEADERS or None,
        timeout=timeout_s,
        max_retries=2,
        # aiohttp, as slack_sdk uses: httpx's pool costs far more CPU with many turns at once
        http_client=openai.DefaultAioHttpClient(timeout=timeout_s),
    )
    options = ModelOptions(
        model.OPENAI_TEMPERATURE, model.OPENAI_REASONING_EFFORT, model.MAX_OUTPUT_TOKENS
    )
    if model.LLM_API == "responses":
        return ResponsesModel(client, model.OPENAI_MODEL, options)
    return ChatCompletionsModel(client, model.OPENAI_MODEL, options)


def build_registry(
    settings: Settings, engines: Engines | None = None, people: People | None = None
) -> ToolRegistry:
    """Every tool the model is offered. MCP servers connect in the background from the
    first use in an event loop on; ``registry.close()`` closes them and the CRM's client.
    Without ``engines`` (``bot tools``) the local CRM gets engines of its own, disposed at
    close. The CRM's missing settings are a SettingsError naming them. ``people``: the
    port the tools learn who people are from (a shell fills it)."""
    tool_timeout_s = settings.limits.TOOL_TIMEOUT_S
    registry = ToolRegistry(default_timeout=tool_timeout_s)
    registry.add(get_current_time)
    settings.require(*settings.crm.required)
    if engines is None and settings.crm.CRM == "local":
        engines = create_engines(settings.store.DATABASE_URL)
        registry.on_close(engines.dispose)
    crm = crm_backend(settings.crm, engines, tool_timeout_s)  # one client for the process
    registry.add_object(CrmTools(crm, tool_timeout_s), source="CRM")
    registry.on_close(crm.close)
    add_jira_tools(registry, settings.jira, tool_timeout_s, people or People())
    mcp_servers(settings.mcp.MCP_CONFIG, registry, tool_timeout_s)
    return registry


def build_channels(
    settings: Settings, engines: Engines, registry: ToolRegistry | None = None
) -> Channels:
    """Each channel's own settings; ``registry``: the tools a ``tools`` pattern is checked
    against (none: every pattern is warned of as matching nothing)."""
    names = registry.names if registry is not None else list
    return Channels(ChannelSettingsStore(engines), settings.jira.allowed_projects, names)


def build_conversations(
    engines: Engines,
    loop: Loop,
    settings: ConversationSettings,
    *,
    windows: Windows | None = None,
    channels: Channels | None = None,
    per_person: PerPerson | None = None,
    approval_timeout: timedelta = timedelta(days=1),
) -> Conversations:
    """Conversations and its parts: the stores (sharing the channels' kept ``windows``),
    what turns carry of the past (Memory: summaries, the window, thread context), and the
    threads the bot answers in."""
    windows = windows or Windows()
    turns, threads = TurnStore(engines, windows), ThreadStore(engines, windows)
    memory = Memory(
        turns,
        threads,
        loop.model,
        settings.HISTORY_TOKEN_BUDGET,
        summaries=SummaryStore(engines) if settings.HISTORY_SUMMARY else None,
        thread_tokens=settings.THREAD_CONTEXT_TOKENS,
        slots=loop.slots,  # summary requests take a slot as every request does
    )
    return Conversations(
        turns,
        HistoryStore(engines, windows),
        loop,
        memory,
        Threads(threads, channels, settings.FOLLOW_UPS),
        per_person=per_person,
        approval_timeout=approval_timeout,
    )


def build_services(settings: Settings, *, model: ChatModel | None = None) -> Services:
    """Everything a shell needs, from the settings. ``model`` replaces the OpenAI one
    (benchmarks use an in-process model)."""
    limits = settings.limits
    telemetry.capture_content(settings.telemetry.OTEL_CAPTURE_CONTENT)
    engines = create_engines(settings.store.DATABASE_URL)
    people = People()
    registry = build_registry(settings, engines, people)
    channels = build_channels(settings, engines, registry)
    chat_model = model or build_model(settings)
    loop = Loop(
        model=chat_model,
        registry=registry,
        system=settings.model.system_prompt(DEFAULT_SYSTEM_PROMPT),
        max_rounds=limits.MAX_TOOL_ROUNDS,
        deadline_s=limits.TURN_DEADLINE_S,
        slots=ModelSlots(limits.MAX_CONCURRENT_TURNS),
        write_approval=settings.conversation.WRITE_APPROVAL,
    )
    conversations = build_conversations(
        engines,
        loop,
        settings.conversation,
        channels=channels,
        per_person=PerPerson(limits.RATE_LIMIT_PER_USER),
        approval_timeout=timedelta(seconds=limits.APPROVAL_TIMEOUT_S),
    )
    return Services(
        settings,
        engines,
        registry,
        chat_model,
        conversations,
        Sessions(conversations.history),
        open_jobs(engines),
        channels,
        conversations.threads,
        AdminLogins(AdminSessionStore(engines), settings.web.ADMIN_TOKEN)
        if settings.web.ADMIN_TOKEN
        else None,
        people,
    )
