"""Letta's own SDK tests against this server, as Letta wrote them: a re-count, not part of our suite.

Letta's tests (its `tests/` directory, branch `archive` of letta-ai/letta, never copied into this repository) drive a
server through `letta_client` at `LETTA_SERVER_URL`. This starts one of ours on a scratch database, a model that does
what those tests' prompts ask (`InstructedLLM`) as its `openai` provider, and runs pytest over the tests in another
virtualenv (Letta's test modules import the `letta` package). How to set that up: docs/api.md, "Letta's own tests".

    .venv/bin/python -m tests.clients.letta_suite --tests /tmp/letta/tests --python /tmp/lvenv/bin/python \
        [--database-url postgres://…] -- tests/sdk tests/integration_test_send_message.py -k "not anthropic"

Pytest's exit status is this command's; the server's log is left in the work directory it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM, Reply, _tool_schemas
from tests.helpers import ROOT, free_port

_CALL = re.compile(r"call (?:the )?(\w+)", re.IGNORECASE)
_SEND_TEXT = re.compile(r"message[^']*'(.+)'", re.IGNORECASE | re.DOTALL)
_QUOTED = re.compile(r"'([^']*)'")
_NUMBER = re.compile(r"\b(\d+)\b")


def _text(content: Any) -> str:
    """A chat message's content as one string (a list of parts joined)."""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _number_for(name: str, text: str) -> float | None:
    """The number the prompt gives after a word of the field's name ("a quantity change of +10", "price $999.99")."""
    for word in name.lower().split("_"):
        found = len(word) >= 4 and re.search(rf"{word}[^\d+-]{{0,20}}([+-]?\d+(?:\.\d+)?)", text, re.IGNORECASE)
        if found:
            return float(found.group(1))
    return None


def _value(schema: dict[str, Any], text: str, defs: dict[str, Any], depth: int = 0, name: str = "") -> Any:
    """A value of `schema` from the prompt: its first quoted string, its first number, nested objects filled the
    same way ($refs followed), so a pydantic tool gets every field it asks for."""
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    for variant in schema.get("anyOf") or ():
        if variant.get("type") != "null":
            return _value(variant, text, defs, depth, name)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _value(v, text, defs, depth + 1, k) for k, v in props.items() if depth < 4}
    if kind == "array":
        return [_value(schema.get("items") or {}, text, defs, depth + 1)]
    if kind in ("integer", "number"):
        given = _number_for(name, text)
        numbers = _NUMBER.findall(text)
        value = given if given is not None else float(numbers[0]) if numbers else 1.0
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if schema.get("enum"):
        return schema["enum"][0]
    quoted = _QUOTED.findall(text)
    return quoted[0] if quoted else "item"


def _args_from(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool the prompt names, each from the prompt (`_value`)."""
    defs = {**(schema.get("$defs") or {}), **(schema.get("definitions") or {})}
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k not in ("request_heartbeat", "thinking")}
    args = {name: _value(prop, text, defs, name=name) for name, prop in props.items()}
    if "request_heartbeat" in (schema.get("properties") or {}):
        args["request_heartbeat"] = True  # the prompts ask for a reply after the tool's result
    return args


_NAME = re.compile(r"my name is (?:actually )?(\w+)", re.IGNORECASE)
_MEMORY_EDITS = (  # (tool, its arguments for a new fact about the person), the first the agent has
    ("core_memory_append", lambda fact: {"label": "human", "content": fact}),
    ("memory_insert", lambda fact: {"label": "human", "new_str": fact}),
)


_BASE = {"send_message", "conversation_search", "archival_memory_search", "archival_memory_insert", "memory"}


def _about(name: str, text: str) -> bool:
    """Whether the prompt names what the tool is about: a word of its name, of five letters or more."""
    return any(len(word) >= 5 and word in text.lower() for word in name.lower().split("_"))


def _reply(text: str, tools: dict[str, Any]) -> Reply:
    """Say `text` the way the agent's tools allow: through send_message when it has one, else as content."""
    if "send_message" in tools:
        return Reply(calls=[("send_message", {"message": text})])
    return Reply(content=text)


def follow(req: dict[str, Any]) -> Reply:
    """What a model that obeys Letta's test prompts answers to this chat request: the tool the last user message
    names (send_message with the quoted text), a reply carrying a tool's result after it, a stored tool result when
    asked to repeat it, else a short greeting."""
    tools = _tool_schemas(req)
    messages = req.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return _reply(f"The tool returned {_text(last.get('content'))}", tools)
    text = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    named = next((m for m in _CALL.finditer(text) if m.group(1) in tools), None)
    if named:
        name = named.group(1)
        if name == "send_message":
            said = _SEND_TEXT.search(text[named.end() :])
            return _reply(said.group(1) if said else "ok", tools)
        return Reply(calls=[(name, _args_from(text[named.end() :], tools[name]))])
    if "repeat it" in text or "returned" in text:
        returns = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        if returns:
            return _reply(f"The tool returned {returns[-1]}", tools)
    told = _NAME.search(text)
    edit = next(((n, args) for n, args in _MEMORY_EDITS if n in tools), None)
    if told and edit:  # the person says who they are: the agent writes it to its memory of them
        return Reply(calls=[(edit[0], edit[1](f"Name: {told.group(1)}"))])
    topical = [name for name in tools if name not in _BASE and _about(name, text)]
    if len(topical) == 1:  # the prompt is about what one of the agent's own tools does
        return Reply(calls=[(topical[0], _args_from(text, tools[topical[0]]))])
    return _reply("Hello! How can I help you today?", tools)


class InstructedLLM(FakeLLM):
    """The fake model server answering with `follow` whenever nothing is scripted, its streamed chunks 25 ms apart
    as a real model's arrive (the server sends a burst of chunks that arrive together as one; Letta's token
    streaming tests count more than one)."""

    CHUNK_S = 0.025

    def _next_reply(self, req: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        reply = follow(req)
        reply.chunk_s = self.CHUNK_S
        return reply


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the server did not answer in 90 s:\n{log.read_text()[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    """Start the model and a server on a scratch database, run pytest over Letta's tests, stop both."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=Path, required=True, help="Letta's tests/ directory (a checkout of it)")
    parser.add_argument("--python", required=True, help="the interpreter of a virtualenv with letta and pytest")
    parser.add_argument("--database-url", default="", help="an empty database to use (default: a scratch SQLite)")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments, paths relative to tests/..")
    opts = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="letta-suite-"))
    prefixes = subprocess.run(
        [opts.python, "-c", "import sys; print(sys.prefix, sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    llm = InstructedLLM().start()
    anthropic = FakeAnthropic().start()  # Letta's tests make some agents on Claude handles; it answers plain text
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": opts.database_url or f"sqlite:///{work / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "agents_ide.settings",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "OPENAI_API_KEY": "fake-key",
        "OPENAI_BASE_URL": llm.base_url,
        "ANTHROPIC_API_KEY": "fake-key",
        "ANTHROPIC_BASE_URL": anthropic.base_url,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        # Letta's MCP tests start their stdio server with the tests' interpreter from the tests' directory: the
        # operator's choices that allow it (docs/configuration.md)
        "MCP_STDIO": "all",
        "MCP_STDIO_PATHS": ":".join([str(opts.tests.resolve()), *prefixes]),
        "EGRESS_ALLOW": "127.0.0.1",  # their callback_url receiver listens on loopback
    }
    _manage(env, "migrate", "--noinput")
    token = _manage(env, "create_api_token", "letta-tests", "--create-user").split()[-1]
    log = work / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agents_ide.serve",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "agents_ide.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_healthy(url, server, log)
        print(f"server {url}, its log {log}", flush=True)
        test_env = {
            **os.environ,
            "LETTA_SERVER_URL": url,
            "LETTA_API_KEY": token,
            "LLM_CONFIG_FILE": os.environ.get("LLM_CONFIG_FILE", "openai-gpt-4o-mini.json"),
            # Letta's search tests (tests/sdk/search_test.py) run only where its settings say the server indexes
            # passages, messages and tools (Turbopuffer on Letta's side, our own full-text and vector search here):
            # the flags they read, in the tests' process; nothing there calls Turbopuffer or OpenAI itself.
            "LETTA_USE_TPUF": "true",
            "LETTA_TPUF_API_KEY": "unused",
            "LETTA_EMBED_ALL_MESSAGES": "true",
            "LETTA_EMBED_TOOLS": "true",
            "OPENAI_API_KEY": "unused",
        }
        return subprocess.run(
            [opts.python, "-m", "pytest", "-p", "no:cacheprovider", *opts.pytest_args],
            cwd=opts.tests.resolve().parent,
            env=test_env,
        ).returncode
    finally:
        server.terminate()
        server.wait(timeout=20)
        llm.stop()
        anthropic.stop()
        (work / "model_requests.json").write_text(json.dumps(llm.chat_requests[-50:], indent=1))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
