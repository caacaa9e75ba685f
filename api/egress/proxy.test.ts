import { once } from "node:events";
import { createServer, request, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EgressRefusedBody } from "../../protocol/daemon.ts";
import { parseEgressEntry } from "../../protocol/egress.ts";
import { createEgressProxy } from "./proxy.ts";
import { notPublic, resolveTarget } from "./target.ts";

const KEY = "svc_sk_proxy-unit-test";
const portOf = (server: Server) => (server.address() as AddressInfo).port;

/** One exchange over a raw socket: what a proxy client writes, and everything it reads until the proxy is done. */
async function raw(port: number, text: string): Promise<string> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.write(text);
  let read = "";
  socket.on("data", (chunk) => {
    read += chunk;
  });
  await once(socket, "end");
  socket.destroy();
  return read;
}

const basic = (key: string) => `Proxy-Authorization: Basic ${Buffer.from(`sandbox:${key}`).toString("base64")}\r\n`;

describe("the egress proxy (in process, servers on loopback)", () => {
  let target: Server;
  let proxyServer: Server;
  let proxyPort: number;
  let targetPort: number;
  const refusals: EgressRefusedBody[] = [];

  beforeAll(async () => {
    target = createServer((req, res) => res.end(`target saw ${req.url} host=${req.headers.host}`));
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
    targetPort = portOf(target);
    const proxy = createEgressProxy({
      sandboxOf: async (key) => (key === KEY ? { sessionId: "s1", projectId: "p1", url: null } : undefined),
      rules: async () => [`allowed.localhost:${targetPort}`, "*.localhost"].map((e) => parseEgressEntry(e) as never),
      always: [],
      resolve: resolveTarget,
      notPublic,
      refused: (_sandbox, key, refusal) => {
        expect(key).toBe(KEY);
        refusals.push(refusal);
      },
      log: () => {},
    });
    proxyServer = createServer((req, res) => {
      if (proxy.owns(req)) proxy.request(req, res);
      else res.writeHead(404).end("an API route");
    });
    proxyServer.on("connect", (req, socket, head) => proxy.connect(req, socket, head));
    await new Promise<void>((r) => proxyServer.listen(0, "127.0.0.1", r));
    proxyPort = portOf(proxyServer);
  });
  afterAll(() => {
    proxyServer?.closeAllConnections();
    proxyServer?.close();
    target?.close();
  });

  it("forwards an absolute-URI request to a listed host and refuses another with 403, reporting it", async () => {
    const allowed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({
        host: "127.0.0.1",
        port: proxyPort,
        path: `http://allowed.localhost:${targetPort}/hello?x=1`,
        headers: { host: `allowed.localhost:${targetPort}`, "proxy-authorization": basic(KEY).split(": ")[1]!.trim() },
      });
      req.on("response", async (res) => {
        let body = "";
        for await (const chunk of res) body += chunk;
        resolve({ status: res.statusCode!, body });
      });
      req.on("error", reject);
      req.end();
    });
    expect(allowed).toEqual({ status: 200, body: `target saw /hello?x=1 host=allowed.localhost:${targetPort}` });

    const refused = await raw(
      proxyPort,
      `GET http://refused.example:${targetPort}/ HTTP/1.1\r\nHost: refused.example\r\n${basic(KEY)}Connection: close\r\n\r\n`,
    );
    expect(refused).toMatch(/^HTTP\/1\.1 403 /);
    expect(refused).toContain(`refused.example:${targetPort} refused: not in [sandbox] egress of svc.toml`);
    expect(refusals).toContainEqual({
      host: "refused.example",
      port: targetPort,
      reason: "not in [sandbox] egress of svc.toml on the default branch",
    });
  });

  it("tunnels CONNECT to a listed host; refuses unlisted ones, a '*.' match on loopback, and strangers (407)", async () => {
    const tunnel = await raw(
      proxyPort,
      `CONNECT allowed.localhost:${targetPort} HTTP/1.1\r\n${basic(KEY)}\r\nGET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(tunnel).toContain("target saw /through host=x");

    const unlisted = await raw(proxyPort, `CONNECT allowed.localhost:1 HTTP/1.1\r\n${basic(KEY)}\r\n`);
    expect(unlisted).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    // Matched only by `*.localhost`: whoever runs a domain's DNS must not point it at this machine.
    const wildcard = await raw(proxyPort, `CONNECT other.localhost:${targetPort} HTTP/1.1\r\n${basic(KEY)}\r\n`);
    expect(wildcard).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(wildcard).toContain("resolves to 127.0.0.1, a loopback address");
    expect(refusals.map((r) => `${r.host}:${r.port}`)).toEqual(
      expect.arrayContaining(["allowed.localhost:1", `other.localhost:${targetPort}`]),
    );

    for (const credential of ["", basic("svc_sk_someone-else")]) {
      const stranger = await raw(proxyPort, `CONNECT allowed.localhost:${targetPort} HTTP/1.1\r\n${credential}\r\n`);
      expect(stranger).toMatch(/^HTTP\/1\.1 407 /);
      expect(stranger).toContain('proxy-authenticate: Basic realm="svc egress"');
    }
  });

  it("leaves every other request to the API's routes", async () => {
    expect(await raw(proxyPort, "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).toContain(
      "an API route",
    );
  });
});
