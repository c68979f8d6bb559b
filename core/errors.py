"""Domain errors; agents_ide/api.py maps them to HTTP statuses in one place."""


class DomainError(Exception):
    status = 400

    def __init__(self, message: str, *, detail: object = None):
        super().__init__(message)
        self.message = message
        self.detail = detail


class NotFound(DomainError):
    status = 404


class Invalid(DomainError):
    status = 422


class Conflict(DomainError):
    status = 409


class NotConfigured(DomainError):
    """A feature needs configuration the deployment does not have (e.g. no LLM provider)."""

    status = 400


class Forbidden(DomainError):
    """The deployment's operator does not let this account do it (e.g. stdio MCP servers for ordinary accounts)."""

    status = 403
