"""Core memory blocks (shared between agents), their history, and archival passages."""

from django.db import models

from core import ids
from core.fields import StorableTextField
from memory.fields import EmbeddingField


class Block(models.Model):
    """A memory block; one row however many agents it is attached to."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_block_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="blocks")
    label = models.CharField(max_length=100)
    value = StorableTextField(blank=True, default="")
    limit = models.PositiveIntegerField(default=5000)
    description = models.TextField(blank=True, default="")
    read_only = models.BooleanField(default=False)
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    # Made on its own (POST /v1/blocks/), not with an agent: deleting an agent only detaches it, as in Letta.
    standalone = models.BooleanField(default=False)
    agents = models.ManyToManyField("core.Agent", through="AgentBlock", related_name="blocks", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.label


class AgentBlock(models.Model):
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE)
    block = models.ForeignKey(Block, on_delete=models.CASCADE)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "block"], name="unique_agent_block")]
        ordering = ["position", "id"]


class BlockHistory(models.Model):
    """One change to a block: what it was, what it became, and who did it."""

    ACTORS = [("user", "person"), ("agent", "agent"), ("system", "system")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_history_id, editable=False)
    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="history")
    version = models.PositiveIntegerField()
    old_value = StorableTextField(blank=True, default="")
    new_value = StorableTextField(blank=True, default="")
    changes = models.JSONField(default=dict, blank=True)  # other fields changed: {field: [old, new]}
    actor_type = models.CharField(max_length=16, choices=ACTORS)
    actor_user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL)
    agent_id = models.CharField(max_length=64, blank=True, default="")
    step_id = models.CharField(max_length=64, blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        indexes = [models.Index(fields=["block", "version"])]


class Passage(models.Model):
    """An archival memory: text the agent (or a person) stored, with an embedding when one is configured."""

    SOURCES = [("agent", "agent"), ("user", "person"), ("import", "import")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_passage_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="passages")
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE, related_name="passages")
    text = StorableTextField()
    tags = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, choices=SOURCES, default="agent")
    embedding = EmbeddingField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_dim = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "created_at"])]


class PassageTag(models.Model):
    """One tag of a passage, as rows, so any/all tag filters are indexed queries on both databases."""

    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="tag_rows")
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE)
    tag = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["passage", "tag"], name="unique_passage_tag")]
        indexes = [models.Index(fields=["agent", "tag"])]
