"""build_services(settings): the one place that names the concrete adapters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import openai

from bot.agent.loop import Loop
from bot.agent.prompt import DEFAULT_SYSTEM_PROMPT
from bot.agent.service import Conversations
from bot.config import Settings
from bot.llm.base import ChatModel, ModelOptions
from bot.llm.chat_completions import ChatCompletionsModel
from bot.llm.responses import ResponsesModel
from bot.store.crm import CrmStore
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from bot.tools.base import ToolRegistry
from bot.tools.clock import get_current_time
from bot.tools.crm import CrmTools
from bot.tools.jira import jira_tools


@dataclass
class Services:
    settings: Settings
    store: HistoryStore
    registry: ToolRegistry
    model: ChatModel
    conversations: Conversations

    async def close(self) -> None:
        client = getattr(self.model, "client", None)
        if isinstance(client, openai.AsyncOpenAI):
            await client.close()
        await self.store.engine.dispose()


def build_model(settings: Settings) -> ChatModel:
    settings.require("OPENAI_API_KEY")
    client = openai.AsyncOpenAI(
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL,
        default_headers=settings.OPENAI_DEFAULT_HEADERS or None,
        timeout=settings.MODEL_TIMEOUT_S,
        max_retries=2,
        # aiohttp, as slack_sdk uses: httpx's pool costs far more CPU with many turns at once
        http_client=openai.DefaultAioHttpClient(timeout=settings.MODEL_TIMEOUT_S),
    )
    options = ModelOptions(settings.OPENAI_TEMPERATURE, settings.OPENAI_REASONING_EFFORT)
    if settings.LLM_API == "responses":
        return ResponsesModel(client, settings.OPENAI_MODEL, options)
    return ChatCompletionsModel(client, settings.OPENAI_MODEL, options)


def build_registry(settings: Settings, store: HistoryStore) -> ToolRegistry:
    registry = ToolRegistry(default_timeout=settings.TOOL_TIMEOUT_S)
    registry.add(get_current_time)
    registry.add_object(CrmTools(CrmStore(store.engine)))
    jira = jira_tools(settings)
    if jira is not None:
        registry.add_object(jira)
    return registry


def build_services(settings: Settings, *, model: ChatModel | None = None) -> Services:
    """Everything a shell needs, from the settings. ``model`` replaces the OpenAI one
    (benchmarks use an in-process model)."""
    store = HistoryStore(create_engine(settings.DATABASE_URL))
    registry = build_registry(settings, store)
    chat_model = model or build_model(settings)
    loop = Loop(
        model=chat_model,
        registry=registry,
        system=settings.system_prompt(DEFAULT_SYSTEM_PROMPT),
        max_rounds=settings.MAX_TOOL_ROUNDS,
        deadline_s=settings.TURN_DEADLINE_S,
    )
    conversations = Conversations(
        store,
        loop,
        settings.HISTORY_TOKEN_BUDGET,
        approval_timeout=timedelta(seconds=settings.APPROVAL_TIMEOUT_S),
    )
    return Services(settings, store, registry, chat_model, conversations)
