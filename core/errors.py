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


class Busy(Conflict):
    """Another run is in progress (Letta's ConversationBusyError for a send): its 409 names that run at the top level
    of the body, as Letta's server does (letta/server/rest_api/app.py `_conversation_busy_handler`), and in
    `errors.run_id` as before."""

    def __init__(self, message: str, *, run_id: str):
        super().__init__(message, detail={"run_id": run_id})
        self.run_id = run_id


class NotConfigured(DomainError):
    """A feature needs configuration the deployment does not have (e.g. no LLM provider)."""

    status = 400


class Forbidden(DomainError):
    """The deployment's operator does not let this account do it (e.g. stdio MCP servers for ordinary accounts)."""

    status = 403
