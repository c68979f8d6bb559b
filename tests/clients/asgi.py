"""The ASGI app the client tests' daphne serves: the project's own application behind the request log named
by AIDE_REQUEST_LOG."""

import os

from agents_ide.asgi import application as project_application
from tests.clients.request_log import RequestLog

application = RequestLog(project_application, os.environ["AIDE_REQUEST_LOG"])
