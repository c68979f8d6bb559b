"""What is stored about owners, agents, their messages, runs and steps."""

from django.conf import settings
from django.db import models

from core import ids
from core.crypto import EncryptedJSONField, EncryptedTextField
from core.fields import JSONField, StorableJSONField, StorableTextField


class Organization(models.Model):
    """The owner of everything: a user's personal organization, or a team's."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_org_id, editable=False)
    name = models.CharField(max_length=200)
    personal = models.BooleanField(default=False)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="organizations")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    role = models.CharField(max_length=20, default="owner")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "organization"], name="unique_membership")]


class ApiToken(models.Model):
    """A personal API token; only its SHA-256 is stored. `agent` scopes a short-lived tool token."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_token_id, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    hashed = models.CharField(max_length=64, unique=True)
    agent_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)


BASE_URL_MAX = 2000  # a provider's base URL: proxies put tokens and paths in it (URLField's default of 200 is short)


class ProviderConfig(models.Model):
    """An LLM or embedding provider an owner configured in the IDE (in addition to the environment's)."""

    KINDS = [
        ("openai", "OpenAI"),
        ("anthropic", "Anthropic"),
        ("ollama", "Ollama"),
        ("openai_compatible", "OpenAI-compatible"),
    ]
    id = models.CharField(primary_key=True, max_length=64, default=ids.new_provider_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="providers")
    kind = models.CharField(max_length=32, choices=KINDS)
    name = models.CharField(max_length=64)
    api_key = EncryptedTextField(blank=True, default="")
    base_url = models.URLField(max_length=BASE_URL_MAX, blank=True, default="")
    model_names = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_provider_name")]


class OwnerSettings(models.Model):
    """Per-owner choices made in the IDE's settings page."""

    owner = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="settings")
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    sandbox_default = models.CharField(max_length=16, blank=True, default="")
    # Network for this owner's tools that don't choose themselves; None: the deployment's SANDBOX_ALLOW_NETWORK.
    sandbox_allow_network = models.BooleanField(null=True, blank=True, default=None)
    e2b_api_key = EncryptedTextField(blank=True, default="")
    e2b_template = models.CharField(max_length=200, blank=True, default="")


class Agent(models.Model):
    OVERFLOW = [("summarize", "Summarize evicted messages"), ("truncate", "Drop evicted messages")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_agent_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    agent_type = models.CharField(max_length=50, default="memgpt_v2_agent")
    system = models.TextField(blank=True, default="")
    model = models.CharField(max_length=200)
    # temperature, max_tokens, put_inner_thoughts, reasoning, ...: what the compiled request carries.
    model_settings = models.JSONField(default=dict, blank=True)
    context_window_limit = models.PositiveIntegerField(default=32000)
    embedding = models.CharField(max_length=200, blank=True, default="")
    embedding_config = models.JSONField(default=dict, blank=True)
    tool_rules = models.JSONField(default=list, blank=True)
    secrets = EncryptedJSONField(default=dict, blank=True)  # the tools' environment variables: values write-only
    metadata = models.JSONField(default=dict, blank=True)
    # Ordered ids of the in-context messages; index 0 is the system message (Letta's `message_ids`).
    message_ids = JSONField(default=list, blank=True)
    max_steps = models.PositiveIntegerField(default=50)
    overflow_strategy = models.CharField(max_length=16, choices=OVERFLOW, default="summarize")
    # Letta's CompactionSettings as the client set them ({model, mode, prompt, clip_chars, ...}).
    compaction_settings = models.JSONField(default=dict, blank=True)
    # The IDE's breakpoints: where a run of the agent stops for a person (core.engine.breakpoints.Breakpoint).
    breakpoints = models.JSONField(default=list, blank=True)
    last_stop_reason = models.CharField(max_length=32, blank=True, default="")
    last_run_completion = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"])]

    def __str__(self) -> str:
        return self.name


class AgentTag(models.Model):
    """One tag of an agent; a table (not JSON) so tag matching is an indexed query on every database."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tag_rows")
    tag = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "tag"], name="unique_agent_tag")]
        indexes = [models.Index(fields=["tag"])]


class RunStatus(models.TextChoices):
    """A run's life: created (claimed, queued) → running (leased) → one of the terminal three."""

    CREATED = "created", "created"
    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


RUN_ACTIVE = (RunStatus.CREATED, RunStatus.RUNNING)  # the agent is busy while one of its runs is in these
RUN_TERMINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class Conversation(models.Model):
    """Another message thread of an agent (Letta's conversation): its own in-context list over the agent's memory
    blocks, tools and archival memory. The agent's own thread is the `default` conversation and has no row."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_conv_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="conversations")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversations")
    summary = models.TextField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")  # overrides the agent's model in its runs
    model_settings = models.JSONField(default=dict, blank=True)
    # Ordered ids of the thread's in-context messages; index 0 is its system message (as the agent's own list).
    message_ids = JSONField(default=list, blank=True)
    isolated_block_labels = models.JSONField(default=list, blank=True)
    last_message_at = models.DateTimeField(null=True, blank=True)
    last_run_completion = models.DateTimeField(null=True, blank=True)
    deleted = models.BooleanField(default=False)  # Letta deletes softly: its messages stay in recall
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "created_at"]), models.Index(fields=["owner", "created_at"])]


class Run(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.new_run_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.CREATED)
    stop_reason = models.CharField(max_length=32, blank=True, default="")
    background = models.BooleanField(default=False)
    input_messages = JSONField(default=list, blank=True)
    max_steps = models.PositiveIntegerField(default=50)
    usage = JSONField(default=dict, blank=True)
    error = StorableTextField(blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    # Multi-agent loop guard: how many agent-to-agent hops led to this run.
    depth = models.PositiveSmallIntegerField(default=0)
    parent_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_runs")
    stream_tokens = models.BooleanField(default=False)  # the caller follows the reply token by token
    worker = models.CharField(max_length=200, blank=True, default="")
    # Renewed by the process executing the run; a lapsed lease means that process died (see core.runs.queue).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    agent_version = models.ForeignKey(
        "AgentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )  # None: the agent's own thread
    # The client's own tools offered to the model in this run (Letta's `client_tools`: {name, description,
    # parameters}); a call to one waits for the client's result.
    client_tools = JSONField(default=list, blank=True)
    # A run that stopped for a person or a client (an approval, a client tool, a breakpoint): what it waits for
    # (core.runs.waits) and until when; both None once answered, cancelled or expired.
    waiting = JSONField(null=True, blank=True)
    waiting_until = models.DateTimeField(null=True, blank=True, db_index=True)
    # Letta's LettaRequestConfig of the send that made the run: its include_return_message_types also filter the
    # run's message list later (Letta's run_manager.get_run_messages). None: a run no API send made.
    request_config = JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "status"]), models.Index(fields=["owner", "created_at"])]


class Step(models.Model):
    """One model call: the exact request sent, the raw response, usage and timings."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_step_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="steps")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="steps")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=16, default="agent")  # agent | summarizer
    model = models.CharField(max_length=200, blank=True, default="")
    request = StorableJSONField(default=dict, blank=True)
    response = StorableJSONField(default=dict, blank=True)
    context_sections = JSONField(default=list, blank=True)
    tokenizer = models.CharField(max_length=100, blank=True, default="")
    usage = JSONField(default=dict, blank=True)
    model_ms = models.FloatField(default=0)
    tools_ms = models.FloatField(default=0)
    total_ms = models.FloatField(default=0)
    stop_reason = models.CharField(max_length=32, blank=True, default="")
    error = StorableTextField(blank=True, default="")
    # What the compiler got (core.runs.timetravel.step_state): replays and forks start from exactly this.
    state = StorableJSONField(default=dict, blank=True)
    # A person's judgement of the step (Letta's Step.feedback and tags; the comment is ours): from the API's
    # PATCH /v1/steps/{id}/feedback or the IDE's step view.
    feedback = models.CharField(max_length=8, blank=True, default="")  # positive | negative
    feedback_comment = StorableTextField(blank=True, default="")
    tags = JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "created_at"])]


class Replay(models.Model):
    """A recorded step sent again to one or more models, with overrides; the agent itself is untouched."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_replay_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="replays")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="replays")
    overrides = models.JSONField(default=dict, blank=True)
    sections = models.JSONField(default=list, blank=True)  # the replayed request's token breakdown
    results = StorableJSONField(default=list, blank=True)  # per model: request, response, calls, usage, cost, error
    actual = StorableJSONField(default=dict, blank=True)  # what the agent did at that step, for the comparison
    created_at = models.DateTimeField(auto_now_add=True)


class Message(models.Model):
    """Every message an agent ever saw (recall memory); the in-context ones are listed on the agent."""

    ROLES = [("system", "system"), ("user", "user"), ("assistant", "assistant"), ("tool", "tool")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_message_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="messages")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="messages")
    # Monotonic per agent, assigned under the agent's lock: a stable total order for history and paging.
    seq = models.BigIntegerField(default=0)
    role = models.CharField(max_length=16, choices=ROLES)
    content = StorableJSONField(default=list, blank=True)  # [{type: "text", text}] parts
    text = StorableTextField(blank=True, default="")  # plain text of the content, for search
    reasoning = StorableTextField(blank=True, default="")
    reasoning_source = models.CharField(max_length=32, blank=True, default="")  # native | thinking_arg
    tool_calls = StorableJSONField(default=list, blank=True)  # [{id, name, arguments}]
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    name = models.CharField(max_length=200, blank=True, default="")
    tool_return = StorableJSONField(default=dict, blank=True)  # {status, stdout, stderr, duration_ms, sandbox}
    kind = models.CharField(max_length=32, blank=True, default="")  # heartbeat | summary | agent_message | ...
    sender_agent_id = models.CharField(max_length=64, blank=True, default="")
    # The client's offline id of an input message (Letta's `otid`), echoed back on every listing.
    otid = models.CharField(max_length=100, blank=True, default="")
    # An Anthropic reply's signed thinking blocks, sent back to the provider unchanged on later calls.
    thinking_blocks = StorableJSONField(default=list, blank=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    # The thread it was written in (None: the agent's own, Letta's "default"); Letta keeps it on the message too.
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    token_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "seq"]), models.Index(fields=["agent", "role", "created_at"])]
        constraints = [models.UniqueConstraint(fields=["agent", "seq"], name="unique_message_seq")]

    @property
    def body(self) -> str:
        """What the model said or was told (the content parts); `text` may add searchable words, e.g. the
        message of an assistant's send_message call, so conversation_search finds the agent's own replies."""
        return "".join(p.get("text", "") for p in self.content or () if isinstance(p, dict) and p.get("type") == "text")


class SleeptimeCompanion(models.Model):
    """A primary agent's sleep-time companion: a second agent sharing its blocks, run in the background every
    `frequency` turns on the transcript since its last run, to reorganize memory (Letta's `enable_sleeptime`)."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="sleeptime")
    companion = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="sleeptime_primary")
    enabled = models.BooleanField(default=True)
    frequency = models.PositiveIntegerField(default=5)  # primary turns between two background runs
    turns_since = models.PositiveIntegerField(default=0)  # primary turns since the last run was submitted
    last_seq = models.BigIntegerField(default=0)  # the primary's last message seq the companion was given
    last_run_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)


class ToolVersion(models.Model):
    """One state of a tool's code (source, schema, requirements): written whenever that state changes."""

    tool = models.ForeignKey("tools.Tool", on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    snapshot = StorableJSONField(default=dict, blank=True)  # {name, source_code, json_schema, pip_requirements, ...}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tool", "number"], name="unique_tool_version")]


class AgentVersion(models.Model):
    """An immutable snapshot of an agent's definition (core.agents.versions); a new one only when the definition changed."""

    AUTHORS = [("user", "person"), ("token", "API token"), ("agent", "agent step"), ("system", "system")]
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    definition = StorableJSONField(default=dict, blank=True)  # what the hash covers; tools name their ToolVersion
    blocks = StorableJSONField(
        default=list, blank=True
    )  # block values at the time, outside the hash: restored only if asked
    author_kind = models.CharField(max_length=16, choices=AUTHORS, default="system")
    author = models.CharField(max_length=200, blank=True, default="")  # username, token name, step id
    message = models.CharField(max_length=500, blank=True, default="")
    restored_from = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="unique_agent_version")]


class Dataset(models.Model):
    """Cases an agent is judged on (core.evals): its default graders and the gate an experiment must pass."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_dataset_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    # Grader specs (core.engine.graders) applied to every case: [{name, kind, extractor, ...}].
    graders = JSONField(default=list, blank=True)
    # Letta Evals' gate: {metric_key, metric: avg_score|accuracy, op: gt|gte|lt|lte|eq, value}; empty: no gate.
    gate = JSONField(default=dict, blank=True)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="datasets")
    # Set on the dataset holding an agent's own tests (core.agents.agent_tests): they go with the agent.
    tests_of = models.OneToOneField(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="tests_dataset"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"])]


class EvalCase(models.Model):
    """One case of a dataset: user turns, an optional ground truth and starting state, graders of its own."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_case_id, editable=False)
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="cases")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=200, blank=True, default="")
    turns = JSONField(default=list)  # user messages, in order
    ground_truth = JSONField(null=True, blank=True)  # a string, or one per turn (Letta Evals' per-turn grading)
    rubric_vars = JSONField(default=dict, blank=True)
    graders = JSONField(default=list, blank=True)  # in addition to the dataset's (an agent test's expectations)
    # Where the case starts: {"agent_id", "version"} (an agent at a version), {"step_id", "before"} (a fork of the
    # agent at one of its steps, as an agent test may start) or nothing (the experiment's target as it is).
    start = JSONField(default=dict, blank=True)
    agent_file = StorableJSONField(null=True, blank=True)  # or an agent file, imported fresh for every run
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["dataset", "position"])]


class Experiment(models.Model):
    """A dataset run against one target (an agent at a version, a model, prompt or block overrides)."""

    STATUSES = [(s, s) for s in ("queued", "running", "completed", "failed", "cancelled")]
    id = models.CharField(primary_key=True, max_length=64, default=ids.new_experiment_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="experiments")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200, blank=True, default="")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="experiments")
    agent_version = models.PositiveIntegerField(null=True, blank=True)  # None: the agent as it is when it starts
    # The agent's version when the experiment started: with agent_version None, what "as it is" was (the IDE's
    # history shows a run of the agent's tests against it).
    version_at_start = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True, default="")  # empty: the agent's own
    overrides = JSONField(default=dict, blank=True)  # {"system": str, "blocks": {label: value}}
    graders = JSONField(default=list, blank=True)  # the dataset's graders as they were at the start
    gate = JSONField(default=dict, blank=True)
    concurrency = models.PositiveSmallIntegerField(default=2)
    # Whether each case's throwaway agent stays to be opened in the debugger (a run of an agent's tests keeps them
    # only when asked).
    keep_copies = models.BooleanField(default=True)
    status = models.CharField(max_length=16, choices=STATUSES, default="queued")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    aggregates = JSONField(default=dict, blank=True)  # per grader, pass rate, gate, tokens, cost, latency
    gate_passed = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"]), models.Index(fields=["dataset", "created_at"])]


class CaseResult(models.Model):
    """One case of an experiment: its runs, what was extracted, each grader's score and reason, what it cost."""

    STATUSES = [(s, s) for s in ("pending", "running", "done", "error")]
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, null=True, blank=True, on_delete=models.SET_NULL, related_name="results")
    case_key = models.CharField(max_length=64, blank=True, default="")  # the case's id, kept once it is deleted
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=16, choices=STATUSES, default="pending")
    run_ids = JSONField(default=list, blank=True)  # the case's runs, one per turn, in order
    copy_agent_id = models.CharField(max_length=64, blank=True, default="")  # the throwaway agent the runs are on
    output = StorableTextField(blank=True, default="")  # what the first grader's extractor took
    replies = JSONField(default=list, blank=True)
    scores = JSONField(default=list, blank=True)  # [{grader, kind, score, passed, reason, error}]
    score = models.FloatField(null=True, blank=True)  # the gate's grader's score
    passed = models.BooleanField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    steps = models.PositiveIntegerField(null=True, blank=True)  # the model calls of its runs
    cost_usd = models.FloatField(null=True, blank=True)  # None: a model without a known price
    latency_ms = models.FloatField(null=True, blank=True)
    error = StorableTextField(blank=True, default="")
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "position"], name="unique_case_result")]


def new_identity_id() -> str:
    return ids.new_id("identity")


class Identity(models.Model):
    """An end user, organization or other party an application serves (Letta's Identity, letta/schemas/identity.py),
    known by the application's own `identifier_key` (unique per project), with typed properties and the agents that
    serve it: an app finds "the agent of this user" by the key."""

    TYPES = [(t, t) for t in ("org", "user", "other")]
    id = models.CharField(primary_key=True, max_length=64, default=new_identity_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="identities")
    identifier_key = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    identity_type = models.CharField(max_length=8, choices=TYPES)
    project_id = models.CharField(max_length=255, blank=True, default="")  # "": none (unique with the key either way)
    properties = JSONField(default=list, blank=True)  # [{key, value, type}]
    agents = models.ManyToManyField(Agent, related_name="identities", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "identifier_key", "project_id"], name="unique_identity_key")
        ]
        indexes = [models.Index(fields=["owner", "created_at"])]


def new_client_token_id() -> str:
    return ids.new_id("client_token")


class ClientSideToken(models.Model):
    """A scoped, expiring token a browser front end may hold (Letta's client-side access tokens): it may only do what
    its policy grants on the agents it names, from its hostname, until it expires. The raw token is kept encrypted so
    the owner can list it, and found by its SHA-256."""

    id = models.CharField(primary_key=True, max_length=64, default=new_client_token_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="client_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="client_tokens")
    hashed = models.CharField(max_length=64, unique=True)
    token = EncryptedTextField()
    hostname = models.CharField(max_length=2000)
    policy = JSONField(default=list)  # [{id: agent id, type: "agent", access: [...]}]
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"])]


def new_scheduled_message_id() -> str:
    return ids.new_id("scheduled_message")


class ScheduledMessage(models.Model):
    """Messages to send to an agent at a time (`one-time`) or on a cron expression in UTC (`recurring`), Letta's
    `agents.schedule`. `next_run_at` is when it is next due: the dispatcher (core.runs.schedules) sends it through the
    run queue, then deletes a one-time message or moves a recurring one on; None: it will not fire again."""

    ONE_TIME, RECURRING = "one-time", "recurring"
    id = models.CharField(primary_key=True, max_length=64, default=new_scheduled_message_id, editable=False)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="scheduled_messages")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="scheduled_messages")
    kind = models.CharField(max_length=16, choices=[(k, k) for k in (ONE_TIME, RECURRING)])
    scheduled_at = models.BigIntegerField(null=True, blank=True)  # one-time: Unix milliseconds, as given
    cron_expression = models.CharField(max_length=200, blank=True, default="")
    messages = JSONField(default=list)  # the API's input messages, as a send takes them
    callback_url = models.CharField(max_length=2000, blank=True, default="")
    include_return_message_types = JSONField(null=True, blank=True)
    max_steps = models.PositiveIntegerField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_id = models.CharField(max_length=64, blank=True, default="")  # the run its last send made
    last_error = StorableTextField(blank=True, default="")  # why its last send was refused ("" if it went)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["next_run_at"]), models.Index(fields=["agent", "created_at"])]


def new_queued_task_id() -> str:
    return ids.new_id("task")


class QueuedTask(models.Model):
    """A task of the run queue: enqueued through django-tasks' API (`Task.enqueue`, our backend in
    core/runs/task_backend.py), claimed by one process's pool with one conditional update and executed there
    (core/runs/queue.py). READY until claimed, RUNNING while a pool executes it, then SUCCESSFUL or FAILED."""

    READY, RUNNING, SUCCESSFUL, FAILED = "READY", "RUNNING", "SUCCESSFUL", "FAILED"
    id = models.CharField(primary_key=True, max_length=64, default=new_queued_task_id, editable=False)
    task_path = models.CharField(max_length=255)  # the Task's module path (django-tasks' `Task.module_path`)
    args = JSONField(default=list)
    kwargs = JSONField(default=dict)
    priority = models.SmallIntegerField(default=0)
    run_after = models.DateTimeField(null=True, blank=True)  # None: due at once
    status = models.CharField(
        max_length=10, default=READY, choices=[(s, s) for s in (READY, RUNNING, SUCCESSFUL, FAILED)]
    )
    enqueued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker_ids = JSONField(default=list)  # the processes that claimed it (liveness.IDENTITY)
    return_value = JSONField(null=True, blank=True)
    error = StorableTextField(blank=True, default="")  # the exception's class path and traceback

    class Meta:
        indexes = [
            # the claim's read: the ready tasks, highest priority first, then oldest
            models.Index(
                fields=["-priority", "enqueued_at"], name="queuedtask_ready_idx", condition=models.Q(status="READY")
            ),
            models.Index(fields=["status", "task_path"]),
        ]
