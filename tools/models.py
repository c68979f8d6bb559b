"""Tools (Python functions with derived JSON schemas) and the record of every run."""

from django.db import models

from core import ids
from core.crypto import EncryptedJSONField, EncryptedTextField
from core.fields import StorableJSONField, StorableTextField


class Tool(models.Model):
    TYPES = [("base", "base"), ("multi_agent", "multi-agent"), ("custom", "custom"), ("external_mcp", "MCP")]
    SANDBOXES = [("", "deployment default"), ("local", "local"), ("e2b", "E2B")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_tool_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    tool_type = models.CharField(max_length=16, choices=TYPES, default="custom")
    description = models.TextField(blank=True, default="")
    source_code = models.TextField(blank=True, default="")
    json_schema = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    return_char_limit = models.PositiveIntegerField(default=50000)
    pip_requirements = models.JSONField(default=list, blank=True)  # [{name, version?}]
    sandbox = models.CharField(max_length=16, choices=SANDBOXES, blank=True, default="")
    allow_network = models.BooleanField(null=True, blank=True, default=None)  # None: the deployment default
    # Letta's default_requires_approval: an agent made with the tool, or that attaches it, gets a requires_approval
    # rule for it. Read only then: changing it later leaves the agents that have the tool as they are.
    default_requires_approval = models.BooleanField(null=True, blank=True, default=None)
    env_vars = EncryptedJSONField(default=dict, blank=True)  # workbench defaults for test runs: may hold keys
    agents = models.ManyToManyField("core.Agent", related_name="tools", blank=True)
    # external_mcp tools: the server that runs them, under the name the server gives the tool.
    mcp_server = models.ForeignKey(
        "tools.McpServer", null=True, blank=True, on_delete=models.CASCADE, related_name="tools"
    )
    mcp_tool_name = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_tool_name")]

    def __str__(self) -> str:
        return self.name


class ToolRun(models.Model):
    """One execution of a tool, from the workbench or from an agent's step."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_toolrun_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="tool_runs")
    tool = models.ForeignKey(Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    tool_name = models.CharField(max_length=64)
    agent_id = models.CharField(max_length=64, blank=True, default="")
    step_id = models.CharField(max_length=64, blank=True, default="")
    origin = models.CharField(max_length=16, default="workbench")  # workbench | agent
    args = StorableJSONField(default=dict, blank=True)
    status = models.CharField(max_length=16)  # success | error
    tool_return = StorableTextField(blank=True, default="")
    stdout = StorableTextField(blank=True, default="")
    stderr = StorableTextField(blank=True, default="")
    sandbox = models.CharField(max_length=16, blank=True, default="")
    network = models.BooleanField(default=False)  # whether the run could use the network
    mcp_server = models.CharField(max_length=64, blank=True, default="")  # the MCP server that ran it, by name
    duration_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "tool_name", "created_at"])]


class McpServer(models.Model):
    """An MCP server whose tools join the owner's library: a sandboxed stdio process, or a URL (SSE, HTTP)."""

    TYPES = [("stdio", "stdio"), ("sse", "SSE"), ("streamable_http", "streamable HTTP")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_mcp_server_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="mcp_servers")
    server_name = models.CharField(max_length=64)
    server_type = models.CharField(max_length=16, choices=TYPES)
    command = models.CharField(max_length=500, blank=True, default="")
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONField(default=dict, blank=True)  # write-only: the API shows names, never values
    server_url = models.CharField(max_length=2000, blank=True, default="")
    auth_header = models.CharField(max_length=128, blank=True, default="")
    auth_token = EncryptedTextField(blank=True, default="")  # write-only
    custom_headers = EncryptedJSONField(default=dict, blank=True)  # write-only values
    allow_network = models.BooleanField(null=True, blank=True, default=None)  # stdio only; None: the default
    last_error = models.TextField(blank=True, default="")
    refreshed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "server_name"], name="unique_mcp_server_name")]

    def __str__(self) -> str:
        return self.server_name
