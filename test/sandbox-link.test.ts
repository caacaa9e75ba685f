import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { MAX_SPARES } from "../api/sandbox-links/spares.ts";
import { hashSecret } from "../protocol/credential.ts";
import { SANDBOX_LINK_PATH } from "../protocol/sandbox-link.ts";
import { signUserContext } from "../protocol/user-context.ts";
import { startApi, type TestApi } from "./support/api-server.ts";
import { freePort } from "./support/cli.ts";
import { runtimeRunning, startDaemon, type TestDaemon } from "./support/daemon.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { dialLink, dialSpare } from "./support/link-dial.ts";
import { expectIncrementalEvents } from "./support/streams.ts";

/**
 * A stand-in agent runtime: says which session it serves, streams five events 150 ms apart as opencode's /event
 * would, and exits with its daemon (a killed daemon leaves no runtime behind).
 */
const AGENT = `
const http = require("node:http");
const parent = process.ppid;
setInterval(() => { try { process.kill(parent, 0); } catch { process.exit(0); } }, 200);
http.createServer((req, res) => {
  if (req.url.startsWith("/event")) {
    res.writeHead(200, { "content-type": "text/event-stream" });
    let n = 0;
    const timer = setInterval(() => {
      n += 1;
      res.write("data: " + JSON.stringify({ type: "session.idle", properties: { sessionID: "tick-" + n } }) + "\\n\\n");
      if (n === 5) { clearInterval(timer); res.end(); }
    }, 150);
    req.on("close", () => clearInterval(timer));
    return;
  }
  res.writeHead(200, { "content-type": "application/json" });
  const who = { session: process.env.SVC_SESSION_ID, tag: process.env.LINK_TEST_TAG, url: req.url };
  res.end(req.url.startsWith("/session/status") ? "{}" : JSON.stringify(who));
}).listen(Number(process.env.SVC_AGENT_PORT), "127.0.0.1");
`;

type Sandbox = { id: string; key: string; session: string; daemon?: TestDaemon };

const sandbox = (n: number): Sandbox => ({
  id: randomUUID(),
  key: `svc_sk_link-test-${n}-${randomUUID().replaceAll("-", "")}`,
  session: randomUUID(),
});

const context = (s: Sandbox) => ({
  "x-svc-user-context": signUserContext(s.key, {
    user_id: "u1",
    project_id: "p1",
    session_id: s.session,
    exp: Math.floor(Date.now() / 1000) + 300,
  }),
});

// A link that swallows bytes shows as a request that never ends: each test gives up long before the tier's limit.
describe("sandbox links: daemons dial out, the API reaches them through a loopback bridge", { timeout: 20_000 }, () => {
  let db: TestDatabase;
  let api: TestApi;
  let linkUrl: string;
  const a = sandbox(1);
  const b = sandbox(2);
  const servers: Server[] = [];

  const started: TestDaemon[] = [];
  async function daemonOf(s: Sandbox, tag = "first"): Promise<TestDaemon> {
    const daemon = await startDaemon({
      serviceKey: s.key,
      sessionId: s.session,
      agentCommand: [process.execPath, "-e", AGENT],
      env: { SVC_LINK_URL: linkUrl, LINK_TEST_TAG: tag },
      stdio: "ignore",
    });
    started.push(daemon);
    return daemon;
  }

  async function boot(s: Sandbox): Promise<string> {
    s.daemon?.child.kill("SIGKILL");
    s.daemon = await daemonOf(s);
    return api.services.sandboxLinks.waitFor(s.id, 15_000);
  }

  const health = async (endpoint: string) => (await fetch(`${endpoint}/svc/health`)).json();

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    linkUrl = `${api.url.replace("http:", "ws:")}${SANDBOX_LINK_PATH}`;
    // Neither sandbox has a session row: both are known only by the key announced ahead, as a warm-pool member is.
    for (const s of [a, b]) api.services.sandboxLinks.expect(hashSecret(s.key), s.id);
  });
  afterAll(async () => {
    for (const daemon of started) daemon.child.kill("SIGKILL");
    for (const server of servers) server.close();
    await api?.close();
    await db?.drop();
  });

  it("answers /svc/health through the bridge, never through the daemon's own port", async () => {
    const endpoint = await boot(a);
    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(endpoint).not.toBe(a.daemon!.base);
    expect(await health(endpoint)).toMatchObject({ status: "ok" });
    expect(api.services.sandboxLinks.endpoint(a.id)).toBe(endpoint);
  });

  it("streams server-sent events through the bridge as they come, unbuffered", async () => {
    const endpoint = await boot(b);
    await runtimeRunning(endpoint, b.key);
    const res = await fetch(`${endpoint}/svc/events`, { headers: { authorization: `Bearer ${b.key}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    await expectIncrementalEvents(res);
  });

  it("carries a WebSocket upgrade to a sandbox port (a preview's hot reload)", async () => {
    const endpoint = api.services.sandboxLinks.endpoint(a.id)!;
    const port = await freePort();
    const server = createServer();
    servers.push(server);
    const echo = new WebSocketServer({ server });
    echo.on("connection", (ws) => ws.on("message", (data) => ws.send(`echo ${data}`)));
    await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
    const ws = new WebSocket(`${endpoint.replace("http:", "ws:")}/proxy/${port}/hmr`, { headers: context(a) });
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    const replies: string[] = [];
    const got = new Promise<void>((resolve) =>
      ws.on("message", (data) => {
        replies.push(String(data));
        if (replies.length === 3) resolve();
      }),
    );
    for (const word of ["one", "two", "three"]) ws.send(word);
    await got;
    expect(replies).toEqual(["echo one", "echo two", "echo three"]);
    ws.close();
  });

  it("carries a large answer whole, to the last byte of one that ends with its connection", async () => {
    const endpoint = api.services.sandboxLinks.endpoint(a.id)!;
    const port = await freePort();
    const body = Buffer.alloc(8 << 20, "abcdefgh");
    // No length and no chunks: the answer is everything until the connection closes, so an early FIN would pass.
    const server = createServer((_req, res) => {
      res.socket!.write("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
      res.socket!.end(body);
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
    const res = await fetch(`${endpoint}/proxy/${port}/big`, { headers: context(a) });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(body)).toBe(true);
  });

  it("keeps two sandboxes' traffic apart", async () => {
    const [ea, eb] = [api.services.sandboxLinks.endpoint(a.id)!, api.services.sandboxLinks.endpoint(b.id)!];
    expect(ea).not.toBe(eb);
    await Promise.all([runtimeRunning(ea, a.key), runtimeRunning(eb, b.key)]);
    const asks = Array.from({ length: 40 }, (_, i) => {
      const s = i % 2 ? a : b;
      const endpoint = s === a ? ea : eb;
      return fetch(`${endpoint}/who/${i}`, { headers: context(s) }).then(async (r) => ({ s, i, body: await r.json() }));
    });
    for (const { s, i, body } of await Promise.all(asks))
      expect(body).toEqual({ session: s.session, tag: "first", url: `/who/${i}` });
    // One sandbox's user context means nothing on the other's bridge: the other daemon checked it, with its key.
    expect((await fetch(`${eb}/who`, { headers: context(a) })).status).toBe(401);
  });

  it("lets a newer link of a sandbox replace the older one, on the same endpoint", async () => {
    const endpoint = api.services.sandboxLinks.endpoint(b.id)!;
    const tag = async () =>
      (
        await fetch(`${endpoint}/who`, { headers: context(b) })
          .then((r) => r.json())
          .catch(() => ({}))
      ).tag;
    // The older daemon freezes: its link is dead though its TCP connection is not, and it cannot dial again.
    const older = b.daemon!;
    older.child.kill("SIGSTOP");
    b.daemon = await daemonOf(b, "second");
    for (let i = 0; i < 200 && (await tag()) !== "second"; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await tag()).toBe("second");
    // The replaced link's end is no outage: the endpoint stays on the newer one.
    const exited = new Promise((r) => older.child.once("exit", r));
    older.child.kill("SIGKILL");
    await exited;
    expect(await tag()).toBe("second");
    expect(api.services.sandboxLinks.endpoint(b.id)).toBe(endpoint);
  });

  /** An idle spare of the daemon at `endpoint`, once its daemon has dialed one (again). */
  async function idleSpare(endpoint: string): Promise<Socket> {
    for (let i = 0; i < 150; i++) {
      const spare = api.services.sandboxLinks.spareFor(endpoint);
      if (spare) return spare;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error("no spare came back");
  }

  it("holds spare connections the daemon dialed: each a raw connection to its server, another dialed in its place", async () => {
    const endpoint = api.services.sandboxLinks.endpoint(a.id)!;
    const taken: Socket[] = [];
    for (
      let spare = api.services.sandboxLinks.spareFor(endpoint);
      spare;
      spare = api.services.sandboxLinks.spareFor(endpoint)
    )
      taken.push(spare);
    expect(taken.length).toBeGreaterThan(0);
    expect(taken.length).toBeLessThanOrEqual(MAX_SPARES);
    // With none idle, the bridge opens a stream over the link instead.
    expect(await health(endpoint)).toMatchObject({ status: "ok" });
    // A spare speaks HTTP/1.1 to the daemon's own server from its first byte.
    const answers = await Promise.all(
      taken.map(
        (spare) =>
          new Promise<string>((resolve) => {
            let seen = "";
            spare.on("data", (chunk) => {
              seen += chunk;
              if (seen.includes("\r\n\r\n") && seen.includes("}")) resolve(seen);
            });
            spare.resume();
            spare.write("GET /svc/health HTTP/1.1\r\nhost: sandbox\r\n\r\n");
          }),
      ),
    );
    for (const answer of answers) expect(answer).toMatch(/^HTTP\/1\.1 200 [\s\S]*"status":"ok"/);
    for (const spare of taken) spare.destroy();
    // Each spare taken was dialed again.
    (await idleSpare(endpoint)).destroy();
  });

  it("hands a caller that found no spare idle the next one its daemon dials, rather than a stream", async () => {
    const endpoint = api.services.sandboxLinks.endpoint(a.id)!;
    const taken = [await idleSpare(endpoint)];
    for (
      let spare = api.services.sandboxLinks.spareFor(endpoint);
      spare;
      spare = api.services.sandboxLinks.spareFor(endpoint)
    )
      taken.push(spare);
    // None idle: the wait is on the daemon, which dials one more as soon as the API speaks on one it took.
    const soon = api.services.sandboxLinks.spareSoon(endpoint);
    expect(soon).toBeInstanceOf(Promise);
    taken[0]!.write("GET /svc/health HTTP/1.1\r\nhost: sandbox\r\n\r\n");
    const next = await soon;
    expect(next).toBeDefined();
    expect(taken).not.toContain(next);
    for (const spare of [...taken, next!]) spare.destroy();
    // A sandbox not linked here gets nothing to wait for.
    expect(api.services.sandboxLinks.spareSoon("http://127.0.0.1:1")).toBeUndefined();
  });

  it("refuses a link without a known service key: 401, nothing registered", async () => {
    const before = api.services.sandboxLinks.known().sort();
    const unknown = `svc_sk_link-test-unknown-${randomUUID().replaceAll("-", "")}`;
    expect(await dialLink(api.url, { authorization: `Bearer ${unknown}` })).toBe(401);
    expect(await dialLink(api.url, {})).toBe(401);
    expect(await dialLink(api.url, { authorization: "Bearer svc_not-a-service-key" })).toBe(401);
    expect(api.services.sandboxLinks.known().sort()).toEqual(before);
    // A spare connection needs the same key, and a link of its sandbox up in this process.
    expect(await dialSpare(api.url, unknown)).toBe(401);
    const unlinked = sandbox(3);
    api.services.sandboxLinks.expect(hashSecret(unlinked.key), unlinked.id);
    expect(await dialSpare(api.url, unlinked.key)).toBe(409);
    // The right key is let in; a link that never speaks HTTP/2 replaces nothing.
    expect(await dialLink(api.url, { authorization: `Bearer ${a.key}` })).toBe(101);
    expect(await health(api.services.sandboxLinks.endpoint(a.id)!)).toMatchObject({ status: "ok" });
  });

  it("fails fast while a daemon is gone, and serves the same endpoint once it is back", async () => {
    const endpoint = await api.services.sandboxLinks.waitFor(a.id, 15_000);
    const port = await freePort();
    // An answer as long as its connection: cut off, it must fail, not end as if whole.
    const server = createServer((_req, res) => {
      res.socket!.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
      res.socket!.write("data: first\n\n");
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
    // A connection over a spare ends as one to the daemon's own port would (the daemon's kernel sends a FIN).
    const spare = await idleSpare(endpoint);
    const spareEnded = new Promise((resolve) => spare.once("close", resolve));
    spare.on("error", () => {});
    spare.resume();
    // A raw connection over a stream of the link (no spare left idle), to see how it ends: a reset, never a FIN that
    // would pass the answer off as whole.
    for (let idle = spare; idle; idle = api.services.sandboxLinks.spareFor(endpoint)!)
      if (idle !== spare) idle.destroy();
    const raw = connect(Number(new URL(endpoint).port), "127.0.0.1");
    const headers = Object.entries(context(a)).map(([k, v]) => `${k}: ${v}\r\n`);
    raw.write(`GET /proxy/${port}/forever HTTP/1.1\r\nhost: sandbox\r\n${headers.join("")}\r\n`);
    let seen = "";
    await new Promise<void>((resolve) =>
      raw.on("data", (chunk) => {
        seen += chunk;
        if (seen.includes("first")) resolve();
      }),
    );
    const ending = new Promise<string>((resolve) => {
      raw.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      raw.once("end", () => resolve("end"));
    });

    const exited = new Promise((r) => a.daemon!.child.once("exit", r));
    a.daemon!.child.kill("SIGKILL");
    await exited;
    const started = Date.now();
    // The connection it carried is reset, and a new request is refused: neither waits.
    expect(await ending).toBe("ECONNRESET");
    await spareEnded;
    await expect(fetch(`${endpoint}/svc/health`, { signal: AbortSignal.timeout(10_000) })).rejects.toThrow(
      /fetch failed/,
    );
    expect(Date.now() - started).toBeLessThan(2000);
    expect(api.services.sandboxLinks.endpoint(a.id)).toBeUndefined();

    expect(await boot(a)).toBe(endpoint);
    expect(await health(endpoint)).toMatchObject({ status: "ok" });
  });
});
