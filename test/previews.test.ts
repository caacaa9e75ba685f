import { get as httpGet, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type seedUser, type TestApi } from "./support/api-server.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";

/** GET through the loopback interface whatever the host name: `*.localhost` resolves there in browsers and curl. */
function viaLoopback(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string; headers: IncomingHttpHeaders }>((resolve, reject) => {
    const lookup = (_host: string, options: { all?: boolean }, done: (...args: unknown[]) => void) =>
      options.all ? done(null, [{ address: "127.0.0.1", family: 4 }]) : done(null, "127.0.0.1", 4);
    httpGet(url, { headers, lookup: lookup as never }, (res) => {
      let body = "";
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    }).on("error", reject);
  });
}

describe("previews of sandbox ports on hosts of their own (real Docker)", () => {
  let docker: Docker;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let project: { id: string; repo_url: string };

  let sandboxed: SandboxedProject;
  let appStarted = false;
  const sessions = (suffix = "", method = "GET", body?: unknown) => sandboxed.sessions(suffix, method, body);
  const containerOf = (sessionId: string) =>
    docker.listContainers({ all: true, filters: { label: [`dev.svc.session=${sessionId}`] } });

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Previewed");
    ({ docker, api, user, project } = sandboxed);
    const created = (await sessions("", "POST", {})).body;
    for (let i = 0; i < 480 && (await sessions(`/${created.session_id}`)).body.status === "provisioning"; i++)
      await new Promise((r) => setTimeout(r, 250));
    expect((await sessions(`/${created.session_id}`)).body.status).toBe("running");
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  /** The running session, with an app on its port 3000 that echoes what reached it. */
  async function previewedSession() {
    const session = (await sessions()).body.sessions.find((s: { status: string }) => s.status === "running");
    if (appStarted) return session;
    appStarted = true;
    const [container] = await containerOf(session.session_id);
    const app = await docker.getContainer(container!.Id).exec({
      Cmd: [
        "/opt/svc/bin/node",
        "-e",
        "require('http').createServer((q,s)=>s.end('preview '+q.url+' auth='+(q.headers.authorization||'none')+' cookie='+(q.headers.cookie||'none'))).on('upgrade',(q,k)=>{k.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n');k.on('data',d=>k.write('echo '+d))}).listen(3000)",
      ],
    });
    await app.start({ Detach: true });
    const ready = `http://3000-${session.session_id}.localhost:${new URL(api.url).port}/`;
    const bearer = { authorization: `Bearer ${user.token}` };
    for (let i = 0; i < 50 && (await viaLoopback(ready, bearer)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 100));
    return session;
  }

  it("serves a sandbox port only at the root of its own host, with a freshly signed user context", async () => {
    const session = await previewedSession();
    const link = await sessions(`/${session.session_id}/previews`, "POST", { port: 3000 });
    expect(link.status).toBe(201);
    const url = new URL(link.body.url);
    expect(url.host).toBe(`3000-${session.session_id}.localhost:${new URL(api.url).port}`);
    expect(url.pathname).toBe("/");
    const grant = url.searchParams.get("svc_preview")!;

    // A link works without an Authorization header, as a browser or curl uses it; its grant becomes a cookie.
    const first = await viaLoopback(`${url.origin}/page%20one?q=a+b&svc_preview=${grant}`);
    expect(first.status).toBe(200);
    expect(first.body).toBe("preview /page%20one?q=a+b auth=none cookie=none");
    expect(first.headers["set-cookie"]?.[0]).toMatch(
      new RegExp(`^svc_preview=${grant}; Path=/; Max-Age=\\d+; HttpOnly; SameSite=Lax$`),
    );
    expect(first.headers.connection).toBe("close");
    // The cookie carries the next requests; the sandbox never sees it, nor a bearer.
    const jar = { cookie: `theme=dark; svc_preview=${grant}` };
    expect((await viaLoopback(`${url.origin}/@vite/client`, jar)).body).toBe(
      "preview /@vite/client auth=none cookie=theme=dark",
    );
    expect((await viaLoopback(`${url.origin}/b`, { authorization: `Bearer ${user.token}` })).body).toBe(
      "preview /b auth=none cookie=none",
    );
    // Every path on a preview host is the app's, even one that looks like the API's.
    expect((await viaLoopback(`${url.origin}/v1/health`, jar)).body).toBe(
      "preview /v1/health auth=none cookie=theme=dark",
    );
    expect((await viaLoopback(`${url.origin}/`)).status).toBe(401);
    expect((await viaLoopback(`${url.origin}/?svc_preview=${grant.slice(0, -2)}xx`)).status).toBe(401);
    const host = (port: number) => `http://${port}-${session.session_id}.localhost:${url.port}`;
    expect((await viaLoopback(`${host(3001)}/`, jar)).status).toBe(401);
    // The sandbox's own ports are never a preview: the daemon's control surface, the agent runtime's shell.
    for (const port of [8000, 4096]) {
      const own = await viaLoopback(`${host(port)}/`, { authorization: `Bearer ${user.token}` });
      expect(own.status, String(port)).toBe(403);
    }
    expect((await sessions(`/${session.session_id}/previews`, "POST", { port: 70000 })).status).toBe(400);
    // The daemon itself refuses requests that do not carry a valid signed context.
    expect((await fetch(`${session.sandbox_url}/proxy/3000/hello`)).status).toBe(401);
    // The API's own origin serves no preview at all, whatever the credentials.
    const onApi = `/v1/projects/${project.id}/sessions/${session.session_id}/preview/3000/`;
    expect((await call(api.url, "GET", onApi, { token: user.token })).status).toBe(404);
    expect((await fetch(`${api.url}${onApi}?svc_preview=${grant}`)).status).toBe(404);

    // Dev-server hot reload: a WebSocket upgrade on the preview host reaches the app with the cookie's user.
    const upgrade = (headers: string, path = "/hmr", hostHeader = url.host) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(url.port), "127.0.0.1");
        let received = "";
        socket.on("data", (chunk) => {
          received += chunk.toString();
          if (received.includes("101 Switching Protocols") && !received.includes("echo")) socket.write("ping");
          if (received.includes("echo ping") || /^HTTP\/1.1 4\d\d/.test(received)) {
            socket.destroy();
            resolve(received);
          }
        });
        socket.on("error", reject);
        socket.write(
          `GET ${path} HTTP/1.1\r\nHost: ${hostHeader}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`,
        );
      });
    expect(await upgrade(`Cookie: svc_preview=${grant}\r\n`)).toContain("echo ping");
    expect(await upgrade(`Authorization: Bearer ${user.token}\r\n`)).toContain("echo ping");
    expect(await upgrade("")).toMatch(/^HTTP\/1.1 401/);
    expect(await upgrade(`Authorization: Bearer ${user.token}\r\n`, onApi, new URL(api.url).host)).toMatch(
      /^HTTP\/1.1 404/,
    );
  });

  it("keeps a browser's connection on the preview: pipelined requests answered in order, credentials and forged contexts never reaching the app, anything else answered by the API", async () => {
    const session = await previewedSession();
    const link = await sessions(`/${session.session_id}/previews`, "POST", { port: 3000 });
    const url = new URL(link.body.url);
    const grant = url.searchParams.get("svc_preview")!;
    const get = (path: string, headers: string, host = url.host) =>
      `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${headers}\r\n`;
    const answers = await pipelined(api.url, [
      get("/a?x=1", `Cookie: theme=dark; svc_preview=${grant}\r\nX-Svc-User-Context: forged\r\n`),
      get("/b", `Authorization: Bearer ${user.token}\r\n`),
      get("/c", `Cookie: svc_preview=${grant}\r\nX-Svc-User-Context: forged\r\nX-Svc-User-Context: again\r\n`),
      get("/", `Cookie: svc_preview=${grant}\r\n`, `3001-${session.session_id}.localhost:${url.port}`),
      get("/v1/health", "", new URL(api.url).host),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 401, 200]);
    expect(answers[0]!.body).toBe("preview /a?x=1 auth=none cookie=theme=dark");
    expect(answers[1]!.body).toBe("preview /b auth=none cookie=none");
    expect(answers[2]!.body).toBe("preview /c auth=none cookie=none");
    expect(JSON.parse(answers[4]!.body).status).toBe("ok");
    // Another session is not served on a connection already previewing this one (here: none such).
    const other = `3000-00000000-0000-4000-8000-000000000000.localhost:${url.port}`;
    const mixed = await pipelined(api.url, [
      get("/d", `Cookie: svc_preview=${grant}\r\n`),
      get("/", `Authorization: Bearer ${user.token}\r\n`, other),
    ]);
    expect(mixed.map((a) => a.status)).toEqual([200, 404]);
  });
});

/** Writes every request at once on one connection and reads as many answers. */
function pipelined(apiUrl: string, requests: string[]): Promise<{ status: number; body: string }[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(apiUrl).port), "127.0.0.1");
    let buffer = Buffer.alloc(0);
    const answers: { status: number; body: string }[] = [];
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString();
        const status = Number(head.split(" ")[1]);
        if (/transfer-encoding: *chunked/i.test(head)) {
          const last = buffer.indexOf("\r\n0\r\n\r\n", end);
          if (last < 0) return;
          const chunks = buffer.subarray(end + 4, last + 2).toString();
          answers.push({ status, body: chunks.replace(/[0-9a-f]+\r\n([\s\S]*?)\r\n/gi, "$1") });
          buffer = buffer.subarray(last + 7);
        } else {
          const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (buffer.length < end + 4 + length) return;
          answers.push({ status, body: buffer.subarray(end + 4, end + 4 + length).toString() });
          buffer = buffer.subarray(end + 4 + length);
        }
        if (answers.length === requests.length) {
          socket.destroy();
          resolve(answers);
        }
      }
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`connection closed after ${answers.length} answers`)));
    socket.write(requests.join(""));
  });
}
