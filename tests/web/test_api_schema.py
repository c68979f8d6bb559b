"""Schemathesis over the OpenAPI spec (issue 18): generated requests, valid and invalid, against every operation, in
process through Django's WSGI handler on this run's database. No answer may be a server error, and none may
contradict the spec (an undeclared status, a body or content type other than declared).

Bounded: a fixed number of examples per operation (SCHEMATHESIS_EXAMPLES, default 20), no shrinking, no deadline;
one and a half minutes on the development machine. Every operation is exercised: sending messages answers 400
before any model call (no provider is configured here), and tool runs use the real sandbox.
"""

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from tests.factories import make_account, make_agent

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "20"))
# What "contradicts the spec" means here; the data-acceptance checks are left out because a well-formed request
# may still be refused for what it refers to (an unknown id is 404, a taken name 409), as the spec declares.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
)


@pytest.fixture
def api_schema(db):
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    # As Django's test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/v1/openapi.json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture
def token(db):
    account = make_account("fuzz")
    agent = make_agent(account.org, name="target")  # a real id: some generated paths reach it through examples
    return account.token, agent


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_api_answers_as_its_spec_says(case, token):
    from schemathesis import checks as core_checks
    from schemathesis.checks import load_all_checks
    from schemathesis.specs.openapi import checks as openapi_checks

    load_all_checks()
    raw, _ = token
    chosen = [getattr(openapi_checks, name, None) or getattr(core_checks, name) for name in CHECKS]
    case.call_and_validate(headers={"Authorization": f"Bearer {raw}"}, checks=chosen)
