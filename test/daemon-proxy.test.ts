import type { ChildProcess } from "node:child_process";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { signUserContext } from "../protocol/user-context.ts";
import { freePort } from "./support/cli.ts";
import { startDaemon } from "./support/daemon.ts";
import { expectIncrementalEvents } from "./support/streams.ts";

const SERVICE_KEY = "svc_sk_proxy-test-key-0123456789abcdef00";
const SESSION = "6f1c2d3e-0000-4000-8000-0000000000aa";
const _DAEMON = new URL("../daemon/main.ts", import.meta.url).pathname;

const context = () =>
  signUserContext(SERVICE_KEY, {
    user_id: "u1",
    project_id: "p1",
    session_id: SESSION,
    exp: Math.floor(Date.now() / 1000) + 300,
  });

type Seen = {
  app: string;
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  peer: number;
};
type Reply = { status: number; headers: Record<string, string>; body: string };

/** A user's app on a sandbox port: records every request it gets and answers with what it saw. */
async function startApp(name: string, seen: Seen[]): Promise<{ server: Server; port: number }> {
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    seen.push({
      app: name,
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      body,
      peer: req.socket.remotePort!,
    });
    if (req.url === "/events") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < 5; i++) {
        res.write(`data: tick ${i}\n\n`);
        await new Promise((r) => setTimeout(r, 150));
      }
      return res.end();
    }
    if (req.url === "/big") return res.end("x".repeat(4 << 20));
    res.end(JSON.stringify({ app: name, url: req.url, body }));
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return { server, port };
}

/**
 * Writes raw bytes on one connection and reads back `count` Content-Length framed responses, in order. With
 * `pieces`, the bytes go out in that many writes split at random places, each in its own TCP segment.
 */
function exchange(port: number, raw: string, count: number, pieces = 1): Promise<Reply[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let buffer = Buffer.alloc(0);
    const replies: Reply[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`timed out with ${replies.length}/${count} replies: ${buffer.toString().slice(0, 300)}`));
    }, 10_000);
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) break;
        const [statusLine, ...lines] = buffer.subarray(0, end).toString().split("\r\n");
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
        );
        const length = Number(headers["content-length"] ?? 0);
        if (buffer.length < end + 4 + length) break;
        replies.push({
          status: Number(statusLine!.split(" ")[1]),
          headers,
          body: buffer.subarray(end + 4, end + 4 + length).toString(),
        });
        buffer = buffer.subarray(end + 4 + length);
      }
      if (replies.length >= count) {
        clearTimeout(timer);
        socket.destroy();
        resolve(replies);
      }
    });
    socket.on("error", reject);
    socket.setNoDelay(true);
    const cuts = [
      ...new Set(Array.from({ length: pieces - 1 }, () => 1 + Math.floor(Math.random() * (raw.length - 1)))),
    ];
    const bounds = [0, ...cuts.sort((x, y) => x - y), raw.length];
    (async () => {
      for (let i = 1; i < bounds.length; i++) {
        socket.write(raw.slice(bounds[i - 1], bounds[i]));
        if (i < bounds.length - 1) await new Promise((r) => setTimeout(r, 2));
      }
    })();
  });
}

describe("daemon /proxy/{port}: one connection, many requests (real daemon process)", () => {
  let daemon: ChildProcess;
  let port: number;
  let base: string;
  const seen: Seen[] = [];
  let a: { server: Server; port: number };
  let b: { server: Server; port: number };
  const get = (path: string, extra = "") =>
    `GET ${path} HTTP/1.1\r\nHost: sandbox\r\nX-Forwarded-For: 6.6.6.6\r\n${extra}\r\n`;
  const authed = () => `X-Svc-User-Context: ${context()}\r\n`;

  beforeAll(async () => {
    a = await startApp("a", seen);
    b = await startApp("b", seen);
    ({
      child: daemon,
      port,
      base,
    } = await startDaemon({
      serviceKey: SERVICE_KEY,
      sessionId: SESSION,
      agentCommand: ["sleep", "3600"],
    }));
  });
  afterAll(() => {
    daemon?.kill("SIGTERM");
    for (const app of [a, b]) {
      app?.server.closeAllConnections();
      app?.server.close();
    }
  });
  beforeEach(() => {
    seen.length = 0;
  });

  it("rewrites every pipelined request's path and headers and reuses one upstream connection", async () => {
    const raw =
      get(`/proxy/${a.port}/one`, authed()) +
      get(`/proxy/${a.port}/two?x=1`, authed()) +
      get(`/proxy/${a.port}`, authed());
    const replies = await exchange(port, raw, 3);
    expect(replies.map((r) => JSON.parse(r.body).url)).toEqual(["/one", "/two?x=1", "/"]);
    expect(seen).toHaveLength(3);
    for (const request of seen) {
      expect(request.headers.host).toBe(`127.0.0.1:${a.port}`);
      expect(request.headers["x-svc-user-context"]).toBeUndefined();
      expect(request.headers["x-forwarded-for"]).toBe("127.0.0.1");
    }
    expect(new Set(seen.map((s) => s.peer)).size).toBe(1);
  });

  it("answers requests for other ports, the control surface and unauthenticated ones in order on the same connection", async () => {
    const raw =
      get(`/proxy/${a.port}/first`, authed()) +
      get(`/proxy/${b.port}/second`, authed()) +
      get("/svc/health") +
      get(`/proxy/${a.port}/no-context`) +
      get(`/proxy/${a.port}/after`, authed());
    const replies = await exchange(port, raw, 5);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 401, 200]);
    expect(JSON.parse(replies[0]!.body)).toMatchObject({ app: "a", url: "/first" });
    expect(JSON.parse(replies[1]!.body)).toMatchObject({ app: "b", url: "/second" });
    expect(JSON.parse(replies[2]!.body).status).toBe("ok");
    expect(JSON.parse(replies[4]!.body)).toMatchObject({ app: "a", url: "/after" });
    expect(seen.map((s) => s.url)).toEqual(["/first", "/second", "/after"]);
  });

  it("frames requests the same however TCP splits them", async () => {
    const raw =
      get(`/proxy/${a.port}/one`, authed()) +
      `POST /proxy/${a.port}/two HTTP/1.1\r\nHost: x\r\n${authed()}Content-Length: 11\r\n\r\nhello world` +
      get(`/proxy/${b.port}/three`, authed()) +
      get(`/proxy/${b.port}/four`);
    for (let round = 0; round < 5; round++) {
      seen.length = 0;
      const replies = await exchange(port, raw, 4, 40);
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 401]);
      expect(seen.map((r) => `${r.app}${r.url}:${r.body}`)).toEqual(["a/one:", "a/two:hello world", "b/three:"]);
    }
  });

  it("forwards bodies framed by length or chunked", async () => {
    const raw =
      `POST /proxy/${a.port}/len HTTP/1.1\r\nHost: x\r\n${authed()}Content-Length: 5\r\n\r\nhello` +
      `POST /proxy/${a.port}/chunked HTTP/1.1\r\nHost: x\r\n${authed()}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`;
    const replies = await exchange(port, raw, 2);
    expect(replies.map((r) => JSON.parse(r.body))).toEqual([
      { app: "a", url: "/len", body: "hello" },
      { app: "a", url: "/chunked", body: "hello world" },
    ]);
  });

  it("never lets bytes around an authorized request reach the app unchecked", async () => {
    const smuggled = get(`/proxy/${a.port}/smuggled`);
    const asBody = `POST /proxy/${a.port}/carrier HTTP/1.1\r\nHost: x\r\n${authed()}Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`;
    const [carried] = await exchange(port, asBody, 1);
    expect(JSON.parse(carried!.body)).toEqual({ app: "a", url: "/carrier", body: smuggled });

    const behind = await exchange(
      port,
      get(`/proxy/${a.port}/front`, `${authed()}Content-Length: 0\r\n`) + smuggled,
      2,
    );
    expect(behind.map((r) => r.status)).toEqual([200, 401]);

    const ambiguous = `POST /proxy/${a.port}/te-cl HTTP/1.1\r\nHost: x\r\n${authed()}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;
    expect((await exchange(port, ambiguous, 1))[0]!.status).toBe(400);
    const twoLengths = `POST /proxy/${a.port}/cl-cl HTTP/1.1\r\nHost: x\r\n${authed()}Content-Length: 1\r\nContent-Length: 2\r\n\r\nab`;
    expect((await exchange(port, twoLengths, 1))[0]!.status).toBe(400);
    expect(seen.map((s) => s.url)).toEqual(["/carrier", "/front"]);
  });

  it("answers 502 for a port nobody listens on", async () => {
    const closed = await freePort();
    const [reply] = await exchange(port, get(`/proxy/${closed}/`, authed()), 1);
    expect(reply!.status).toBe(502);
    expect(JSON.parse(reply!.body).error).toBe(`nothing is listening on port ${closed} in the sandbox`);
  });

  it("streams server-sent events from a sandbox port as they happen and large bodies intact", async () => {
    const res = await fetch(`${base}/proxy/${a.port}/events`, { headers: { "x-svc-user-context": context() } });
    await expectIncrementalEvents(res);

    const big = await fetch(`${base}/proxy/${a.port}/big`, { headers: { "x-svc-user-context": context() } });
    expect((await big.text()).length).toBe(4 << 20);
  });
});
