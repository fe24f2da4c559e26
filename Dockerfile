# The bot as a container image: `docker build -t bot .`
#
#   docker run --env-file .env -p 3000:3000 bot --http   # HTTP Events API on port 3000
#   docker run --env-file .env bot                       # Socket Mode (SLACK_APP_TOKEN set)
#
# The entry point is `bot run` (migrations, then Slack); arguments are its own (`--http`,
# `--port N`). SQLite lives in /data unless DATABASE_URL says otherwise: mount a volume
# there, or use PostgreSQL (compose.yaml). The health check asks GET /healthz on PORT.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

# --- build: the locked dependencies and the bot, into /app/.venv -------------------------
FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# the dependencies first, so that their layer is rebuilt only when uv.lock changes
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY alembic.ini ./
COPY migrations ./migrations
COPY bot ./bot
# the bot itself as a wheel (migrations inside it): the image needs no source tree
RUN uv sync --locked --no-dev --no-editable

# --- run: the virtual environment only, as a user without privileges ----------------------
FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 bot \
    && useradd --system --uid 10001 --gid bot --home-dir /data --shell /usr/sbin/nologin bot \
    && mkdir /data \
    && chown bot:bot /data
COPY --from=build /app/.venv /app/.venv
ENV PATH="/app/.venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    DATABASE_URL=sqlite:////data/bot.db
WORKDIR /data
USER 10001:10001
EXPOSE 3000
# 200 from /healthz while the database answers; the standard library only (no curl here)
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"]
ENTRYPOINT ["bot", "run"]
