"""Tool library API: create, upsert, modify, delete, generate-schema; names, ownership, built-ins."""

import textwrap

import pytest

from tools.models import Tool

ADD = textwrap.dedent('''
    def add(a: int, b: int = 1) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b
''')


def src(name="add", doc="Add two numbers."):
    return ADD.replace("def add", f"def {name}").replace("Add two numbers.", doc)


@pytest.fixture
def created(api):
    r = api.post("/v1/tools/", {"source_code": ADD, "tags": ["math"]})
    assert r.status_code == 201, r.content
    return r.json()


def test_create_derives_schema_and_lists_it(api, created):
    assert created["name"] == "add" and created["tool_type"] == "custom" and created["tags"] == ["math"]
    assert created["json_schema"]["parameters"]["required"] == ["a"]
    assert created["json_schema"]["parameters"]["properties"]["b"]["type"] == "integer"
    assert created["description"] == "Add two numbers." and created["return_char_limit"] == 50000
    assert [t["id"] for t in api.get("/v1/tools/?name=add").json()] == [created["id"]]
    assert api.get(f"/v1/tools/{created['id']}").json()["source_code"] == ADD


def test_create_same_name_conflicts(api, created):
    r = api.post("/v1/tools/", {"source_code": src(doc="Another adder.")})
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert Tool.objects.filter(name="add").count() == 1


def test_create_with_builtin_name_conflicts(api):
    source = src(name="send_message").replace("Add two numbers.", "Not the real one.")
    r = api.post("/v1/tools/", {"source_code": source})
    assert r.status_code == 409 and "built-in" in r.json()["detail"]


def test_create_rejects_long_name_and_bad_source(api):
    r = api.post("/v1/tools/", {"source_code": src(name="x" * 65)})
    assert r.status_code == 422 and "limit is 64" in r.json()["detail"]
    bad = 'def f(a):\n    """Doc.\n\n    Args:\n        a: thing\n    """\n'
    r = api.post("/v1/tools/", {"source_code": bad})
    assert r.status_code == 422
    assert "parameter 'a' (line 1) has no type annotation" in r.json()["errors"]["source_code"]


def test_an_explicit_json_schema_is_taken_as_given(api):
    source = "def raw(x):\n    return x\n"  # no docstring: not derivable, but an explicit schema is accepted
    schema = {
        "name": "raw",
        "description": "Echo.",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
    }
    r = api.post("/v1/tools/", {"source_code": source, "json_schema": schema})
    assert r.status_code == 201, r.content
    assert r.json()["json_schema"]["parameters"]["required"] == ["x"] and r.json()["description"] == "Echo."
    # Named after its schema even when the source has no such function, as Letta's create_or_update_tool_async.
    r = api.post("/v1/tools/", {"source_code": source, "json_schema": {**schema, "name": "other"}})
    assert r.status_code == 201 and r.json()["name"] == "other" and r.json()["json_schema"]["name"] == "other"


def test_return_char_limit_and_pip_requirements_are_validated(api):
    assert api.post("/v1/tools/", {"source_code": ADD, "return_char_limit": 0}).status_code == 422
    assert api.post("/v1/tools/", {"source_code": ADD, "return_char_limit": 10_000_000}).status_code == 422
    r = api.post("/v1/tools/", {"source_code": ADD, "pip_requirements": [{"name": "--index-url=http://evil"}]})
    assert r.status_code == 422 and "invalid package name" in r.json()["detail"]
    r = api.post(
        "/v1/tools/",
        {"source_code": ADD, "pip_requirements": [{"name": "requests", "version": "2.32.3"}], "return_char_limit": 100},
    )
    assert r.status_code == 201
    assert (
        r.json()["pip_requirements"] == [{"name": "requests", "version": "2.32.3"}]
        and r.json()["return_char_limit"] == 100
    )


def test_upsert_creates_then_updates_by_name(api):
    first = api.put("/v1/tools/", {"source_code": ADD})
    assert first.status_code == 200 and first.json()["description"] == "Add two numbers."
    second = api.put("/v1/tools/", {"source_code": src(doc="Sum a and b."), "tags": ["v2"]})
    assert second.json()["id"] == first.json()["id"]
    assert second.json()["description"] == "Sum a and b." and second.json()["tags"] == ["v2"]
    assert Tool.objects.filter(name="add").count() == 1


def test_patch_rederives_schema_and_refuses_a_taken_name(api, created):
    r = api.patch(f"/v1/tools/{created['id']}", {"source_code": src(name="plus"), "sandbox": "local"})
    assert r.status_code == 200 and r.json()["name"] == "plus" and r.json()["json_schema"]["name"] == "plus"
    assert r.json()["sandbox"] == "local"
    other = api.post("/v1/tools/", {"source_code": src(name="minus")}).json()
    r = api.patch(f"/v1/tools/{other['id']}", {"source_code": src(name="plus")})
    assert r.status_code == 409
    assert api.patch(f"/v1/tools/{other['id']}", {"sandbox": "docker"}).status_code == 422
    r = api.patch(f"/v1/tools/{other['id']}", {"description": "Subtract."})
    assert r.json()["description"] == "Subtract." and r.json()["json_schema"]["description"] == "Subtract."


def test_delete_removes_the_tool(api, created):
    assert api.delete(f"/v1/tools/{created['id']}").status_code == 200
    assert api.get(f"/v1/tools/{created['id']}").status_code == 404
    assert api.delete(f"/v1/tools/{created['id']}").status_code == 404


def test_another_owners_tool_is_not_found(api, created, other_account):
    from tests.factories import ApiClient

    mallory = ApiClient(other_account.token)
    tid = created["id"]
    assert mallory.get(f"/v1/tools/{tid}").status_code == 404
    assert mallory.patch(f"/v1/tools/{tid}", {"description": "mine now"}).status_code == 404
    assert mallory.delete(f"/v1/tools/{tid}").status_code == 404
    assert mallory.get(f"/v1/tools/{tid}/runs").status_code == 404
    assert tid not in [t["id"] for t in mallory.get("/v1/tools/").json()]
    # Names are unique per owner, not globally.
    assert mallory.post("/v1/tools/", {"source_code": ADD}).status_code == 201
    assert Tool.objects.get(id=tid).description == "Add two numbers."


def test_builtin_tools_cannot_be_modified_and_come_back_when_deleted(api, account):
    from tools.services import builtin_tools_ensure

    builtin = builtin_tools_ensure(owner=account.org)["send_message"]
    r = api.patch(f"/v1/tools/{builtin.id}", {"description": "hijacked"})
    assert r.status_code == 403
    r = api.put("/v1/tools/", {"source_code": src(name="send_message")})
    assert r.status_code == 403
    builtin.refresh_from_db()
    assert builtin.description != "hijacked" and builtin.tool_type == "base"
    # Letta deletes a built-in as any tool; its list's first page installs it again (test_base_tools_upsert_on_list)
    assert api.delete(f"/v1/tools/{builtin.id}").status_code == 200
    assert not Tool.objects.filter(pk=builtin.pk).exists()
    again = {t["name"]: t for t in api.get("/v1/tools/?limit=500").json()}
    assert again["send_message"]["tool_type"] == "letta_core" and again["send_message"]["id"] != builtin.id


def test_generate_schema_does_not_save(api):
    r = api.post("/v1/tools/generate-schema", {"source_code": ADD})
    assert r.status_code == 200 and r.json()["name"] == "add"
    assert r.json()["parameters"]["properties"]["a"] == {"type": "integer", "description": "The first number."}
    assert not Tool.objects.filter(name="add").exists()
    two = ADD + "\n\ndef helper():\n    pass\n"
    assert api.post("/v1/tools/generate-schema", {"source_code": two, "name": "add"}).json()["name"] == "add"


def test_generate_schema_names_parameter_and_line(api):
    source = 'def f(a: int, b):\n    """Doc.\n\n    Args:\n        a: x\n        b: y\n    """\n'
    r = api.post("/v1/tools/generate-schema", {"source_code": source})
    assert r.status_code == 422
    assert r.json()["detail"] == "parameter 'b' (line 1) has no type annotation"
    r = api.post("/v1/tools/generate-schema", {"source_code": "def f(:\n"})
    assert r.status_code == 422 and "syntax error at line 1" in r.json()["detail"]


def test_list_pages_by_creation_with_cursors_and_filters(api, account):
    ids = [api.post("/v1/tools/", {"source_code": src(name=f"t{i}")}).json()["id"] for i in range(3)]
    page = api.get("/v1/tools/?tool_types=custom&order=asc&limit=2").json()
    assert [t["id"] for t in page] == ids[:2]
    rest = api.get(f"/v1/tools/?tool_types=custom&order=asc&after={ids[1]}").json()
    assert [t["id"] for t in rest] == ids[2:]
    assert [t["id"] for t in api.get("/v1/tools/?tool_types=custom").json()] == ids[::-1]
    builtins = api.get("/v1/tools/?exclude_tool_types=custom&limit=1000").json()
    assert builtins and all(t["tool_type"].startswith("letta_") for t in builtins)
    # Built-ins are created together; paging through them by id cursors must not repeat or skip any.
    seen, after = [], ""
    while True:
        page = api.get(f"/v1/tools/?exclude_tool_types=custom&limit=3&after={after}").json()
        if not page:
            break
        seen += [t["id"] for t in page]
        after = page[-1]["id"]
    assert seen == [t["id"] for t in builtins]
    assert [t["name"] for t in api.get("/v1/tools/?search=T1").json()] == ["t1"]
