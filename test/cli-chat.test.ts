import { randomUUID } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SSE_HEADERS, sseEvent } from "../daemon/sse.ts";
import type { AgentEvent } from "../protocol/daemon.ts";
import type { Session, SessionList, SessionMessageAccepted } from "../protocol/session.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";

/**
 * How the fake session's agent answers a message: the run ends cleanly or fails, or the connection drops (the
 * socket breaks, or a proxy ends the stream).
 */
const ENDINGS = ["clean", "fails", "drops", "ends"] as const;
type Ending = (typeof ENDINGS)[number];

const PROJECT = randomUUID();
const CONVERSATION = "ses_conversation";

function session(id: Ending, created_at: string): Session {
  return {
    session_id: id,
    project_id: PROJECT,
    status: "running",
    branch: `svc/${id}`,
    base_ref: "main",
    agent_name: "build",
    agent_model: null,
    sandbox_url: null,
    error: null,
    created_by: randomUUID(),
    trigger: null,
    created_at,
    updated_at: created_at,
  };
}

/**
 * The few routes `svc sessions chat` uses, in the API's wire format: the session list, a message accepted with
 * its conversation (202), and the agent's events as server-sent events, whose run ends as the session id says.
 */
function fakeApi(): Server {
  const streams = new Map<string, ServerResponse>();
  const send = (res: ServerResponse, event: AgentEvent) => res.write(sseEvent(event));
  const json = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

  return createServer((req, res) => {
    const base = `/v1/projects/${PROJECT}/sessions`;
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    if (req.headers.authorization !== "Bearer svc_pat_test")
      return json(res, 401, { error: "unauthenticated", code: "UNAUTHENTICATED" });
    if (req.method === "GET" && path === base) {
      // The clean one is the newest running session: chat with no id picks it.
      const list: SessionList = {
        sessions: [session("fails", "2026-01-01T00:00:00Z"), session("clean", "2026-01-02T00:00:00Z")],
      };
      return json(res, 200, list);
    }
    const match = new RegExp(`^${base}/(\\w+)/(events|messages)$`).exec(path);
    const id = match?.[1] as Ending | undefined;
    if (!match || !id || !ENDINGS.includes(id))
      return json(res, 404, { error: "session not found", code: "SESSION_NOT_FOUND" });

    if (req.method === "GET" && match[2] === "events") {
      res.writeHead(200, SSE_HEADERS);
      streams.set(id, res);
      return send(res, { type: "ready" });
    }
    if (req.method === "POST" && match[2] === "messages") {
      req.resume();
      const accepted: SessionMessageAccepted = { conversation: CONVERSATION };
      json(res, 202, accepted);
      const events = streams.get(id)!;
      send(events, { type: "busy", session: CONVERSATION });
      send(events, { type: "text", session: CONVERSATION, delta: "Working on it." });
      if (id === "clean") send(events, { type: "idle", session: CONVERSATION });
      if (id === "fails") send(events, { type: "error", session: CONVERSATION, message: "the model gateway refused" });
      if (id === "drops") events.socket?.destroy();
      if (id === "ends") events.end();
      return;
    }
    json(res, 404, { error: "not found", code: "NOT_FOUND" });
  });
}

describe("svc sessions chat --prompt: the exit code says how the agent's run ended", () => {
  let server: Server;
  let env: CliEnv;

  beforeAll(async () => {
    server = fakeApi();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    env = {
      ...cliHome().env,
      SVC_API_URL: `http://127.0.0.1:${port}/v1`,
      SVC_CLI_TOKEN: "svc_pat_test",
      SVC_PROJECT_ID: PROJECT,
    };
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("exits 0 when the run ends cleanly", async () => {
    const clean = await svc(["sessions", "chat", "--prompt", "hi"], { env });
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stdout).toBe("Working on it.");
    expect(clean.stderr).not.toContain("error");
  });

  it("exits 1 with the agent's error when the run fails", async () => {
    const failed = await svc(["sessions", "chat", "fails", "--prompt", "hi"], { env });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stdout).toBe("Working on it.");
    expect(failed.stderr).toContain("error: the model gateway refused");
    expect(failed.stderr.match(/error:/g)).toHaveLength(1);
  });

  it("exits 1 and says so when the connection drops during the run", async () => {
    const dropped = await svc(["sessions", "chat", "drops", "--prompt", "hi"], { env });
    expect(dropped.code, dropped.stderr).toBe(1);
    expect(dropped.stderr).toContain("error: the event stream broke");
    const ended = await svc(["sessions", "chat", "ends", "--prompt", "hi"], { env });
    expect(ended.code, ended.stderr).toBe(1);
    expect(ended.stderr).toContain("error: the session's event stream ended; is session ends still running?");
  });
});

describe("svc and an API it cannot use", () => {
  it("an API error prints its message, code and status", async () => {
    const server = fakeApi();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    const env = { ...cliHome().env, SVC_API_URL: `http://127.0.0.1:${port}/v1`, SVC_PROJECT_ID: PROJECT };
    const refused = await svc(["sessions", "chat", "--prompt", "hi"], { env: { ...env, SVC_CLI_TOKEN: "svc_pat_x" } });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("error: unauthenticated (UNAUTHENTICATED, HTTP 401)");
    const unknown = await svc(["sessions", "chat", "gone", "--prompt", "hi"], {
      env: { ...env, SVC_CLI_TOKEN: "svc_pat_test" },
    });
    expect(unknown.stderr).toContain("error: session not found (SESSION_NOT_FOUND, HTTP 404)");
    server.close();
  });

  it("a stack that is down: the error names the URL and, on loopback, says to start it", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const env = {
      ...cliHome().env,
      SVC_API_URL: `http://127.0.0.1:${port}/v1`,
      SVC_CLI_TOKEN: "svc_pat_test",
      SVC_PROJECT_ID: PROJECT,
    };
    const down = await svc(["sessions", "ls"], { env });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(
      `error: cannot reach http://127.0.0.1:${port}/v1 (ECONNREFUSED); is the stack running? svc self-host start`,
    );
  });
});
