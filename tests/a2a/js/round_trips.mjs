// Round trips with agentsite through the official JavaScript A2A client (@a2a-js/sdk).
//
//   node round_trips.mjs BASE_URL TOKEN BINDING CANCEL_CONTEXT_ID
//
// BINDING is JSONRPC or HTTP+JSON; CANCEL_CONTEXT_ID is a session whose scripted
// model starts a long job. Each step prints one JSON line ({"step": …}); a step
// that throws prints {"step", "error"} and the next one runs. Before cancelling,
// the script prints {"step": "cancel", "waiting": true, "task_id"} and reads one
// line from standard input: the caller answers once the task's job runs.

import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";

import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";

const [baseUrl, token, binding, cancelContextId] = process.argv.slice(2);
if (!baseUrl || !token || !binding || !cancelContextId) {
  console.error("usage: round_trips.mjs BASE_URL TOKEN BINDING CANCEL_CONTEXT_ID");
  process.exit(2);
}

const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

function print(result) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function step(name, run) {
  try {
    print({ step: name, ...(await run()) });
  } catch (error) {
    print({ step: name, error: `${error?.name}: ${error?.message}` });
  }
}

// Every call but the card's carries the agentsite API token.
function authorized(input, init = {}) {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
}

const text = (value) => ({ content: { $case: "text", value } });
const data = (value) => ({ content: { $case: "data", value }, mediaType: "application/json" });

function message(parts, ids = {}) {
  return { messageId: randomUUID(), role: Role.ROLE_USER, parts, ...ids };
}

const stateName = (state) => TaskState[state] ?? String(state);
const textOf = (parts) =>
  (parts ?? [])
    .filter((p) => p.content?.$case === "text")
    .map((p) => p.content.value)
    .join("");
const dataOf = (parts) =>
  (parts ?? []).filter((p) => p.content?.$case === "data").map((p) => p.content.value);

function taskSummary(task) {
  return {
    task_id: task.id,
    context_id: task.contextId,
    state: stateName(task.status?.state),
    artifacts: task.artifacts.map((a) => ({ id: a.artifactId, name: a.name, text: textOf(a.parts) })),
    history: task.history.map((m) => ({
      role: Role[m.role],
      text: textOf(m.parts),
      data: dataOf(m.parts),
    })),
  };
}

// A task as a client following its stream rebuilds it: the answer's artifact from its
// chunks, each checked on the way (nothing lost, nothing repeated).
class Rebuilt {
  constructor() {
    this.task = null;
    this.texts = new Map();
    this.states = [];
    this.calls = [];
    this.appended = 0;
    this.reports = [];
    this.problems = [];
  }

  take(event) {
    const { $case: kind, value } = event.payload ?? {};
    if (kind === "task") {
      this.task = value;
      const answers = value.artifacts.filter((a) => a.name === "answer");
      this.texts = new Map(answers.map((a) => [a.artifactId, textOf(a.parts)]));
      this.reports = value.artifacts.filter((a) => a.name !== "answer").map((a) => a.artifactId);
      this.states.push(stateName(value.status?.state));
    } else if (kind === "statusUpdate") {
      this.states.push(stateName(value.status?.state));
      for (const doc of dataOf(value.status?.message?.parts)) {
        if (doc && typeof doc === "object" && "tool" in doc) this.calls.push(doc.tool);
      }
    } else if (kind === "artifactUpdate" && value.artifact.name !== "answer") {
      // A report a job wrote comes whole, once.
      const id = value.artifact.artifactId;
      if (!value.lastChunk || value.append || this.reports.includes(id)) {
        this.problems.push({ report: id, lastChunk: value.lastChunk, append: value.append });
      }
      this.reports.push(id);
    } else if (kind === "artifactUpdate") {
      const id = value.artifact.artifactId;
      const chunk = textOf(value.artifact.parts);
      if (value.lastChunk && !value.append) {
        // The closing chunk holds the whole answer: what the chunks built must match it.
        if ((this.texts.get(id) ?? "") !== chunk) {
          this.problems.push({ artifact: id, built: this.texts.get(id) ?? "", closing: chunk });
        }
      } else if (value.append) {
        if (!this.texts.has(id)) this.problems.push({ artifact: id, appendBeforeStart: true });
        this.texts.set(id, (this.texts.get(id) ?? "") + chunk);
        this.appended += 1;
      } else {
        if (this.texts.has(id)) this.problems.push({ artifact: id, startedTwice: true });
        this.texts.set(id, chunk);
      }
    } else {
      this.problems.push({ unexpected: kind ?? "nothing" });
    }
  }

  summary() {
    return {
      task_id: this.task?.id ?? null,
      states: this.states,
      calls: this.calls,
      artifacts: [...this.texts.values()],
      reports: this.reports,
      appended: this.appended,
      problems: this.problems,
    };
  }
}

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [
      new JsonRpcTransportFactory({ fetchImpl: authorized }),
      new RestTransportFactory({ fetchImpl: authorized }),
    ],
    preferredTransports: [binding],
  }),
);
const client = await factory.createFromUrl(baseUrl);
const polling = await new ClientFactory(
  ClientFactoryOptions.createFrom(factory.options, { clientConfig: { polling: true } }),
).createFromUrl(baseUrl);

await step("card", async () => {
  const card = await client.getAgentCard();
  return {
    name: card.name,
    interfaces: card.supportedInterfaces.map((i) => ({
      binding: i.protocolBinding,
      url: i.url,
      version: i.protocolVersion,
    })),
    skills: card.skills.map((s) => s.id),
    transport: client.transport.protocolName,
    protocol_version: client.protocolVersion,
  };
});

await step("send", async () => {
  const result = await client.sendMessage({ message: message([text("hello")]) });
  if (!("status" in result)) return { answered_with: "message" };
  const again = await client.getTask({ id: result.id });
  const listed = await client.listTasks({ contextId: result.contextId });
  return {
    ...taskSummary(result),
    read_back: taskSummary(again),
    listed: listed.tasks.map((t) => t.id),
    total_size: listed.totalSize,
  };
});

await step("resubscribe", async () => {
  const first = new Rebuilt();
  const dropped = new AbortController();
  const request = { message: message([text("write a report on the shop library")]) };
  for await (const event of client.sendMessageStream(request, { signal: dropped.signal })) {
    first.take(event);
    if (first.states.length >= 2) break; // the task, then its first update: drop
  }
  dropped.abort();
  const again = new Rebuilt();
  for await (const event of client.resubscribeTask({ id: first.task.id })) {
    again.take(event);
  }
  return { ...again.summary(), before_drop: first.summary() };
});

await step("cancel", async () => {
  const started = await polling.sendMessage({
    message: message([text("sleep for a while")], { contextId: cancelContextId }),
  });
  print({ step: "cancel", waiting: true, task_id: started.id });
  await lines.next(); // the caller saw the job run
  const cancelled = await client.cancelTask({ id: started.id });
  let again = null;
  try {
    await client.cancelTask({ id: started.id });
  } catch (error) {
    again = { name: error.name, message: error.message };
  }
  return {
    ...taskSummary(cancelled),
    started_state: stateName(started.status?.state),
    cancel_again: again,
  };
});

await step("approval", async () => {
  const waiting = await client.sendMessage({ message: message([text("run the tests")]) });
  const requests = dataOf(waiting.status?.message?.parts);
  const [request] = requests;
  const decision = {
    approval_request_id: request.approval_request_id,
    approve: true,
    reason: "the JavaScript client approves",
  };
  const rebuilt = new Rebuilt();
  const continuing = message([data(decision)], {
    taskId: waiting.id,
    contextId: waiting.contextId,
  });
  for await (const event of client.sendMessageStream({ message: continuing })) {
    rebuilt.take(event);
  }
  const done = await client.getTask({ id: waiting.id });
  return {
    ...taskSummary(done),
    waiting_state: stateName(waiting.status?.state),
    requests,
    decision,
    stream: rebuilt.summary(),
  };
});

stdin.close();
