import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseHead, type TunnelHead } from "./http-head.ts";
import { type Admitted, tunnelConnection } from "./http-tunnel.ts";

const BIG = 3_000_000;
const DRIPS = 8000;
const DRIP = 1000;
const drip = (i: number) => Buffer.alloc(DRIP, 97 + (i % 26));

/** An upstream on loopback: `/big` is BIG bytes of `a`, anything else echoes the method, path and body. */
async function startUpstream(name: string): Promise<{ server: Server; port: number }> {
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    if (req.url === "/big") return res.end(Buffer.alloc(BIG, 97));
    if (req.url === "/drip") {
      // Small writes, each its own read at the tunnel, that a slow client leaves queued there.
      res.setHeader("content-length", DRIPS * DRIP);
      for (let i = 0; i < DRIPS; i++) {
        res.write(drip(i));
        await new Promise((r) => setImmediate(r));
      }
      return res.end();
    }
    res.end(JSON.stringify({ name, method: req.method, url: req.url, body, host: req.headers.host }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as { port: number }).port };
}

/** A tunnel whose `admit` routes `/a/…` to one upstream and `/b/…` to another; anything else goes to `fallback`. */
async function startTunnel(
  upstreams: Record<string, number>,
  opened?: (admitted: Admitted) => Socket | undefined | Promise<Socket | undefined>,
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => res.end(`fallback ${req.url}`));
  const [fullHttp] = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  const admit = (head: TunnelHead): Admitted | undefined => {
    const [, name, ...rest] = head.target.split("/");
    const port = upstreams[name!];
    if (!port) return undefined;
    const kept = head.headers.filter((h) => h.lower !== "host").map((h) => `${h.line}\r\n`);
    return {
      upstream: name!,
      address: { host: "127.0.0.1", port },
      head: `${head.method} /${rest.join("/")} HTTP/1.1\r\n${kept.join("")}host: upstream-${name}\r\n\r\n`,
    };
  };
  server.on("connection", (socket: Socket) =>
    tunnelConnection(socket, {
      admit,
      opened,
      unreachable: () => "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
      fallback: (s) => fullHttp!.call(server, s),
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as { port: number }).port };
}

/** Sends `raw` on one connection, optionally reading nothing for `pauseMs`, and returns all it got until the end. */
function rawExchange(port: number, raw: string, pauseMs = 0): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("error", reject);
    socket.on("end", () => resolve(Buffer.concat(chunks)));
    socket.pause();
    setTimeout(() => {
      socket.on("data", (c: Buffer) => chunks.push(c));
      socket.resume();
    }, pauseMs);
    socket.write(raw);
  });
}

const get = (path: string, extra = "") => `GET ${path} HTTP/1.1\r\nHost: preview\r\n${extra}\r\n`;
const bodies = (answer: Buffer) =>
  [...answer.toString("latin1").matchAll(/\r\n\r\n(\{[^}]*\})/g)].map((m) => JSON.parse(m[1]!));

describe("the API's tunnel", () => {
  let a: { server: Server; port: number };
  let b: { server: Server; port: number };
  let tunnel: { server: Server; port: number };

  beforeAll(async () => {
    a = await startUpstream("a");
    b = await startUpstream("b");
    tunnel = await startTunnel({ a: a.port, b: b.port });
  });
  afterAll(() => {
    for (const s of [a, b, tunnel]) s?.server.close();
  });

  it("parses only plain HTTP/1.1 heads it can frame", () => {
    expect(parseHead("GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3")).toMatchObject({
      method: "GET",
      target: "/x",
      bodyLength: 3,
    });
    expect(parseHead("GET /x HTTP/1.1\r\nTransfer-Encoding: chunked")).toBeUndefined();
    expect(parseHead("GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1")).toBeUndefined();
    expect(parseHead("GET /x HTTP/1.1\r\nConnection: Upgrade")).toBeUndefined();
    expect(parseHead("GET /x HTTP/1.1\r\nBad Name: x")).toBeUndefined();
    expect(parseHead("GET http://x/ HTTP/1.1")).toBeUndefined();
  });

  it("answers pipelined requests in order, bodies included, across upstreams and then the full server", async () => {
    const post = `POST /a/post HTTP/1.1\r\nHost: preview\r\nContent-Length: 5\r\n\r\nhello`;
    const answer = await rawExchange(
      tunnel.port,
      get("/a/1") + post + get("/b/2") + get("/a/3") + get("/other") + get("/a/4", "Connection: close\r\n"),
    );
    expect(bodies(answer)).toEqual([
      { name: "a", method: "GET", url: "/1", body: "", host: "upstream-a" },
      { name: "a", method: "POST", url: "/post", body: "hello", host: "upstream-a" },
      { name: "b", method: "GET", url: "/2", body: "", host: "upstream-b" },
      { name: "a", method: "GET", url: "/3", body: "", host: "upstream-a" },
    ]);
    // From the first request it does not admit, the connection is the full server's, which answers the rest.
    expect(answer.toString("latin1")).toMatch(/fallback \/other[\s\S]*fallback \/a\/4$/);
  });

  it("copies large answers intact to a reader that is slow to start", async () => {
    const answer = await rawExchange(tunnel.port, get("/a/big") + get("/a/big", "Connection: close\r\n"), 500);
    const text = answer.toString("latin1");
    const parts = text.split(/HTTP\/1\.1 200 OK\r\n[\s\S]*?\r\n\r\n/).filter(Boolean);
    expect(parts.map((p) => p.length)).toEqual([BIG, BIG]);
    expect(parts.every((p) => /^a+$/.test(p))).toBe(true);
  });

  it("keeps each small answer chunk intact while the client is slow to read", async () => {
    const answer = await rawExchange(tunnel.port, get("/a/drip", "Connection: close\r\n"), 500);
    const body = answer.subarray(answer.indexOf("\r\n\r\n") + 4);
    expect(body.length).toBe(DRIPS * DRIP);
    expect(body.equals(Buffer.concat(Array.from({ length: DRIPS }, (_, i) => drip(i))))).toBe(true);
  });

  it("waits for an upstream connection on its way, and closes one that comes after its client left", async () => {
    // `opened` hands over a connection to upstream b, later: the requests for a wait for it and go over it.
    const handed: Socket[] = [];
    const later = (ms: number) => () =>
      new Promise<Socket>((resolve) =>
        setTimeout(() => {
          const socket = connect(b.port, "127.0.0.1");
          handed.push(socket);
          resolve(socket);
        }, ms),
      );
    const waiting = await startTunnel({ a: a.port }, later(100));
    try {
      const answer = await rawExchange(waiting.port, get("/a/1") + get("/a/2", "Connection: close\r\n"));
      expect(bodies(answer)).toEqual([
        { name: "b", method: "GET", url: "/1", body: "", host: "upstream-a" },
        { name: "b", method: "GET", url: "/2", body: "", host: "upstream-a" },
      ]);
      // A client gone before its connection came: the connection is closed, not left open.
      const gone = connect(waiting.port, "127.0.0.1");
      gone.write(get("/a/3"));
      await new Promise((r) => setTimeout(r, 20));
      gone.destroy();
      for (let i = 0; i < 50 && handed.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
      expect(handed).toHaveLength(2);
      for (let i = 0; i < 50 && !handed[1]!.closed; i++) await new Promise((r) => setTimeout(r, 20));
      expect(handed[1]!.closed).toBe(true);
    } finally {
      waiting.server.close();
    }
  });

  it("answers for an upstream that cannot be reached", async () => {
    const down = await startTunnel({ a: 1 });
    try {
      const answer = await rawExchange(down.port, get("/a/x"));
      expect(answer.toString("latin1")).toMatch(/^HTTP\/1\.1 502 Bad Gateway/);
    } finally {
      down.server.close();
    }
  });
});
