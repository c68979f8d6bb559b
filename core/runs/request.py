"""What a send asks for: one RunRequest, built once where the send comes in and handed down, never rebuilt.

An entry point (`POST …/messages`, an SSE stream, a websocket send, a conversation's send, an agent-to-agent message,
a sleep-time companion, an agent test) builds it from its input; the executor (core.runs.executor) takes it to the
runner's claim (core.runs.runner.run_start), which reads the agent under its lock and resolves its model onto it, and
then to the runner's loop on whichever thread executes the run. A run queued to a pool thread of this process is
handed its request (resolved model included); one executed by another process (a worker, a restart) is described by
`RunRequest.of_run` there, and its model is resolved there, once.
"""

from dataclasses import dataclass

from core.models import Message, Organization, Run
from core.providers import ResolvedModel


@dataclass(kw_only=True)
class RunRequest:
    """One run asked of one agent. `input_messages` are the API's messages ({role, content} or an answer to a run
    that waits), validated by the claim; `conversation_id` continues that conversation of the agent instead of its
    own thread; `client_tools` are tools the client runs itself; `stream_tokens` says the caller follows the reply
    token by token; `background` marks runs whose caller does not wait. `depth`, `parent_run_id` and `kinds` (input
    messages marked by index) are for agent-to-agent messages. `request_config` is Letta's LettaRequestConfig of an
    API send, kept on the run.

    `refuse_unconfigured`: a person's send is refused (NotConfigured, 400, nothing claimed) when no provider serves
    the agent's model, so the claim resolves it; an agent's own message (multi-agent tools, sleep-time companions,
    agent tests) is claimed anyway and its run ends with the how-to, so its model is resolved where it executes.
    `resolved` is set once, by whichever of the two resolves it. `inputs` are the message rows the claim stored for
    the input (None in a process that did not claim the run: it reads them back)."""

    owner: Organization
    agent_id: str
    input_messages: list[dict]
    max_steps: int | None = None
    conversation_id: str | None = None
    client_tools: list[dict] | None = None
    stream_tokens: bool = False
    background: bool = False
    depth: int = 0
    parent_run_id: str | None = None
    kinds: dict[int, str] | None = None
    request_config: dict | None = None
    refuse_unconfigured: bool = True
    resolved: ResolvedModel | None = None
    inputs: list[Message] | None = None

    @classmethod
    def of_run(cls, run: Run, owner: Organization) -> "RunRequest":
        """The request a stored run was claimed for (its inputs already validated), for a process that did not claim
        it; its model is not resolved yet."""
        return cls(
            owner=owner,
            agent_id=run.agent_id,
            input_messages=run.input_messages,
            max_steps=run.max_steps,
            conversation_id=run.conversation_id,
            client_tools=run.client_tools or None,
            stream_tokens=run.stream_tokens,
            background=run.background,
            depth=run.depth,
            parent_run_id=run.parent_run_id,
            request_config=run.request_config,
        )
