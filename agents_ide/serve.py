"""The daphne launcher: `python -m agents_ide.serve` takes daphne's own arguments (`-b`, `-p`, the application).

It differs from the `daphne` command in one thing: Twisted does not parse POST form bodies. Twisted's `Request`
parses every multipart or URL-encoded POST body into its own `args` before daphne hands the request to the
application, and answers one it cannot parse (a multipart body holding only its closing boundary, say) with a bare
400 (no body, no Content-Type) that Django never sees. daphne never reads those `args`, so the parse only cost a
second copy of every upload in memory; with it off, Django reads each body once and our request guard answers a
malformed one with a JSON error naming the problem (agents_ide/validation.py).
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


class FormlessServer(Server):
    """daphne's server with `FormlessHTTPFactory`: `Server.run` builds its HTTP factory by assigning
    `http_factory`, which this property turns into ours."""

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


def main() -> None:
    ServeCommand.entrypoint()


if __name__ == "__main__":
    main()
