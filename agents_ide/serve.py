"""The daphne launcher: `python -m agents_ide.serve` takes daphne's own arguments (`-b`, `-p`, the application).

It differs from the `daphne` command in two things. Its access log (stdout, at the default verbosity) leaves out HTTP
requests unless `--access-log` is given: each has its line already, from the request log (core.telemetry.middleware,
LOG_REQUESTS), with its request id and user; websocket connects and disconnects are still logged. And Twisted does
not parse POST form bodies: Twisted's `Request` parses every multipart or URL-encoded POST body into its own `args`
before daphne hands the request to the application, and answers one it cannot parse (a multipart body holding only
its closing boundary, say) with a bare 400 (no body, no Content-Type) that Django never sees. daphne never reads those
`args`, so the parse only cost a second copy of every upload in memory; with it off, Django reads each body once and
our request guard answers a malformed one with a JSON error naming the problem (agents_ide/validation.py).
"""

from __future__ import annotations

import functools

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server


class FormlessHTTPFactory(HTTPFactory):
    """daphne's HTTP factory, whose requests leave POST form bodies unparsed (`parsePOSTFormSubmission=False`)."""

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = functools.partial(WebRequest, parsePOSTFormSubmission=False)
        return protocol


def _websockets_only(action_logger):
    """daphne's access logger, for websocket actions only (an HTTP request's line is the request log's)."""

    def log(protocol, action, details):
        if protocol != "http":
            action_logger(protocol, action, details)

    return log


class FormlessServer(Server):
    """daphne's server with `FormlessHTTPFactory`: `Server.run` builds its HTTP factory by assigning
    `http_factory`, which this property turns into ours. Its access log leaves HTTP requests out unless
    `http_access_log` (`--access-log` given)."""

    http_access_log = False

    def __init__(self, *args, action_logger=None, **kwargs):
        if action_logger is not None and not self.http_access_log:
            action_logger = _websockets_only(action_logger)
        super().__init__(*args, action_logger=action_logger, **kwargs)

    @property
    def http_factory(self) -> HTTPFactory:
        return self.__dict__["formless_http_factory"]

    @http_factory.setter
    def http_factory(self, factory: HTTPFactory) -> None:
        self.__dict__["formless_http_factory"] = (
            factory if isinstance(factory, FormlessHTTPFactory) else FormlessHTTPFactory(self)
        )


class ServeCommand(CommandLineInterface):
    server_class = FormlessServer

    def run(self, args):
        self.server_class.http_access_log = any(arg.startswith("--access-log") for arg in args)
        return super().run(args)


def main() -> None:
    ServeCommand.entrypoint()


if __name__ == "__main__":
    main()
