import { mkdtempSync, rmSync } from "node:fs";
import { createServer, get, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorBody } from "../protocol/errors.ts";
import { signUserContext } from "../protocol/user-context.ts";
import { createActivity } from "./activity.ts";
import { daemonError } from "./errors.ts";
import { createLogWriter } from "./log-writer.ts";
import { createSandboxLogReader } from "./sandbox-log.ts";
import { createDaemonServer, type ServerDeps } from "./server.ts";

const KEY = "svc_sk_server-unit-test-key-0123456789";
const SESSION = "ses-unit";
const OWN_PORT = 8000;

const listen = async (server: Server) => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
};

/** A port nothing listens on: bound once, then released. */
const closedPort = async () => {
  const server = createServer();
  const port = await listen(server);
  await new Promise((r) => server.close(r));
  return port;
};

const context = () =>
  signUserContext(KEY, {
    user_id: "u1",
    project_id: "p1",
    session_id: SESSION,
    exp: Math.floor(Date.now() / 1000) + 300,
  });

/** The error answer to a request: its status and its body, checked against ErrorBody. */
async function errorOf(res: Response): Promise<{ status: number; code: string; error: string; field?: string }> {
  const body = ErrorBody.parse(await res.json());
  expect(res.headers.get("content-type")).toBe("application/json");
  return { status: res.status, ...body };
}

describe("the daemon's HTTP surface answers every error as an ErrorBody (in process)", () => {
  let base: string;
  let deps: ServerDeps;
  let daemon: Server;
  let runtime: Server;
  let ready = false;
  let woken = 0;
  let deadPort: number;
  const auth = { authorization: `Bearer ${KEY}` };
  const logged: string[] = [];
  const logDir = mkdtempSync(join(tmpdir(), "svc-daemon-log-"));

  beforeAll(async () => {
    deadPort = await closedPort();
    // An agent runtime whose event stream is broken.
    runtime = createServer((_req, res) => res.writeHead(500).end());
    const agentPort = await listen(runtime);
    deps = {
      serviceKey: KEY,
      workspace: "/nonexistent",
      sessionId: SESSION,
      servicePort: OWN_PORT,
      agentPort,
      activity: createActivity(),
      log: (msg) => logged.push(msg),
      control: {
        runtimeReady: () => ready,
        wake: async () => {
          woken += 1;
        },
        health: async () => ({}) as never,
        refresh: async () => {
          throw daemonError("CONFLICT", "could not fast-forward the workspace: diverged");
        },
        prompt: async () => {
          throw new Error("agent runtime answered 400 to POST /session");
        },
        abort: async () => ({ aborted: [] }),
        transcript: async () => ({ entries: [] }),
        checkpoint: async () => ({ sha: null }),
        seed: async () => {
          throw daemonError("CONFLICT", "this sandbox is not pooled, not waiting for a seed");
        },
        claim: async () => {
          throw daemonError("CONFLICT", "this sandbox is not pooled, not ready to claim");
        },
        env: async () => ({ names: [] }),
      },
      sandboxLog: createSandboxLogReader(logDir),
    };
    daemon = createDaemonServer(deps);
    base = `http://127.0.0.1:${await listen(daemon)}`;
  });
  afterAll(() => {
    daemon?.closeAllConnections();
    daemon?.close();
    runtime?.close();
    rmSync(logDir, { recursive: true, force: true });
  });

  it("control routes: unknown, wrong method, no key, bad body, too large", async () => {
    expect(await errorOf(await fetch(`${base}/svc/nope`, { method: "POST", headers: auth }))).toMatchObject({
      status: 404,
      code: "NOT_FOUND",
      error: "no control route /svc/nope",
    });
    expect(await errorOf(await fetch(`${base}/svc/env`, { headers: auth }))).toMatchObject({
      status: 405,
      code: "METHOD_NOT_ALLOWED",
    });
    const withoutKey: Record<string, string>[] = [
      {},
      { authorization: "Bearer svc_sk_wrong" },
      { "x-svc-user-context": context() },
    ];
    for (const headers of withoutKey) {
      expect(await errorOf(await fetch(`${base}/svc/env`, { method: "POST", headers }))).toMatchObject({
        status: 401,
        code: "UNAUTHENTICATED",
        error: "control routes need the sandbox service key",
      });
    }
    expect(await errorOf(await fetch(`${base}/svc/env`, { method: "POST", headers: auth, body: "{" }))).toEqual({
      status: 400,
      code: "BAD_REQUEST",
      error: "request body is not valid JSON",
    });
    expect(
      await errorOf(await fetch(`${base}/svc/prompt`, { method: "POST", headers: auth, body: '{"text":""}' })),
    ).toMatchObject({ status: 400, code: "VALIDATION_FAILED", field: "text" });
    expect(
      await errorOf(await fetch(`${base}/svc/abort`, { method: "POST", headers: auth, body: "[]" })),
    ).toMatchObject({ status: 400, code: "VALIDATION_FAILED", error: expect.stringMatching(/^body: /) });
    const big = JSON.stringify({ set: { A: "x".repeat(1 << 20) } });
    expect(await errorOf(await fetch(`${base}/svc/env`, { method: "POST", headers: auth, body: big }))).toMatchObject({
      status: 413,
      code: "PAYLOAD_TOO_LARGE",
    });
  });

  it("control handlers: the daemon's own errors keep their status, anything else is a 500 with its message", async () => {
    expect(await errorOf(await fetch(`${base}/svc/refresh`, { method: "POST", headers: auth }))).toEqual({
      status: 409,
      code: "CONFLICT",
      error: "could not fast-forward the workspace: diverged",
    });
    expect(
      await errorOf(await fetch(`${base}/svc/prompt`, { method: "POST", headers: auth, body: '{"text":"hi"}' })),
    ).toEqual({ status: 500, code: "INTERNAL", error: "agent runtime answered 400 to POST /session" });
  });

  it("an egress refusal the API reports goes into the sandbox's log; a malformed one is refused", async () => {
    const refusal = { host: "refused.localhost", port: 8443, reason: "not in [sandbox] egress of svc.toml" };
    const res = await fetch(`${base}/svc/egress-refused`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify(refusal),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ reported: true });
    expect(logged).toContain("egress refused: refused.localhost:8443 (not in [sandbox] egress of svc.toml)");
    const bad = JSON.stringify({ ...refusal, host: "evil\nline" });
    expect(
      await errorOf(await fetch(`${base}/svc/egress-refused`, { method: "POST", headers: auth, body: bad })),
    ).toMatchObject({ status: 400, code: "VALIDATION_FAILED", field: "host" });
    expect(
      await errorOf(await fetch(`${base}/svc/egress-refused`, { method: "POST", body: JSON.stringify(refusal) })),
    ).toMatchObject({ status: 401, code: "UNAUTHENTICATED" });
  });

  it("the sandbox's log: 404 until a keeper writes one, the service key only, its tail, then what follows", async () => {
    expect(await errorOf(await fetch(`${base}/svc/logs`, { headers: auth }))).toEqual({
      status: 404,
      code: "NOT_FOUND",
      error: "this sandbox keeps no log of its own",
    });
    const writer = createLogWriter(logDir);
    writer.write("stderr", Buffer.from("one\ntwo\nthree\n"));
    expect(await errorOf(await fetch(`${base}/svc/logs`))).toMatchObject({ status: 401, code: "UNAUTHENTICATED" });
    expect(await errorOf(await fetch(`${base}/svc/logs?tail=-1`, { headers: auth }))).toMatchObject({
      status: 400,
      code: "VALIDATION_FAILED",
      field: "tail",
    });
    const tail = await fetch(`${base}/svc/logs?tail=2`, { headers: auth });
    expect(tail.headers.get("content-type")).toBe("application/x-ndjson");
    expect(
      (await tail.text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).line),
    ).toEqual(["two", "three"]);

    const leave = new AbortController();
    const followed = await fetch(`${base}/svc/logs?tail=1&follow=1`, { headers: auth, signal: leave.signal });
    const reader = followed.body!.pipeThrough(new TextDecoderStream()).getReader();
    let got = "";
    while (!got.includes("three")) got += (await reader.read()).value;
    writer.write("stdout", Buffer.from("four\n"));
    while (!got.includes("four")) got += (await reader.read()).value;
    expect(
      got
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { stream: "stderr", line: "three" },
      { stream: "stdout", line: "four" },
    ]);
    leave.abort();
  });

  it("the event stream: 503 while the runtime boots, 502 when its stream fails", async () => {
    ready = false;
    woken = 0;
    // The transcript recorder's stream is no use of the agent: a runtime left to its first use stays down.
    expect(await errorOf(await fetch(`${base}/svc/events?entries=1`, { headers: auth }))).toMatchObject({
      status: 503,
    });
    expect(woken).toBe(0);
    expect(await errorOf(await fetch(`${base}/svc/events`, { headers: auth }))).toEqual({
      status: 503,
      code: "AGENT_RUNTIME_UNAVAILABLE",
      error: "the agent runtime is starting",
    });
    expect(woken).toBe(1);
    ready = true;
    expect(await errorOf(await fetch(`${base}/svc/events`, { headers: auth }))).toEqual({
      status: 502,
      code: "UPSTREAM_UNAVAILABLE",
      error: "the agent runtime answered 500 to its event stream",
    });
    expect(await errorOf(await fetch(`${base}/svc/events`))).toMatchObject({ status: 401, code: "UNAUTHENTICATED" });
  });

  it("without a model the event stream opens at once, boots no runtime, and carries the sandbox's notices", async () => {
    ready = false;
    woken = 0;
    deps.modelMissing = true;
    const stop = new AbortController();
    try {
      const res = await fetch(`${base}/svc/events`, { headers: auth, signal: stop.signal });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("\n\n")) text += (await reader.read()).value;
      expect(text).toContain('"type":"ready"');
      const refusal = { host: "refused.localhost", port: 8443, reason: "not in [sandbox] egress of svc.toml" };
      await fetch(`${base}/svc/egress-refused`, { method: "POST", headers: auth, body: JSON.stringify(refusal) });
      while (!text.includes("egress_refused")) text += (await reader.read()).value;
      expect(text).toContain('"host":"refused.localhost"');
      expect(woken).toBe(0);
    } finally {
      stop.abort();
      deps.modelMissing = undefined;
    }
  });

  it("proxied requests: no context, booting runtime, bad or own port, nothing listening", async () => {
    const headers = { "x-svc-user-context": context() };
    expect(await errorOf(await fetch(`${base}/session`))).toEqual({
      status: 401,
      code: "UNAUTHENTICATED",
      error: "missing or invalid x-svc-user-context (malformed)",
    });
    ready = false;
    woken = 0;
    expect(await errorOf(await fetch(`${base}/session`, { headers }))).toMatchObject({
      status: 503,
      code: "AGENT_RUNTIME_UNAVAILABLE",
    });
    // A request for the runtime is its first use: it starts.
    expect(woken).toBe(1);
    expect(await errorOf(await fetch(`${base}/proxy/abc/`, { headers }))).toEqual({
      status: 400,
      code: "BAD_REQUEST",
      error: "'abc' is not a port",
    });
    expect(await errorOf(await fetch(`${base}/proxy/${OWN_PORT}/svc/health`, { headers }))).toMatchObject({
      status: 403,
      code: "FORBIDDEN",
    });
    const unreachable = {
      status: 502,
      code: "UPSTREAM_UNAVAILABLE",
      error: `nothing is listening on port ${deadPort} in the sandbox`,
    };
    // A plain GET takes the tunnel; a chunked body goes through the full server's forwarder.
    expect(await errorOf(await fetch(`${base}/proxy/${deadPort}/`, { headers }))).toEqual(unreachable);
    const chunked = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode("hi"));
        c.close();
      },
    });
    const viaServer = await fetch(`${base}/proxy/${deadPort}/`, {
      method: "POST",
      headers,
      body: chunked,
      duplex: "half",
    } as RequestInit);
    expect(await errorOf(viaServer)).toEqual(unreachable);
  });

  it("a browser opening a port before its app listens gets a page that retries, on either path", async () => {
    const navigation = { "x-svc-user-context": context(), accept: "text/html", "sec-fetch-mode": "navigate" };
    // A plain GET takes the tunnel; a chunked one the full server.
    for (const extra of [{}, { "transfer-encoding": "chunked" }] as Record<string, string>[]) {
      const res = await plainGet(`${base}/proxy/${deadPort}/`, { ...navigation, ...extra });
      expect(res.status).toBe(502);
      expect(res.headers["content-type"]).toMatch(/^text\/html/);
      expect(res.headers["retry-after"]).toBe("2");
      expect(res.body).toContain('<meta http-equiv="refresh" content="2">');
      expect(res.body).toContain(`nothing is listening on port ${deadPort} in the sandbox`);
    }
    // A script's request keeps the JSON error it can read.
    const script = await plainGet(`${base}/proxy/${deadPort}/`, { ...navigation, "sec-fetch-mode": "cors" });
    expect(JSON.parse(script.body).code).toBe("UPSTREAM_UNAVAILABLE");
  });

  it("upgrade requests are refused with a complete ErrorBody answer", async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(base).port), "127.0.0.1");
      let text = "";
      socket.on("data", (c) => {
        text += c;
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
      socket.write("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    });
    const [head, body] = answer.split("\r\n\r\n") as [string, string];
    expect(head).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
    expect(head).toContain(`content-length: ${Buffer.byteLength(body)}`);
    expect(ErrorBody.parse(JSON.parse(body))).toMatchObject({ code: "UNAUTHENTICATED" });
  });
});

/** A GET with exactly these headers (fetch adds its own `sec-fetch-mode`), the chunked one ended at once. */
function plainGet(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = get(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
  });
}
