import { mkdtempSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runHttpBackend } from "../../api/git/http-backend.ts";
import { git } from "../../api/git/run.ts";
import { workRepo } from "./git-fixture.ts";

export type GitServer = {
  /** `http://127.0.0.1:<port>`: a repository `<root>/x.git` is at `${url}/x.git`. */
  url: string;
  close(): Promise<void>;
};

/** One smart-HTTP request for the bare repositories under `root`, fetch or push, as `remoteUser`. */
export function serveGitRequest(req: IncomingMessage, res: ServerResponse, root: string, remoteUser: string): void {
  const url = new URL(req.url ?? "/", "http://x");
  void runHttpBackend(
    {
      method: req.method ?? "GET",
      pathInfo: decodeURIComponent(url.pathname),
      query: url.search.slice(1),
      headers: req.headers,
      body: req.method === "POST" ? req : undefined,
      remoteUser,
      remoteAddr: req.socket.remoteAddress ?? "",
    },
    res,
    { GIT_PROJECT_ROOT: root, GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.receivepack", GIT_CONFIG_VALUE_0: "true" },
  );
}

/**
 * The bare repositories under `root` on real git smart HTTP (`git http-backend`), fetch and push: a stand-in for
 * an external git host. With `token`, a private one: every request needs Basic auth with it as the password, as
 * GitHub takes a token. Listens on loopback unless told otherwise.
 */
export async function serveGitRepos(root: string, options: { host?: string; token?: string } = {}): Promise<GitServer> {
  const server = createServer((req, res) => {
    if (options.token && !basicPassword(req.headers.authorization)?.endsWith(`:${options.token}`)) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="private"' }).end("authentication required\n");
      return;
    }
    serveGitRequest(req, res, root, "external");
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const basicPassword = (header: string | undefined) =>
  header?.startsWith("Basic ") ? Buffer.from(header.slice(6), "base64").toString("utf8") : undefined;

/**
 * An external git host with one empty bare repository on it: `origin` is its directory (tests read its refs),
 * `url` its address on the host (what a project registers), `dev` a developer's clone of it (on disk, so it
 * needs no token even when the host does).
 */
export async function hostedRepository(name: string, options: { defaultBranch: string; token?: string }) {
  const hosted = mkdtempSync(join(tmpdir(), "svc-origin-"));
  const server = await serveGitRepos(hosted, { token: options.token });
  const origin = join(hosted, name);
  await git(["init", "--bare", "-q", `--initial-branch=${options.defaultBranch}`, origin]);
  const dev = await workRepo(origin, options);
  return { server, origin, url: `${server.url}/${encodeURIComponent(name)}`, dev };
}
