import type { ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUserContext } from "../protocol/user-context.ts";
import { freePort } from "./support/cli.ts";
import { startDaemon } from "./support/daemon.ts";
import { expectIncrementalEvents } from "./support/streams.ts";

const SERVICE_KEY = "svc_sk_test-service-key-0123456789abcdef";
const SESSION = "6f1c2d3e-0000-4000-8000-000000000001";
const _DAEMON = new URL("../daemon/main.ts", import.meta.url).pathname;
const FAKE = new URL("./fixtures/fake-agent-runtime.mjs", import.meta.url).pathname;

function context(overrides: { exp?: number; session?: string; key?: string } = {}) {
  return signUserContext(overrides.key ?? SERVICE_KEY, {
    user_id: "u1",
    project_id: "p1",
    session_id: overrides.session ?? SESSION,
    exp: overrides.exp ?? Math.floor(Date.now() / 1000) + 300,
  });
}

async function waitFor(fn: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("timed out");
}

describe("svc-agent daemon (real process, stand-in agent runtime)", () => {
  let daemon: ChildProcess;
  let base: string;
  let port: number;
  let appPort: number;
  let app: Server;

  beforeAll(async () => {
    appPort = await freePort();
    // A "sandbox port" an app of the user listens on.
    app = createServer((req, res) => res.end(`app saw ${req.url}`));
    await new Promise<void>((r) => app.listen(appPort, "127.0.0.1", r));
    const started = await startDaemon({
      serviceKey: SERVICE_KEY,
      sessionId: SESSION,
      agentCommand: [process.execPath, FAKE],
      env: { FAKE_BOOT_DELAY_MS: "1500", FAKE_ECHO_ENV: "INJECTED" },
    });
    daemon = started.child;
    port = started.port;
    base = started.base;
  });
  afterAll(async () => {
    daemon?.kill("SIGTERM");
    app?.close();
  });

  it("answers health without authentication and 503s the runtime while it boots", async () => {
    const health = await (await fetch(`${base}/svc/health`)).json();
    expect(health).toMatchObject({ status: "ok", busy: false });
    const early = await fetch(`${base}/anything`, { headers: { "x-svc-user-context": context() } });
    expect(early.status).toBe(503);
    await waitFor(async () => (await (await fetch(`${base}/svc/health`)).json()).agent.state === "running");
    const later = await fetch(`${base}/anything`, { headers: { "x-svc-user-context": context() } });
    expect(later.status).toBe(200);
    expect((await later.json()).runtime).toBe("fake");
  });

  it("requires a valid, unexpired user context for the runtime and sandbox ports", async () => {
    const cases: [string, Record<string, string>][] = [
      ["missing", {}],
      ["forged", { "x-svc-user-context": context({ key: "svc_sk_some-other-key-000000000000" }) }],
      ["expired", { "x-svc-user-context": context({ exp: Math.floor(Date.now() / 1000) - 1 }) }],
      ["other session", { "x-svc-user-context": context({ session: "another-session" }) }],
      ["garbage", { "x-svc-user-context": "not.a.valid.header" }],
      ["service key as bearer", { authorization: `Bearer ${SERVICE_KEY}` }],
    ];
    for (const [name, headers] of cases) {
      for (const path of ["/session", `/proxy/${appPort}/x`]) {
        const res = await fetch(base + path, { headers });
        expect(res.status, `${name} ${path}`).toBe(401);
      }
    }
    const ok = await fetch(`${base}/proxy/${appPort}/hello?q=1`, { headers: { "x-svc-user-context": context() } });
    expect(await ok.text()).toBe("app saw /hello?q=1");
  });

  it("does not forward the signed header to the upstream", async () => {
    const res = await fetch(`${base}/echo`, { headers: { "x-svc-user-context": context() } });
    const body = await res.json();
    expect(body.headers["x-svc-user-context"]).toBeUndefined();
  });

  it("refuses to proxy its own port and rejects bad ports", async () => {
    const headers = { "x-svc-user-context": context() };
    expect((await fetch(`${base}/proxy/${port}/svc/health`, { headers })).status).toBe(403);
    for (const bad of ["0", "70000", "abc", "-1"]) {
      expect((await fetch(`${base}/proxy/${bad}/`, { headers })).status, bad).toBe(400);
    }
  });

  it("protects control routes with the service key", async () => {
    const body = JSON.stringify({ set: { INJECTED: "v1" } });
    const noKey = await fetch(`${base}/svc/env`, { method: "POST", body });
    expect(noKey.status).toBe(401);
    const withContext = await fetch(`${base}/svc/env`, {
      method: "POST",
      body,
      headers: { "x-svc-user-context": context() },
    });
    expect(withContext.status).toBe(401);
    const wrong = await fetch(`${base}/svc/env`, {
      method: "POST",
      body,
      headers: { authorization: "Bearer svc_sk_wrong" },
    });
    expect(wrong.status).toBe(401);
    const bad = await fetch(`${base}/svc/env`, {
      method: "POST",
      body: JSON.stringify({ set: { "BAD NAME": "x" } }),
      headers: { authorization: `Bearer ${SERVICE_KEY}` },
    });
    expect(bad.status).toBe(400);
  });

  it("restarts the runtime with a new environment on POST /svc/env", async () => {
    const res = await fetch(`${base}/svc/env`, {
      method: "POST",
      body: JSON.stringify({ set: { INJECTED: "v1" } }),
      headers: { authorization: `Bearer ${SERVICE_KEY}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ names: ["INJECTED"] });
    await waitFor(async () => (await (await fetch(`${base}/svc/health`)).json()).agent.state === "running");
    const echoed = await (await fetch(`${base}/x`, { headers: { "x-svc-user-context": context() } })).json();
    expect(echoed.env).toBe("v1");
  });

  it("streams server-sent events through the proxy as they happen", async () => {
    const res = await fetch(`${base}/events`, { headers: { "x-svc-user-context": context() } });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    await expectIncrementalEvents(res);
  });

  it("passes WebSocket upgrades through after checking the user context", async () => {
    const exchange = (headers: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        let received = "";
        socket.on("data", (chunk) => {
          received += chunk.toString();
          if (received.includes("101 Switching Protocols") && !received.includes("ping")) socket.write("ping");
          if (received.includes("ping") || received.startsWith("HTTP/1.1 401")) {
            socket.end();
            resolve(received);
          }
        });
        socket.on("error", reject);
        socket.write(
          `GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`,
        );
      });
    const ok = await exchange(`x-svc-user-context: ${context()}\r\n`);
    expect(ok).toContain("101 Switching Protocols");
    expect(ok).toContain("ping");
    const denied = await exchange("");
    expect(denied).toMatch(/^HTTP\/1.1 401/);
  });

  it("restarts a runtime that dies", async () => {
    const before = (await (await fetch(`${base}/svc/health`)).json()).agent;
    process.kill(before.pid, "SIGKILL");
    await waitFor(async () => {
      const now = (await (await fetch(`${base}/svc/health`)).json()).agent;
      return now.state === "running" && now.pid !== before.pid;
    });
    const after = (await (await fetch(`${base}/svc/health`)).json()).agent;
    expect(after.restarts).toBeGreaterThan(before.restarts);
  });
});
