"""Fixtures for the sandbox tests: the local sandbox as each kind of server process uses it."""

import pytest

from tests.tools.sandbox_servers import AsOrdinaryUser, make_server, servers


@pytest.fixture(scope="module", params=servers())
def sandbox_server(request):
    """The namespaced local sandbox, called by a root server and by an ordinary-user server (when we are root)."""
    srv = make_server(request.param)
    yield srv
    if isinstance(srv, AsOrdinaryUser):
        srv.close()
