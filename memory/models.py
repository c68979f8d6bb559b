"""Core memory blocks (shared between agents), their history, archival passages, and folders of files whose chunks
are passages too."""

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
    """An archival memory: text the agent (or a person) stored, with an embedding when one is configured; or a
    chunk of a folder's file (`file` set, no agent: every agent the folder is attached to searches it)."""

    SOURCES = [("agent", "agent"), ("user", "person"), ("import", "import"), ("file", "file")]

    id = models.CharField(primary_key=True, max_length=64, default=ids.new_passage_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="passages")
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE, related_name="passages", null=True, blank=True)
    folder = models.ForeignKey(
        "memory.Folder", on_delete=models.CASCADE, related_name="passages", null=True, blank=True
    )
    file = models.ForeignKey(
        "memory.FolderFile", on_delete=models.CASCADE, related_name="passages", null=True, blank=True
    )
    # A shared archive's passage (no agent: every agent the archive is attached to searches it; memory/archives.py).
    archive = models.ForeignKey(
        "memory.Archive", on_delete=models.CASCADE, related_name="passages", null=True, blank=True
    )
    text = StorableTextField()
    tags = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, choices=SOURCES, default="agent")
    embedding = EmbeddingField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_dim = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "created_at"]), models.Index(fields=["folder", "embedding_model"])]


def new_archive_id() -> str:
    return ids.new_id("archive")


class Archive(models.Model):
    """A shared archival memory (Letta's Archive, letta/schemas/archive.py): passages attached agents all search and
    write, embedded with its `embedding` model (else the writing agent's)."""

    id = models.CharField(primary_key=True, max_length=64, default=new_archive_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="archives")
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    embedding = models.CharField(max_length=200, blank=True, default="")  # handle; "": the writing agent's
    metadata = models.JSONField(default=dict, blank=True)
    agents = models.ManyToManyField("core.Agent", through="memory.ArchiveAgent", related_name="archives")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"])]


class ArchiveAgent(models.Model):
    """An agent attached to an archive; an agent's writes go to the archive it was attached to first."""

    archive = models.ForeignKey(Archive, on_delete=models.CASCADE, related_name="attachments")
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE, related_name="archive_attachments")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["archive", "agent"], name="unique_archive_agent")]


class PassageTag(models.Model):
    """One tag of a passage, as rows, so any/all tag filters are indexed queries on both databases."""

    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="tag_rows")
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE)
    tag = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["passage", "tag"], name="unique_passage_tag")]
        indexes = [models.Index(fields=["agent", "tag"])]


def new_source_id() -> str:
    """A folder id: Letta names folders `source-…` (they were "sources")."""
    return ids.new_id("source")


def new_file_id() -> str:
    return ids.new_id("file")


def new_file_agent_id() -> str:
    return ids.new_id("file_agent")


class Folder(models.Model):
    """A named set of files (Letta's folder, once "source") that agents are attached to; its files are parsed,
    chunked and embedded with its embedding model (full-text search only when it has none)."""

    id = models.CharField(primary_key=True, max_length=64, default=new_source_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="folders")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    instructions = models.TextField(blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    embedding = models.CharField(max_length=200, blank=True, default="")
    embedding_chunk_size = models.PositiveIntegerField(default=300)
    agents = models.ManyToManyField("core.Agent", through="AgentFolder", related_name="folders", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_folder_name")]

    def __str__(self) -> str:
        return self.name


class AgentFolder(models.Model):
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE)
    folder = models.ForeignKey(Folder, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "folder"], name="unique_agent_folder")]


class FileStatus(models.TextChoices):
    PENDING = "pending"
    PARSING = "parsing"
    EMBEDDING = "embedding"
    COMPLETED = "completed"
    ERROR = "error"


FILE_TERMINAL = (FileStatus.COMPLETED, FileStatus.ERROR)


class FolderFile(models.Model):
    """An uploaded file: its bytes until ingest finishes, its parsed text, and how far processing got."""

    id = models.CharField(primary_key=True, max_length=64, default=new_file_id, editable=False)
    owner = models.ForeignKey("core.Organization", on_delete=models.CASCADE, related_name="folder_files")
    folder = models.ForeignKey(Folder, on_delete=models.CASCADE, related_name="files")
    file_name = models.CharField(max_length=255)  # unique in the folder ("report_(1).pdf" for a second upload)
    original_file_name = models.CharField(max_length=255)
    mime_type = models.CharField(max_length=200, blank=True, default="")
    file_size = models.PositiveBigIntegerField(default=0)
    raw = models.BinaryField(null=True, blank=True)  # the upload, kept until ingest ends so a restart can redo it
    content = StorableTextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=FileStatus.choices, default=FileStatus.PENDING)
    error_message = models.TextField(blank=True, default="")
    total_chunks = models.PositiveIntegerField(null=True, blank=True)
    chunks_embedded = models.PositiveIntegerField(null=True, blank=True)
    line_count = models.PositiveIntegerField(default=0)
    page_count = models.PositiveIntegerField(default=0)
    ingest_attempts = models.PositiveSmallIntegerField(default=0)  # ingests started; a restart retries a few times
    embedding_model = models.CharField(max_length=200, blank=True, default="")  # its chunks' vectors ("": none)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)  # also an ingest's heartbeat (memory.files.recovery)

    class Meta:
        verbose_name = "file"
        constraints = [models.UniqueConstraint(fields=["folder", "file_name"], name="unique_folder_file_name")]

    def __str__(self) -> str:
        return self.file_name


class FileAgent(models.Model):
    """One agent's view of one attached file: open or closed, the window of lines it sees, and when it last
    used it (the least recently used open file is closed first)."""

    id = models.CharField(primary_key=True, max_length=64, default=new_file_agent_id, editable=False)
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE, related_name="file_states")
    file = models.ForeignKey(FolderFile, on_delete=models.CASCADE, related_name="agent_states")
    folder = models.ForeignKey(Folder, on_delete=models.CASCADE, related_name="agent_file_states")
    is_open = models.BooleanField(default=False)
    start_line = models.PositiveIntegerField(null=True, blank=True)  # 1-based, inclusive; None: from the start
    end_line = models.PositiveIntegerField(null=True, blank=True)  # None: to the end
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "file"], name="unique_file_agent")]
        indexes = [models.Index(fields=["agent", "is_open", "last_accessed_at"])]
