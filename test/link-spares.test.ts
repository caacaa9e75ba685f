import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { keepSpares, SPARES } from "../daemon/link-spares.ts";
import { SANDBOX_LINK_PATH, SANDBOX_SPARE_UPGRADE } from "../protocol/sandbox-link.ts";

/**
 * A daemon's spare connections against a stand-in API on loopback that answers each spare's upgrade as `answer`
 * says: held (101) or refused (409), as an API replica without the sandbox's link refuses it.
 */
async function standInApi(answer: (n: number) => "hold" | "refuse") {
  const upgrades: IncomingMessage[] = [];
  const held: Socket[] = [];
  const server: Server = createServer();
  server.on("upgrade", (req, socket: Socket) => {
    upgrades.push(req);
    if (answer(upgrades.length) === "refuse") {
      socket.end("HTTP/1.1 409 Conflict\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
      return;
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${SANDBOX_SPARE_UPGRADE}\r\n\r\n`,
    );
    held.push(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${SANDBOX_LINK_PATH}?replica=10.0.0.2`;
  return { server, url, upgrades, held };
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a daemon's spare connections (daemon/link-spares.ts)", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  it("dials its spares to the link's URL with its key, and hands one to its server at the API's first byte", async () => {
    const api = await standInApi(() => "hold");
    const accepted: Buffer[] = [];
    const spares = keepSpares({
      url: api.url,
      serviceKey: "svc_sk_spare-test",
      accept: (socket) => socket.once("data", (chunk: Buffer) => accepted.push(chunk)),
    });
    cleanups.push(
      () => spares.stop(),
      () => api.server.close(),
    );
    for (let i = 0; i < 100 && api.held.length < SPARES; i++) await settle(20);
    expect(api.held).toHaveLength(SPARES);
    for (const req of api.upgrades) {
      expect(req.url).toBe(`${SANDBOX_LINK_PATH}?replica=10.0.0.2`);
      expect(req.headers.authorization).toBe("Bearer svc_sk_spare-test");
      expect(req.headers.upgrade).toBe(SANDBOX_SPARE_UPGRADE);
    }
    // The first byte the API sends reaches the daemon's server whole, and another spare is dialed in its place.
    api.held[0]!.write("GET /svc/health HTTP/1.1\r\n\r\n");
    for (let i = 0; i < 100 && (accepted.length === 0 || api.held.length <= SPARES); i++) await settle(20);
    expect(Buffer.concat(accepted).toString()).toBe("GET /svc/health HTTP/1.1\r\n\r\n");
    expect(api.held).toHaveLength(SPARES + 1);
    // A stream over the link (no spare was idle) keeps one more from then on.
    spares.more();
    for (let i = 0; i < 100 && api.held.length < SPARES + 2; i++) await settle(20);
    expect(api.held).toHaveLength(SPARES + 2);
    // Every idle spare taken at once (a burst of connections): each is dialed again, and one more is kept.
    const idle = api.held.slice(1);
    for (const socket of idle) socket.write("GET /svc/health HTTP/1.1\r\n\r\n");
    const expected = api.held.length + idle.length + 1;
    for (let i = 0; i < 100 && api.held.length < expected; i++) await settle(20);
    await settle(200);
    expect(api.held).toHaveLength(expected);
    // A spare the API ends unused (its caller left before it came) is no longer counted idle: another is dialed.
    api.held.at(-1)!.end();
    for (let i = 0; i < 100 && api.held.length <= expected; i++) await settle(20);
    expect(api.held).toHaveLength(expected + 1);
  });

  it("dials a refused spare again (another replica got it), and stops after twelve refusals in a row", async () => {
    // Refused three times, then held: the spares come up all the same.
    const flaky = await standInApi((n) => (n <= 3 ? "refuse" : "hold"));
    const kept = keepSpares({ url: flaky.url, serviceKey: "svc_sk_spare-test", accept: () => {} });
    cleanups.push(
      () => kept.stop(),
      () => flaky.server.close(),
    );
    for (let i = 0; i < 100 && flaky.held.length < SPARES; i++) await settle(20);
    expect(flaky.held).toHaveLength(SPARES);

    const refusing = await standInApi(() => "refuse");
    const given = keepSpares({ url: refusing.url, serviceKey: "svc_sk_spare-test", accept: () => {} });
    cleanups.push(
      () => given.stop(),
      () => refusing.server.close(),
    );
    for (let i = 0; i < 150 && refusing.upgrades.length < 12; i++) await settle(20);
    // Dials already under way when the twelfth refusal came may still arrive; then none, however long it waits.
    await settle(500);
    const dialed = refusing.upgrades.length;
    expect(dialed).toBeGreaterThanOrEqual(12);
    expect(dialed).toBeLessThan(12 + SPARES);
    await settle(1500);
    expect(refusing.upgrades).toHaveLength(dialed);
  });

  it("dials through the API's socket while its file is there, over TCP once it is gone", async () => {
    const api = await standInApi(() => "hold");
    const dir = mkdtempSync(join(tmpdir(), "svc-link-socket-"));
    const path = join(dir, "api.sock");
    const viaSocket: boolean[] = [];
    api.server.on("upgrade", (_req, socket: Socket) => viaSocket.push(socket.remoteAddress === undefined));
    const listener = createNetServer((socket) => api.server.emit("connection", socket));
    await new Promise<void>((r) => listener.listen(path, r));
    const spares = keepSpares({ url: api.url, socket: path, serviceKey: "svc_sk_spare-test", accept: () => {} });
    cleanups.push(
      () => spares.stop(),
      () => listener.close(),
      () => api.server.close(),
      () => rmSync(dir, { recursive: true, force: true }),
    );
    for (let i = 0; i < 100 && api.held.length < SPARES; i++) await settle(20);
    expect(viaSocket).toEqual(Array(SPARES).fill(true));
    rmSync(path);
    api.held[0]!.write("GET /svc/health HTTP/1.1\r\n\r\n");
    for (let i = 0; i < 100 && api.held.length <= SPARES; i++) await settle(20);
    expect(viaSocket.slice(SPARES)).toEqual([false]);
  });

  it("brings its link up over TCP when the socket refuses it (a daemon whose root is another user)", async () => {
    const api = await standInApi(() => "hold");
    const links = new WebSocketServer({ noServer: true });
    const overTcp: boolean[] = [];
    api.server.removeAllListeners("upgrade");
    api.server.on("upgrade", (req, socket: Socket, head: Buffer) => {
      if (req.headers.upgrade !== "websocket") return void socket.destroy();
      overTcp.push(socket.remoteAddress !== undefined);
      links.handleUpgrade(req, socket, head, () => {});
    });
    // The API's socket, its user's alone (api/http/sandbox-socket.ts), and a daemon that runs as another user.
    const dir = mkdtempSync(join(tmpdir(), "svc-link-socket-"));
    chmodSync(dir, 0o755);
    const path = join(dir, "api.sock");
    const listener = createNetServer((socket) => api.server.emit("connection", socket));
    await new Promise<void>((r) => listener.listen(path, r));
    chmodSync(path, 0o600);
    const script = `process.setuid(65534);
      const { startLink } = await import("./daemon/link.ts");
      startLink({ url: ${JSON.stringify(api.url)}, socket: ${JSON.stringify(path)}, serviceKey: "svc_sk_link-test",
        target: { host: "127.0.0.1", port: 9 }, accept() {}, log: (m) => console.log(m), backoff: { firstMs: 20, maxMs: 40 } });`;
    const daemon = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("..", import.meta.url)),
      stdio: ["ignore", "pipe", "inherit"],
    });
    cleanups.push(
      () => daemon.kill("SIGKILL"),
      () => listener.close(),
      () => links.close(),
      () => api.server.close(),
      () => rmSync(dir, { recursive: true, force: true }),
    );
    let said = "";
    daemon.stdout!.on("data", (chunk: Buffer) => {
      said += chunk.toString();
    });
    for (let i = 0; i < 500 && !said.includes("link up"); i++) await settle(20);
    expect(said).toContain(`link up: ${api.url}`);
    expect(overTcp).toEqual([true]);
  });
});
