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

describe("previews of sandbox ports through the API (real Docker)", () => {
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
    for (let i = 0; i < 50 && (await sessions(`/${session.session_id}/preview/3000/`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 100));
    return session;
  }

  it("serves previews of a sandbox port through the API with a freshly signed user context", async () => {
    const session = await previewedSession();
    const res = await sessions(`/${session.session_id}/preview/3000/hello?x=1`);
    expect(res.status).toBe(200);
    expect(res.body).toBe("preview /hello?x=1 auth=none cookie=none");
    expect(
      (await call(api.url, "GET", `/v1/projects/${project.id}/sessions/${session.session_id}/preview/3000/`)).status,
    ).toBe(401);
    expect((await sessions(`/${session.session_id}/preview/8000/svc/health`)).status).toBe(403);
    // The daemon itself refuses requests that do not carry a valid signed context.
    expect((await fetch(`${session.sandbox_url}/proxy/3000/hello`)).status).toBe(401);

    // A preview link works without an Authorization header, as a browser or curl uses it.
    const link = await sessions(`/${session.session_id}/previews`, "POST", { port: 3000 });
    expect(link.status).toBe(201);
    const linkUrl = new URL(link.body.url);
    expect(linkUrl.pathname).toBe(`/v1/projects/${project.id}/sessions/${session.session_id}/preview/3000/`);
    const grant = linkUrl.searchParams.get("svc_preview")!;
    linkUrl.pathname += "page%20one";
    linkUrl.search = `?q=a+b&svc_preview=${grant}`;
    const first = await fetch(linkUrl);
    expect(first.status).toBe(200);
    expect(await first.text()).toBe("preview /page%20one?q=a+b auth=none cookie=none");
    const cookie = first.headers.get("set-cookie")!;
    expect(cookie).toContain(`svc_preview=${grant}`);
    expect(cookie).toContain(`Path=${link.body.url.slice(api.url.length).split("?")[0]}`);
    expect(cookie).toContain("HttpOnly");
    expect(first.headers.get("connection")).toBe("close");
    // The cookie the first visit set carries the next requests; the sandbox never sees it.
    const base = `${api.url}/v1/projects/${project.id}/sessions/${session.session_id}/preview`;
    const next = await fetch(`${base}/3000/assets/app.js`, { headers: { cookie: `theme=dark; svc_preview=${grant}` } });
    expect(await next.text()).toBe("preview /assets/app.js auth=none cookie=theme=dark");
    const tampered = `${grant.slice(0, -2)}xx`;
    expect((await fetch(`${base}/3000/?svc_preview=${tampered}`)).status).toBe(401);
    expect((await fetch(`${base}/3001/`, { headers: { cookie: `svc_preview=${grant}` } })).status).toBe(401);
    expect((await sessions(`/${session.session_id}/previews`, "POST", { port: 70000 })).status).toBe(400);

    // The browser URL serves the app at the root of its own host, so root-relative paths resolve.
    const browser = new URL(link.body.browser_url);
    expect(browser.host).toBe(`3000-${session.session_id}.localhost:${new URL(api.url).port}`);
    const home = await viaLoopback(browser.href);
    expect(home.status).toBe(200);
    expect(home.body).toBe("preview / auth=none cookie=none");
    expect(home.headers["set-cookie"]?.[0]).toMatch(
      /^svc_preview=[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/,
    );
    const jar = { cookie: `svc_preview=${grant}` };
    expect((await viaLoopback(`${browser.origin}/@vite/client`, jar)).body).toBe(
      "preview /@vite/client auth=none cookie=none",
    );
    // Every path on a preview host is the app's, even one that looks like the API's.
    expect((await viaLoopback(`${browser.origin}/v1/health`, jar)).body).toBe(
      "preview /v1/health auth=none cookie=none",
    );
    expect((await viaLoopback(`${browser.origin}/`)).status).toBe(401);
    expect((await viaLoopback(`http://3001-${session.session_id}.localhost:${browser.port}/`, jar)).status).toBe(401);
    // Dev-server hot reload: a WebSocket upgrade on the preview host reaches the app with the cookie's user.
    const upgrade = (headers: string, path = "/hmr", host = browser.host) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(browser.port), "127.0.0.1");
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
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`,
        );
      });
    expect(await upgrade(`Cookie: svc_preview=${grant}\r\n`)).toContain("echo ping");
    expect(await upgrade("")).toMatch(/^HTTP\/1.1 401/);
    const pathBased = `${linkUrl.pathname.replace("page%20one", "")}hmr`;
    expect(await upgrade(`Cookie: svc_preview=${grant}\r\n`, pathBased, new URL(api.url).host)).toContain("echo ping");
    expect(await upgrade(`Authorization: Bearer ${user.token}\r\n`, pathBased, new URL(api.url).host)).toContain(
      "echo ping",
    );
  });

  it("keeps a browser's connection on the preview: pipelined requests answered in order, credentials and forged contexts never reaching the app, anything else answered by the API", async () => {
    const session = await previewedSession();
    const link = await sessions(`/${session.session_id}/previews`, "POST", { port: 3000 });
    const grant = new URL(link.body.url).searchParams.get("svc_preview")!;
    const base = new URL(link.body.url).pathname;
    const get = (path: string, headers: string) =>
      `GET ${path} HTTP/1.1\r\nHost: ${new URL(api.url).host}\r\n${headers}\r\n`;
    const answers = await pipelined(api.url, [
      get(`${base}a?x=1`, `Cookie: theme=dark; svc_preview=${grant}\r\nX-Svc-User-Context: forged\r\n`),
      get(`${base}b`, `Authorization: Bearer ${user.token}\r\n`),
      get(`${base}c`, `Cookie: svc_preview=${grant}\r\nX-Svc-User-Context: forged\r\nX-Svc-User-Context: again\r\n`),
      get(base.replace("/3000/", "/3001/"), `Cookie: svc_preview=${grant}\r\n`),
      get("/v1/health", ""),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 401, 200]);
    expect(answers[0]!.body).toBe("preview /a?x=1 auth=none cookie=theme=dark");
    expect(answers[1]!.body).toBe("preview /b auth=none cookie=none");
    expect(answers[2]!.body).toBe("preview /c auth=none cookie=none");
    expect(JSON.parse(answers[4]!.body).status).toBe("ok");
    // Another session is not served on a connection already previewing this one (here: none such).
    const other = `/v1/projects/${project.id}/sessions/00000000-0000-4000-8000-000000000000/preview/3000/`;
    const mixed = await pipelined(api.url, [
      get(`${base}d`, `Cookie: svc_preview=${grant}\r\n`),
      get(other, `Cookie: svc_preview=${grant}\r\n`),
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
