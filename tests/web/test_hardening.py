"""Bad input never gets a 500 (issue 18, "Input"): every case the audit found, through the real API and pages,
on whichever database this run uses (CI runs the suite on SQLite and on PostgreSQL)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError, IntegrityError
from django.test import Client

from core.models import Agent, Message
from memory.models import Block
from tests.factories import make_agent
from tools.models import ToolRun

NUL = "bad\x00value"


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


def _raw(api, method: str, path: str, text: str):
    """Send `text` as the JSON body unchanged (json.dumps would escape a lone surrogate the same way)."""
    return getattr(api.client, method)(
        path, data=text.encode("utf-8", "surrogatepass"), content_type="application/json"
    )


def _refused(r, status=422):
    assert r.status_code == status, (r.status_code, r.content[:300])
    assert r["Content-Type"].startswith("application/json")
    assert r.json()["detail"]
    return r.json()["detail"]


# --- NUL characters and lone surrogates ---


@pytest.mark.parametrize(
    "path, method, body",
    [
        ("/v1/agents/", "post", {"name": NUL}),
        ("/v1/agents/", "post", {"name": "a", "system": NUL}),
        ("/v1/agents/", "post", {"name": "a", "tags": [NUL]}),
        ("/v1/agents/", "post", {"name": "a", "metadata": {"k": NUL}}),
        ("/v1/agents/", "post", {"name": "a", "metadata": {NUL: 1}}),
        ("/v1/agents/", "post", {"name": "a", "memory_blocks": [{"label": "persona", "value": NUL}]}),
        ("/v1/blocks/", "post", {"label": "notes", "value": NUL}),
        ("AGENT/archival-memory", "post", {"text": NUL}),
        ("AGENT/messages", "post", {"messages": [{"role": "user", "content": NUL}]}),
        ("AGENT", "patch", {"system": NUL}),
        ("AGENT", "patch", {"description": NUL}),
    ],
)
def test_nul_in_any_json_field_is_422_naming_it(api, agent, path, method, body):
    path = path.replace("AGENT", f"/v1/agents/{agent.id}")
    detail = _refused(getattr(api, method)(path, body))
    assert "NUL" in detail
    assert Agent.objects.count() == 1 and Agent.objects.get().system == agent.system


def test_nul_in_a_block_value_leaves_the_block_unchanged(api, agent):
    block = agent.blocks.get(label="persona")
    assert "NUL" in _refused(api.patch(f"/v1/blocks/{block.id}", {"value": NUL}))
    assert "NUL" in _refused(api.patch(f"/v1/agents/{agent.id}/core-memory/blocks/persona", {"value": NUL}))
    assert Block.objects.get(pk=block.pk).value == block.value


@pytest.mark.parametrize(
    "path",
    [
        "/v1/agents/%00x",
        "/v1/blocks/a%00b",
        "/v1/runs/%00",
        "/v1/agents/AGENT/messages?after=%00",
        "/v1/agents/?after=x%00",
        "/v1/agents/AGENT/archival-memory?after=%00",
        "/v1/tools/?name=%00",
        "/v1/agents/AGENT/recall-memory/search?query=%00",
    ],
)
def test_nul_in_path_ids_and_cursors_is_422(api, agent, path):
    assert "NUL" in _refused(api.get(path.replace("AGENT", agent.id)))


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "\\ud800"}',
        '{"name": "ok", "system": "a\\udc00b"}',
        '{"name": "ok", "tags": ["\\udfff"]}',
        '{"name": "ok", "metadata": {"\\ud83d": 1}}',
    ],
)
def test_lone_surrogates_are_422(api, body):
    assert "surrogate" in _refused(_raw(api, "post", "/v1/agents/", body))
    assert not Agent.objects.exists()


def test_a_valid_surrogate_pair_is_an_emoji_and_is_stored(api):
    r = _raw(api, "post", "/v1/agents/", '{"name": "\\ud83d\\ude00 bot"}')
    assert r.status_code == 201 and Agent.objects.get().name == "\U0001f600 bot"


def test_lone_surrogate_in_a_block_value_and_archival_text(api, agent):
    block = agent.blocks.get(label="persona")
    _refused(_raw(api, "patch", f"/v1/blocks/{block.id}", '{"value": "x\\ud800"}'))
    _refused(_raw(api, "post", f"/v1/agents/{agent.id}/archival-memory", '{"text": "\\udc00"}'))
    assert Block.objects.get(pk=block.pk).value == block.value


def test_malformed_json_is_400_json(api):
    r = api.client.post("/v1/agents/", data=b"{not json", content_type="application/json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["detail"]


def test_nul_in_ide_form_fields_is_refused_before_any_write(account, agent):
    web = Client()
    web.force_login(account.user)
    r = web.post(
        f"/agents/{agent.id}/settings/",
        {
            "name": "x",
            "model": agent.model,
            "system": NUL,
            "temperature": "0.5",
            "max_steps": "10",
            "context_window_limit": "16000",
            "tags": "",
        },
    )
    assert r.status_code == 422 and b"NUL" in r.content
    assert Agent.objects.get(pk=agent.pk).system == agent.system


# --- lengths, ranges and enums, on create and update alike ---


@pytest.mark.parametrize(
    "field, value",
    [
        ("agent_type", "x" * 60),
        ("agent_type", "not_a_type"),
        ("embedding", "e" * 201),
        ("overflow_strategy", "o" * 40),
        ("overflow_strategy", "drop_everything"),
        ("context_window_limit", 2**31),
        ("context_window_limit", 10**30),
        ("context_window_limit", 20_000_000),
        ("context_window_limit", 10),
        ("name", "n" * 201),
        ("model", "m" * 201),
        ("tags", ["t" * 101]),
        ("max_steps", 0),
        ("max_steps", 2**40),
        ("temperature", 3),
        ("max_tokens", 2**63),
    ],
)
def test_out_of_range_fields_are_422_on_create(api, field, value):
    _refused(api.post("/v1/agents/", {"name": "a", field: value}))
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    "field, value",
    [
        ("embedding", "e" * 201),
        ("overflow_strategy", "o" * 40),
        ("overflow_strategy", "drop"),
        ("context_window_limit", 2**31),
        ("context_window_limit", 10**30),
        ("name", ""),
        ("max_steps", -1),
    ],
)
def test_out_of_range_fields_are_422_on_update(api, agent, field, value):
    _refused(api.patch(f"/v1/agents/{agent.id}", {field: value}))
    fresh = Agent.objects.get(pk=agent.pk)
    assert (fresh.embedding, fresh.overflow_strategy, fresh.context_window_limit) == (
        agent.embedding,
        agent.overflow_strategy,
        agent.context_window_limit,
    )


def test_llm_config_context_window_is_bounded_too(api, agent):
    _refused(api.post("/v1/agents/", {"name": "a", "llm_config": {"context_window": 2**31}}))
    _refused(api.patch(f"/v1/agents/{agent.id}", {"llm_config": {"context_window": 10**20}}))
    _refused(api.post("/v1/agents/", {"name": "a", "llm_config": {"handle": 12}}))


def test_known_enum_values_are_accepted(api, agent):
    r = api.post(
        "/v1/agents/",
        {
            "name": "b",
            "agent_type": "letta_v1_agent",
            "overflow_strategy": "truncate",
            "context_window_limit": 2_000_000,
        },
    )
    assert r.status_code == 201, r.content
    assert api.patch(f"/v1/agents/{agent.id}", {"overflow_strategy": "truncate"}).json()["id"] == agent.id


@pytest.mark.parametrize("query", ["limit=-5", "limit=0", "limit=99999999999999999999999", "limit=9223372036854775808"])
def test_block_list_and_history_limits_are_clamped(api, agent, query):
    block = agent.blocks.get(label="persona")
    listed = api.get(f"/v1/blocks/?{query}")
    assert listed.status_code == 200 and len(listed.json()) >= 1
    history = api.get(f"/v1/blocks/{block.id}/history?{query}")
    assert history.status_code == 200 and history.json()[0]["version"] == 1


@pytest.mark.parametrize(
    "query",
    [
        "limit=-1&offset=-10",
        "limit=10**9&offset=99999999999999999999999",
        "limit=99999999999999999999&offset=9223372036854775807",
        "query=hi&offset=-3&limit=-3",
        "query=hi&offset=99999999999999999999999",
    ],
)
def test_recall_search_limits_and_offsets_are_clamped(api, agent, query):
    r = api.get(f"/v1/agents/{agent.id}/recall-memory/search?{query.replace('10**9', str(10**9))}")
    assert r.status_code in (200, 422), r.content  # 422 only for a value that is not an integer at all
    if "**" not in query:
        assert r.status_code == 200 and isinstance(r.json(), list)


def test_tool_runs_limit_is_clamped(api):
    tool = api.post("/v1/tools/", {"source_code": 'def ping() -> str:\n    """Ping."""\n    return "pong"\n'}).json()
    for limit in (-3, 0, 10**25):
        assert api.get(f"/v1/tools/{tool['id']}/runs?limit={limit}").status_code == 200


def test_paths_with_huge_integers_are_not_found(api, agent):
    block = agent.blocks.get(label="persona")
    for version in (0, -1, 2**31, 10**30):
        assert api.post(f"/v1/blocks/{block.id}/restore/{version}").status_code in (404, 422)
    web = Client()
    web.force_login(agent.owner.members.get())
    assert web.get(f"/agents/{agent.id}/history/?before={10**30}").status_code == 404


# --- blocks: null value, unique labels per agent, limit at least 1 ---


def test_null_block_value_label_or_limit_is_422(api, agent):
    block = agent.blocks.get(label="persona")
    for body in ({"value": None}, {"label": None}, {"limit": None}):
        _refused(api.patch(f"/v1/blocks/{block.id}", body))
        _refused(api.patch(f"/v1/agents/{agent.id}/core-memory/blocks/persona", body))
    assert Block.objects.get(pk=block.pk).value == block.value


def test_renaming_a_block_to_a_label_its_agent_has_is_409(api, agent):
    persona = agent.blocks.get(label="persona")
    r = api.patch(f"/v1/blocks/{persona.id}", {"label": "human"})
    assert r.status_code == 409 and "human" in r.json()["detail"]
    r = api.patch(f"/v1/agents/{agent.id}/core-memory/blocks/persona", {"label": "human"})
    assert r.status_code == 409
    assert sorted(agent.blocks.values_list("label", flat=True)) == ["human", "persona"]
    assert api.patch(f"/v1/blocks/{persona.id}", {"label": "persona_v2"}).status_code == 200


def test_renaming_a_shared_block_checks_every_agent_it_is_attached_to(api, account, agent):
    other = make_agent(account.org, name="Bob", memory_blocks=[])
    notes = api.post("/v1/blocks/", {"label": "notes", "value": "x"}).json()
    api.patch(f"/v1/agents/{other.id}/core-memory/blocks/attach/{notes['id']}")
    api.patch(f"/v1/agents/{agent.id}/core-memory/blocks/attach/{notes['id']}")
    assert api.patch(f"/v1/blocks/{notes['id']}", {"label": "human"}).status_code == 409  # Ada has 'human'
    assert Block.objects.get(pk=notes["id"]).label == "notes"


def test_block_limit_below_one_is_422_and_the_block_stays_editable(api, agent):
    block = agent.blocks.get(label="persona")
    for limit in (0, -1, 2**31):
        _refused(api.patch(f"/v1/blocks/{block.id}", {"limit": limit}))
    _refused(api.post("/v1/blocks/", {"label": "x", "limit": 0}))
    assert Block.objects.get(pk=block.pk).limit == block.limit
    assert api.patch(f"/v1/blocks/{block.id}", {"value": "still editable"}).status_code == 200


def test_block_limit_below_one_from_the_services_is_refused(agent):
    from core.errors import Invalid
    from memory.services import block_update

    block = agent.blocks.get(label="persona")
    with pytest.raises(Invalid):
        block_update(block=block, changes={"limit": 0})
    assert Block.objects.get(pk=block.pk).limit == block.limit


# --- tool output with NUL bytes is stored ---

NUL_TOOL = 'def shout() -> str:\n    """Print and return NUL bytes."""\n    print("out" + chr(0))\n    return "ret" + chr(0) + "\\ud800"\n'


def test_workbench_tool_printing_nul_is_stored(api):
    r = api.post("/v1/tools/run", {"source_code": NUL_TOOL, "args": {}})
    assert r.status_code == 200, r.content
    run = ToolRun.objects.get()
    assert "\x00" not in run.stdout + run.tool_return and "out\ufffd" in run.stdout
    assert run.tool_return.startswith("ret\ufffd")


def test_a_step_whose_tool_prints_nul_commits(account, fake_llm):
    from core.runs.runner import run_agent
    from tests.fake_llm import FakeLLM
    from tools.services import tool_attach, tool_create

    agent = make_agent(account.org, name="Nul")
    tool_attach(agent=agent, tool=tool_create(owner=account.org, source_code=NUL_TOOL))
    fake_llm.script(FakeLLM.tool("shout", {}, heartbeat=True), FakeLLM.tool("send_message", {"message": "done\x00"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    assert result.stop_reason in ("end_turn", "no_tool_call", "tool_rule"), result
    tool_msg = Message.objects.get(agent=agent, role="tool", name="shout")
    assert "\x00" not in tool_msg.text and "ret" in tool_msg.text  # the model reads the return JSON-encoded
    assert tool_msg.tool_return["stdout"].startswith("out\ufffd")
    assert ToolRun.objects.get(agent_id=agent.id).stdout.startswith("out\ufffd")


def test_storable_text_replaces_only_what_cannot_be_stored():
    from core.text import storable, storable_text

    assert storable_text("a\x00b\ud800c\U0001f600\ufffd") == "a\ufffdb\ufffdc\U0001f600\ufffd"
    clean = {"a": ["b", 1, None]}
    assert storable(clean) is clean
    assert storable({"k\x00": ["\udc00", {"x": "y\x00"}]}) == {"k\ufffd": ["\ufffd", {"x": "y\ufffd"}]}


# --- database errors that slip through are 4xx JSON ---


@pytest.mark.parametrize(
    "exc, status",
    [(IntegrityError("duplicate key"), 409), (DataError("value too long"), 422), (OverflowError("int too large"), 422)],
)
def test_database_errors_become_4xx_json(api, agent, monkeypatch, exc, status):
    from core.agents import services

    def boom(**kwargs):
        raise exc

    monkeypatch.setattr(services, "agent_update", boom)
    _refused(api.patch(f"/v1/agents/{agent.id}", {"name": "x"}), status)


# --- body size ---


def test_a_10_mb_body_is_json_413(api):
    body = json.dumps({"name": "a", "system": "x" * (10 * 1024 * 1024)})
    r = api.client.post("/v1/agents/", data=body, content_type="application/json")
    assert "MAX_REQUEST_BYTES" in _refused(r, 413)
    assert not Agent.objects.exists()


def test_body_limit_is_a_setting(api, settings):
    settings.MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000
    assert api.post("/v1/agents/", {"name": "a", "system": "x" * 1000}).status_code == 201
    _refused(api.post("/v1/agents/", {"name": "b", "system": "x" * 3000}), 413)


def test_a_body_without_content_length_over_the_limit_is_413(api, settings):
    from agents_ide.validation import StrictParser, TooLarge

    settings.MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    request = api.client.request().wsgi_request  # a GET: build a request we can give a body to
    request._read_started, request.META["CONTENT_LENGTH"] = False, ""
    request._stream = __import__("io").BytesIO(b"{" + b" " * 500 + b"}")
    request.META["CONTENT_TYPE"] = "application/json"
    with pytest.raises(TooLarge):
        StrictParser().parse_body(request)


# --- the IDE's import posts the file ---


def _exported(web, agent) -> bytes:
    return web.get(f"/agents/{agent.id}/export/").content


def test_ide_import_posts_the_file_for_preview_and_confirm(account, agent):
    web = Client()
    web.force_login(account.user)
    data = _exported(web, agent)
    preview = web.post("/agents/import/", {"file": SimpleUploadedFile("a.af", data)}, HTTP_HX_REQUEST="true")
    assert (
        preview.status_code == 200 and b'id="import-preview"' in preview.content and b"payload" not in preview.content
    )
    assert Agent.objects.count() == 1
    done = web.post("/agents/import/", {"file": SimpleUploadedFile("a.af", data), "confirm": "1", "name": "Copy"})
    assert done.status_code == 302 and Agent.objects.filter(name="Copy").exists()


def test_ide_import_of_a_file_over_two_megabytes(account, agent):
    web = Client()
    web.force_login(account.user)
    doc = json.loads(_exported(web, agent))
    for i, block in enumerate(doc["blocks"]):  # block values may be 1M characters, other strings 200,000
        block.update(value=str(i) * 990_000, limit=1_000_000)
    doc["agents"][0]["system"] = "s" * 150_000
    raw = json.dumps(doc).encode()
    assert len(raw) > 2_100_000  # as base64 in a form field, over Django's 2.5 MB limit
    done = web.post("/agents/import/", {"file": SimpleUploadedFile("big.af", raw), "confirm": "1", "name": "Big"})
    assert done.status_code == 302, done.content[done.content.find(b"import-error") :][:300]
    assert sorted(len(b.value) for b in Agent.objects.get(name="Big").blocks.all()) == [990_000, 990_000]


@pytest.mark.parametrize(
    "content", [b"{not json", b"\xff\xfe", b'{"agents": [{"name": "\\u0000"}]}', b"[]", b"", b'{"agents": "x"}']
)
def test_ide_import_malformed_file_is_an_inline_error(account, content):
    web = Client()
    web.force_login(account.user)
    page = web.post("/agents/import/", {"file": SimpleUploadedFile("x.af", content)})
    assert page.status_code == 400 and b'id="import-error"' in page.content
    partial = web.post("/agents/import/", {"file": SimpleUploadedFile("x.af", content)}, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and b'id="import-error"' in partial.content
    confirm = web.post("/agents/import/", {"file": SimpleUploadedFile("x.af", content), "confirm": "1"})
    assert confirm.status_code == 400 and not Agent.objects.exists()


def test_ide_import_without_a_file_or_with_the_old_payload_field(account):
    web = Client()
    web.force_login(account.user)
    r = web.post("/agents/import/", {"payload": "!!!not base64", "confirm": "1"})
    assert r.status_code == 400 and b"Choose an agent file" in r.content


def test_ide_import_over_the_documented_size_is_refused(account):
    from core.agents.agentfile.model import MAX_FILE_BYTES

    web = Client()
    web.force_login(account.user)
    r = web.post("/agents/import/", {"file": SimpleUploadedFile("huge.af", b" " * (MAX_FILE_BYTES + 10))})
    assert r.status_code == 400 and str(MAX_FILE_BYTES).encode() in r.content


def test_api_import_of_a_file_with_nul_strings_is_4xx(api):
    body = {"file": SimpleUploadedFile("x.af", b'{"agents": [{"name": "a\\u0000"}], "blocks": [], "tools": []}')}
    r = api.client.post("/v1/agents/import", body)
    assert 400 <= r.status_code < 500 and "NUL" in r.json()["detail"]


# --- the spec declares what the server enforces ---


def test_openapi_declares_error_responses_and_constraints(api):
    spec = api.get("/v1/openapi.json").json()
    assert spec["components"]["schemas"]["Error"]["required"] == ["detail"]
    patch = spec["paths"]["/v1/blocks/{block_id}"]["patch"]["responses"]
    assert {"400", "401", "404", "409", "413", "422"} <= set(patch)
    assert patch["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert "401" not in spec["paths"]["/v1/health/"]["get"]["responses"]
    agent_in = spec["components"]["schemas"]["AgentCreateIn"]["properties"]
    window = agent_in["context_window_limit"]["anyOf"][0]
    assert window["minimum"] == 1024 and window["maximum"] < 2**31
    assert "memgpt_v2_agent" in agent_in["agent_type"]["anyOf"][0]["enum"]
    assert agent_in["overflow_strategy"]["anyOf"][0]["enum"] == ["summarize", "truncate"]
    block = spec["components"]["schemas"]["BlockUpdateIn"]["properties"]
    assert block["limit"]["minimum"] == 1 and block["label"]["maxLength"] == 100 and "anyOf" not in block["value"]


# --- sending messages (a provider configured, so the request reaches the run) ---


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hi"}], "max_steps": 10**30},
        {"messages": [{"role": "user", "content": "hi"}], "max_steps": 2**31},
        {"messages": [{"role": "user", "content": "hi\x00"}]},
        {"input": "\x00"},
    ],
)
def test_bad_sends_are_4xx_and_start_no_run(api, agent, fake_llm, body):
    from core.models import Run

    for path in (f"/v1/agents/{agent.id}/messages", f"/v1/agents/{agent.id}/messages/async"):
        r = api.post(path, body)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.content[:300])
        assert r.json()["detail"]
    assert not Run.objects.filter(status__in=["created", "running"]).exists()


# --- every IDE form answers a person's mistakes without a server error ---

NASTY = [
    {"limit": "99999999999999999999999", "value": "x", "label": "l" * 300, "description": "d"},
    {"limit": "-1", "value": "", "label": "", "text": "", "tags": "," * 50},
    {"limit": "0", "value": "v", "label": "ok", "text": "t" * 200_000, "tags": "t" * 300},
    {
        "name": "n" * 300,
        "model": "m" * 300,
        "system": "s",
        "temperature": "nan",
        "max_steps": str(2**40),
        "context_window_limit": str(2**40),
        "tags": "a,b",
    },
    {
        "name": "x",
        "model": "openai/fake-model",
        "system": "",
        "temperature": "inf",
        "max_steps": "-5",
        "context_window_limit": "9223372036854775808",
        "tags": "",
    },
    {"tool_rules": "[1, 2]"},
    {"tool_rules": '[{"type": "exit_loop"}]'},
    {"tool_rules": "{" * 5000},
    {"source_code": "def f(:", "env_vars": "[]", "prefill": "[]", "sandbox": "x" * 100},
    {
        "source_code": 'def f(a: int) -> int:\n    """F.\n\n    Args:\n        a: A.\n    """\n    return a\n',
        "arg_a": "99999999999999999999999999999",
        "env_vars": '{"A": {"b": 1}}',
        "tool_id": "tool-nope",
        "agent_id": "x",
    },
    {"block_id": "block-nope", "q": "%", "before": str(10**30), "template": "nope"},
]


def test_ide_forms_never_answer_500(account, agent):
    block = agent.blocks.get(label="persona")
    web = Client(raise_request_exception=False)
    web.force_login(account.user)
    urls = [
        f"/agents/{agent.id}/settings/",
        f"/agents/{agent.id}/rules/",
        f"/agents/{agent.id}/tokens/",
        f"/agents/{agent.id}/blocks/new/",
        f"/agents/{agent.id}/blocks/attach/",
        f"/agents/{agent.id}/blocks/detach/",
        f"/agents/{agent.id}/blocks/{block.id}/save/",
        f"/agents/{agent.id}/archival/insert/",
        f"/blocks/{block.id}/",
        f"/blocks/{block.id}/restore/99999999999999999999/",
        "/agents/new/",
        "/tools/schema/",
        "/tools/save/",
        "/settings/tokens/",
        "/settings/providers/",
        "/settings/owner/",
    ]
    for url in urls:
        for data in NASTY:
            r = web.post(url, data)
            assert r.status_code < 500, (url, data, r.status_code)
    for url in (
        f"/agents/{agent.id}/history/?before={10**30}",
        f"/agents/{agent.id}/recall/?q=%25&limit=-4",
        f"/agents/{agent.id}/archival/?q=x&limit=99999999999999999999",
        "/?q=%25&tag=" + "t" * 500,
    ):
        assert web.get(url).status_code < 500, url
    assert Block.objects.get(pk=block.pk).limit >= 1


def test_an_oversized_form_on_a_page_is_413_not_a_bare_400(account, agent, settings):
    settings.MAX_REQUEST_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    web = Client()
    web.force_login(account.user)
    r = web.post(f"/agents/{agent.id}/settings/", {"name": "x", "system": "s" * 20_000})
    assert r.status_code == 413 and b"MAX_REQUEST_BYTES" in r.content
    assert Agent.objects.get(pk=agent.pk).system == agent.system
