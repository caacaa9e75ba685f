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

  it("serves previews of a sandbox port through the API with a freshly signed user context", async () => {
    const session = (await sessions()).body.sessions.find((s: { status: string }) => s.status === "running");
    const [container] = await containerOf(session.session_id);
    const app = await docker.getContainer(container!.Id).exec({
      Cmd: [
        "/opt/svc/bin/node",
        "-e",
        "require('http').createServer((q,s)=>s.end('preview '+q.url+' auth='+(q.headers.authorization||'none')+' cookie='+(q.headers.cookie||'none'))).on('upgrade',(q,k)=>{k.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n');k.on('data',d=>k.write('echo '+d))}).listen(3000)",
      ],
    });
    await app.start({ Detach: true });
    const url = `/${session.session_id}/preview/3000/hello?x=1`;
    let res = await sessions(url);
    for (let i = 0; i < 50 && res.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      res = await sessions(url);
    }
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
});
