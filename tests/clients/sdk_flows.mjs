// The TypeScript SDK (@letta-ai/letta-client, pinned in package-lock.json) walking the flows Letta Code relies on,
// against the server at LETTA_BASE_URL with LETTA_API_KEY. Every step runs even when an earlier one failed (unless
// it needs that one's result), and the script prints one JSON object: {step: {ok, value} | {ok: false, status,
// error} | {skipped}}. tests/clients/test_ts_sdk.py asserts on it; the server's request log says the rest.
// `node sdk_flows.mjs` walks agents, conversations, messages, search, tags, steps and compaction;
// `node sdk_flows.mjs approvals` walks tool approvals and client-side tools (approve, deny, a client's result).
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

async function basicFlows() {
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
}

// Tool approvals and client-side tools (Letta's human-in-the-loop): a letta_v1_agent whose archival_memory_insert
// needs approval (a requires_approval tool rule at creation) asks, is approved, asks again while streaming and is
// denied; a normal send while it waits is Letta's 409; a client-side tool's call is answered with the client's
// result, in a conversation too; the per-agent toggle (agents.tools.updateApproval) makes another tool ask.
const firstAsk = (messages) => {
  const ask = messages.find((m) => m.message_type === "approval_request_message");
  return ask ? (Array.isArray(ask.tool_calls) ? ask.tool_calls[0] : ask.tool_call) : undefined;
};

const approvalBrief = (m) => ({
  message_type: m.message_type,
  content: m.content ?? null,
  tool_call: m.tool_call ?? null,
  tool_calls: m.tool_calls ?? null,
  tool_call_id: m.tool_call_id ?? null,
  status: m.status ?? null,
  tool_return: m.tool_return ?? null,
  stdout: m.stdout ?? null,
  approvals: m.approvals ?? null,
});

// A streamed answer's chunks, with the waiting call's id gathered from its approval_request_message chunks.
async function drainApprovals(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const asks = chunks.filter((c) => c.message_type === "approval_request_message");
  return {
    message_types: chunks.map((c) => c.message_type),
    ask_ids: [...new Set(asks.map((c) => c.tool_call?.tool_call_id).filter(Boolean))],
    ask_names: [...new Set(asks.map((c) => c.tool_call?.name).filter(Boolean))],
    ask_arguments: asks.map((c) => c.tool_call?.arguments ?? "").join(""),
    ask_shapes: asks.map((c) => (Array.isArray(c.tool_calls) ? "list" : c.tool_calls ? "delta" : "none")),
    assistant: chunks.filter((c) => c.message_type === "assistant_message").map((c) => c.content).join(""),
    stop_reason: chunks.find((c) => c.message_type === "stop_reason")?.stop_reason ?? null,
    errors: chunks.filter((c) => c.message_type === "error_message"),
  };
}

const CLIENT_TOOL = {
  name: "read_sticky_note",
  description: "Read the sticky note on the user's desk.",
  parameters: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
};

async function approvalFlows() {
  const agent = await step("approval.agents.create", async () => {
    const a = await client.agents.create({
      name: "ts-sdk-approvals",
      agent_type: "letta_v1_agent",
      model: "openai/fake-model",
      context_window_limit: 16000,
      tool_rules: [{ type: "requires_approval", tool_name: "archival_memory_insert" }],
    });
    return { id: a.id, tool_rules: a.tool_rules };
  });

  const asked = await step(
    "approval.ask",
    async () => {
      const r = await client.agents.messages.create(agent.id, {
        messages: [{ role: "user", content: "remember the launch code" }],
      });
      return {
        messages: r.messages.map(approvalBrief),
        stop_reason: r.stop_reason?.stop_reason ?? null,
        call: firstAsk(r.messages) ?? null,
      };
    },
    "approval.agents.create",
  );

  await step(
    "approval.send_while_waiting",
    async () => {
      try {
        await client.agents.messages.create(agent.id, { messages: [{ role: "user", content: "hello?" }] });
      } catch (err) {
        return { status: err?.status ?? null, error: String(err?.message ?? err), body: err?.error ?? null };
      }
      return { status: 200 };
    },
    "approval.ask",
  );

  await step(
    "approval.approve",
    async () => {
      const r = await client.agents.messages.create(agent.id, {
        messages: [
          { type: "approval", approvals: [{ type: "approval", tool_call_id: asked.call.tool_call_id, approve: true }] },
        ],
      });
      return { messages: r.messages.map(approvalBrief), stop_reason: r.stop_reason?.stop_reason ?? null };
    },
    "approval.ask",
  );

  const streamedAsk = await step(
    "approval.ask(stream)",
    async () =>
      drainApprovals(
        await client.agents.messages.stream(agent.id, {
          messages: [{ role: "user", content: "remember my password too" }],
          stream_tokens: true,
        }),
      ),
    "approval.approve",
  );

  await step(
    "approval.deny(stream)",
    async () =>
      drainApprovals(
        await client.agents.messages.stream(agent.id, {
          messages: [
            {
              type: "approval",
              approvals: [
                { type: "approval", tool_call_id: streamedAsk.ask_ids[0], approve: false, reason: "never store passwords" },
              ],
            },
          ],
          stream_tokens: true,
        }),
      ),
    "approval.ask(stream)",
  );

  await step(
    "approval.history",
    async () => {
      const page = await client.agents.messages.list(agent.id, { order: "asc", limit: 100 });
      return page.getPaginatedItems().map(approvalBrief);
    },
    "approval.deny(stream)",
  );

  await step(
    "approval.passages",
    async () => (await client.agents.passages.list(agent.id)).map((p) => p.text),
    "approval.deny(stream)",
  );

  const clientAsk = await step(
    "client_tool.ask",
    async () => {
      const r = await client.agents.messages.create(agent.id, {
        messages: [{ role: "user", content: "what does the yellow note say?" }],
        client_tools: [CLIENT_TOOL],
      });
      return {
        messages: r.messages.map(approvalBrief),
        stop_reason: r.stop_reason?.stop_reason ?? null,
        call: firstAsk(r.messages) ?? null,
      };
    },
    "approval.deny(stream)",
  );

  await step(
    "client_tool.return",
    async () => {
      const r = await client.agents.messages.create(agent.id, {
        messages: [
          {
            type: "approval",
            approvals: [
              {
                type: "tool",
                tool_call_id: clientAsk.call.tool_call_id,
                status: "success",
                tool_return: "Buy oat milk.",
                stdout: ["note read"],
                stderr: [],
              },
            ],
          },
        ],
        client_tools: [CLIENT_TOOL],
      });
      return { messages: r.messages.map(approvalBrief), stop_reason: r.stop_reason?.stop_reason ?? null };
    },
    "client_tool.ask",
  );

  const conversation = await step(
    "client_tool.conversation.ask",
    async () => {
      const c = await client.conversations.create({ agent_id: agent.id });
      const drained = await drainApprovals(
        await client.conversations.messages.create(c.id, {
          messages: [{ role: "user", content: "and the blue note?" }],
          client_tools: [CLIENT_TOOL],
          stream_tokens: true,
        }),
      );
      return { id: c.id, ...drained };
    },
    "client_tool.return",
  );

  await step(
    "client_tool.conversation.return",
    async () =>
      drainApprovals(
        await client.conversations.messages.create(conversation.id, {
          messages: [
            {
              type: "approval",
              approvals: [
                { type: "tool", tool_call_id: conversation.ask_ids[0], status: "error", tool_return: "No blue note." },
              ],
            },
          ],
          client_tools: [CLIENT_TOOL],
          stream_tokens: true,
        }),
      ),
    "client_tool.conversation.ask",
  );

  // The SDK's own call: 1.12.1 sends its parameter's name as the body ({"body_requires_approval": true}, not
  // Letta's {"requires_approval": true}); the server takes either.
  await step(
    "agents.tools.updateApproval",
    async () => {
      const updated = await client.agents.tools.updateApproval("conversation_search", {
        agent_id: agent.id,
        body_requires_approval: true,
      });
      const a = await client.agents.retrieve(agent.id);
      return { returned: updated === null ? null : typeof updated, tool_rules: a.tool_rules };
    },
    "client_tool.conversation.return",
  );

  // The same toggle with Letta's body, through the SDK's transport; then the tool asks before it runs.
  await step(
    "agents.tools.approval(patch)",
    async () => {
      const out = await client.patch(`/v1/agents/${agent.id}/tools/approval/conversation_search`, {
        body: { requires_approval: true },
      });
      const a = await client.agents.retrieve(agent.id);
      const r = await client.agents.messages.create(agent.id, {
        messages: [{ role: "user", content: "what did we say about tea?" }],
      });
      return {
        returned: out === null ? null : typeof out,
        tool_rules: a.tool_rules,
        stop_reason: r.stop_reason?.stop_reason ?? null,
        call: firstAsk(r.messages) ?? null,
      };
    },
    "client_tool.conversation.return",
  );
}

const flows = { basic: basicFlows, approvals: approvalFlows };
await flows[process.argv[2] ?? "basic"]();
console.log(JSON.stringify(results));
