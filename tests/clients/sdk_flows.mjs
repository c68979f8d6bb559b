// The TypeScript SDK (@letta-ai/letta-client, pinned in package-lock.json) walking the flows Letta Code relies on,
// against the server at LETTA_BASE_URL with LETTA_API_KEY. Every step runs even when an earlier one failed (unless
// it needs that one's result), and the script prints one JSON object: {step: {ok, value} | {ok: false, status,
// error} | {skipped}}. tests/clients/test_ts_sdk.py asserts on it; the server's request log says the rest.
import Letta from "@letta-ai/letta-client";

const client = new Letta({ maxRetries: 0, timeout: 60_000 });
const results = {};

async function step(name, fn, ...needs) {
  const missing = needs.filter((n) => !results[n]?.ok);
  if (missing.length) {
    results[name] = { skipped: `needs ${missing.join(", ")}` };
    return undefined;
  }
  try {
    const value = await fn();
    results[name] = { ok: true, value };
    return value;
  } catch (err) {
    results[name] = { ok: false, status: err?.status ?? null, error: String(err?.message ?? err) };
    return undefined;
  }
}

async function drain(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return {
    message_types: chunks.map((c) => c.message_type),
    assistant: chunks.filter((c) => c.message_type === "assistant_message").map((c) => c.content).join(""),
    stop_reason: chunks.find((c) => c.message_type === "stop_reason")?.stop_reason ?? null,
    errors: chunks.filter((c) => c.message_type === "error_message"),
  };
}

const brief = (m) => ({ message_type: m.message_type, content: m.content ?? m.reasoning ?? null });

const agent = await step("agents.create", async () => {
  const a = await client.agents.create({
    name: "ts-sdk-agent",
    agent_type: "letta_v1_agent",
    model: "openai/fake-model",
    context_window_limit: 16000,
    tags: ["ts-sdk", "clients"],
    memory_blocks: [
      { label: "human", value: "Name: Alice" },
      { label: "persona", value: "Helpful." },
    ],
  });
  return { id: a.id, agent_type: a.agent_type, tags: a.tags };
});

const conversation = await step(
  "conversations.create",
  async () => {
    const c = await client.conversations.create({ agent_id: agent.id, summary: "first thread" });
    return { id: c.id, agent_id: c.agent_id, summary: c.summary };
  },
  "agents.create",
);

await step(
  "conversations.list",
  async () => (await client.conversations.list({ agent_id: agent.id })).map((c) => c.id),
  "conversations.create",
);

await step(
  "conversations.retrieve",
  async () => {
    const c = await client.conversations.retrieve(conversation.id);
    return { id: c.id, agent_id: c.agent_id, in_context_message_ids: c.in_context_message_ids };
  },
  "conversations.create",
);

await step(
  "conversations.messages.create",
  async () =>
    drain(
      await client.conversations.messages.create(conversation.id, {
        messages: [{ role: "user", content: "hello through a conversation" }],
        stream_tokens: true,
      }),
    ),
  "conversations.create",
);

await step(
  "conversations.messages.list",
  async () => {
    const page = await client.conversations.messages.list(conversation.id, { order: "asc" });
    return page.getPaginatedItems().map(brief);
  },
  "conversations.messages.create",
);

await step(
  "agents.messages.create",
  async () => {
    const r = await client.agents.messages.create(agent.id, {
      messages: [{ role: "user", content: "hello directly" }],
    });
    return { messages: r.messages.map(brief), stop_reason: r.stop_reason?.stop_reason ?? null };
  },
  "agents.create",
);

await step(
  "agents.messages.list(default)",
  async () => {
    const page = await client.agents.messages.list(agent.id, { conversation_id: "default", order: "asc" });
    return page.getPaginatedItems().map(brief);
  },
  "agents.messages.create",
);

await step(
  "messages.search",
  async () =>
    (await client.messages.search({ query: "conversation", agent_id: agent.id, search_mode: "hybrid" })).map((r) => ({
      ...brief(r),
      agent_id: r.agent_id,
      conversation_id: r.conversation_id ?? null,
    })),
  "conversations.messages.create",
);

await step("tags.list", async () => client.tags.list(), "agents.create");

await step(
  "steps.list",
  async () => {
    const page = await client.steps.list({ agent_id: agent.id });
    return page.getPaginatedItems().map((s) => ({ id: s.id, agent_id: s.agent_id, run_id: s.run_id, status: s.status }));
  },
  "agents.messages.create",
);

await step(
  "agents.messages.compact",
  async () => client.agents.messages.compact(agent.id, { compaction_settings: { mode: "all" } }),
  "agents.messages.create",
);

await step(
  "conversations.messages.compact",
  async () => client.conversations.messages.compact(conversation.id, { compaction_settings: { mode: "all" } }),
  "conversations.messages.create",
);

console.log(JSON.stringify(results));
