import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinCluster } from "../orchestrator/cluster.ts";
import { call, seedUser, startApi } from "./support/api-server.ts";
import { svc } from "./support/cli.ts";
import { freshDatabase } from "./support/databases.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

const SECRET = "greeting-value-s3cret";
/**
 * A tiny HTTP app in the platform image, run from the repository's files: answers `<version.txt> <secret>` and logs
 * that it listens.
 */
const manifest = (extra = "") => `[project]
name = "apps"

[[apps]]
name = "web"
command = "node -e \\"console.log('listening ' + process.env.GREETING); require('http').createServer((q, s) => s.end(require('fs').readFileSync('version.txt', 'utf8') + ' ' + process.env.GREETING)).listen(process.env.PORT)\\""
port = 8080
env = ["GREETING"]
health_path = "/"
${extra}`;
/** The manifest and the file the app serves its version from. */
const appFiles = (version: string, extra = "") => ({ "svc.toml": manifest(extra), "version.txt": version });
/** Fails its one step, saying first what memory limit the step ran under (cgroup v2, or v1 as on this machine). */
const BROKEN_DOCKERFILE = [
  "ARG SVC_BASE_IMAGE",
  "FROM $SVC_BASE_IMAGE",
  "RUN echo compiling under $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) && exit 3",
  "",
].join("\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Deploy = { id: string; status: string; revision: string; trigger: string; error: string | null };

describe("apps: [[apps]] on the default branch -> local containers (real git, Docker, CLI)", () => {
  let sp: SandboxedProject;
  let repo: WorkRepo;
  let stopBackground: () => void;
  let cli: (args: string[], token?: string) => ReturnType<typeof svc>;
  let otherToken: string;
  const merges: string[] = [];

  const api = (method: string, path: string, body?: unknown, token = sp.user.token) =>
    call(sp.api.url, method, `/v1/projects/${sp.project.id}${path}`, { token, body });
  const deploys = async (): Promise<Deploy[]> => (await api("GET", "/apps/web/deploys")).body.deploys ?? [];
  const appHost = () => `web--${sp.project.id}.localhost:${new URL(sp.api.url).port}`;

  /** A request to the app's own origin, as a browser or curl with a Host header would send it. */
  function appRequest(
    path: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; body: string; setCookie: string[] }> {
    return new Promise((resolve, reject) => {
      const url = new URL(sp.api.url);
      const req = request(
        { host: url.hostname, port: url.port, path, headers: { host: appHost(), ...headers } },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (c) => {
            body += c;
          });
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body, setCookie: res.headers["set-cookie"] ?? [] }),
          );
        },
      );
      req.on("error", reject);
      req.end();
    });
  }
  const appGet = (token: string | undefined, path = "/") =>
    appRequest(path, token ? { authorization: `Bearer ${token}` } : {});
  const answer = async () => (await appGet(sp.user.token)).body;

  /** Pushes `files` on a new branch from main and opens a CR; returns its number. */
  async function openCr(branch: string, files: Record<string, string>): Promise<number> {
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout(branch, { create: true, from: "origin/main" });
    await repo.commit(branch, files);
    await repo.pushed(branch);
    const cr = await api("POST", "/change-requests", { title: branch, head_ref: branch });
    expect(cr.status).toBe(201);
    return cr.body.number;
  }
  async function merge(number: number): Promise<string> {
    const res = await api("POST", `/change-requests/${number}/merge`, {});
    expect(res.status).toBe(200);
    merges.push(res.body.merge_commit_sha);
    return res.body.merge_commit_sha;
  }

  beforeAll(async () => {
    sp = await startSandboxedProject(
      "Apps",
      {},
      {
        apps: { provider: "local", healthTimeoutMs: 30_000, resyncMs: 2_000 },
      },
    );
    const cluster = await joinCluster(sp.db.sql, { instanceId: sp.api.services.instanceId });
    stopBackground = sp.api.services.startBackgroundWork({ cluster, idleMs: 3_600_000 });
    repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    expect((await api("PUT", "/secrets", { secrets: { GREETING: SECRET } })).status).toBe(200);
    const other = (await call(sp.api.url, "POST", "/v1/projects", { token: sp.user.token, body: { name: "Other" } }))
      .body;
    otherToken = (await call(sp.api.url, "POST", `/v1/projects/${other.id}/cli-token`, { token: sp.user.token })).body
      .token;
    cli = (args, token = sp.user.token) => svc(args, { env: { ...sp.cliEnv, SVC_CLI_TOKEN: token } });
  }, 120_000);
  afterAll(async () => {
    stopBackground?.();
    await sp?.close();
  });

  it("an open CR deploys nothing; merged, the app deploys and answers on its own URL", async () => {
    const number = await openCr("add-app", appFiles("v1"));
    await sleep(1500);
    expect((await api("GET", "/apps")).body).toEqual({ apps: [], manifest_error: null });
    expect(
      await sp.docker.listContainers({
        all: true,
        filters: { label: [`dev.svc.project=${sp.project.id}`, "dev.svc.app"] },
      }),
    ).toEqual([]);

    const sha = await merge(number);
    await waitFor("web live", async () => (await api("GET", "/apps/web")).body.status === "live", {
      timeoutMs: 240_000,
    });
    expect(await answer()).toBe(`v1 ${SECRET}`);

    const ls = await cli(["apps", "ls", "--json"]);
    expect(ls.code).toBe(0);
    expect(JSON.parse(ls.stdout)).toEqual([
      expect.objectContaining({ name: "web", status: "live", live_revision: sha, url: `http://${appHost()}` }),
    ]);
    const bare = await cli(["apps"]);
    expect(bare.code).toBe(0);
    expect(bare.stdout).toContain(`http://${appHost()}`);
    const info = JSON.parse((await cli(["apps", "info", "web", "--json"])).stdout);
    expect(info.spec).toMatchObject({ name: "web", port: 8080, build: ".svc/Dockerfile", health_path: "/" });
    expect(info.deploys).toEqual([expect.objectContaining({ status: "live", revision: sha, trigger: "merge" })]);
  }, 300_000);

  it("a command change in an open CR changes nothing; after the merge it redeploys", async () => {
    const number = await openCr("app-v2", appFiles("v2"));
    await sleep(1500);
    expect((await deploys()).length).toBe(1);
    expect(await answer()).toBe(`v1 ${SECRET}`);

    const sha = await merge(number);
    await waitFor("v2 answering", async () => (await answer()) === `v2 ${SECRET}`, { timeoutMs: 60_000 });
    const history = await waitFor(
      "v1 superseded",
      async () => {
        const d = await deploys();
        return d[1]?.status === "superseded" && d;
      },
      { timeoutMs: 60_000 },
    );
    expect(history[0]).toMatchObject({ status: "live", revision: sha });
    // The old container goes once the new one serves: one app container is left.
    await waitFor(
      "the old container removed",
      async () => {
        const running = await sp.docker.listContainers({
          all: true,
          filters: { label: ["dev.svc.app=web", `dev.svc.project=${sp.project.id}`] },
        });
        return running.length === 1;
      },
      { timeoutMs: 60_000 },
    );
  }, 120_000);

  it("a broken build fails with its log (its step fenced like the app) and keeps the old revision serving; --wait exits 1", async () => {
    const number = await openCr("break-app", {
      ...appFiles("v3", 'build = "broken.Dockerfile"'),
      "broken.Dockerfile": BROKEN_DOCKERFILE,
    });
    await merge(number);
    const failed = await waitFor(
      "the failed deploy",
      async () => {
        const d = (await deploys())[0];
        return d?.status === "failed" && d;
      },
      { timeoutMs: 60_000 },
    );
    expect(failed.error).toContain("broken.Dockerfile");
    // The build ran under the app's own memory limit (the stack's sandbox limits), not the engine's unlimited default.
    expect(failed.error).toContain(`compiling under ${1024 * 1024 * 1024}`);
    expect(await answer()).toBe(`v2 ${SECRET}`);
    // The next ticks do not retry a failed key.
    await sleep(1500);
    expect((await deploys()).length).toBe(3);

    // `apps info` shows the newest failure's whole reason, the failing step's output included.
    const shown = await cli(["apps", "info", "web"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`deploy ${failed.id} failed:`);
    expect(shown.stdout).toContain(`compiling under ${1024 * 1024 * 1024}`);

    const again = await cli(["apps", "redeploy", "web", "--wait"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("failed");
    expect(again.stderr).toContain(`compiling under ${1024 * 1024 * 1024}`);
    expect(await answer()).toBe(`v2 ${SECRET}`);
  }, 120_000);

  it("rollback serves the previous revision and is not undone by the next sync", async () => {
    const rb = await cli(["apps", "rollback", "web", "--wait", "--json"]);
    expect(rb.stderr).not.toContain("error");
    expect(rb.code).toBe(0);
    expect(JSON.parse(rb.stdout)).toMatchObject({ status: "live", trigger: "rollback", revision: merges[0] });
    expect(await answer()).toBe(`v1 ${SECRET}`);
    await sp.api.services.orchestrator!.apps!.sync(sp.project.id);
    await sleep(500);
    expect((await deploys())[0]).toMatchObject({ trigger: "rollback", status: "live" });
    expect(await answer()).toBe(`v1 ${SECRET}`);
  }, 120_000);

  it("a live app whose container vanished is re-created by the reconciler at the same revision", async () => {
    const live = (await deploys())[0]!;
    const [container] = await sp.docker.listContainers({ filters: { label: [`dev.svc.deploy=${live.id}`] } });
    await sp.docker.getContainer(container!.Id).remove({ force: true });
    const history = await waitFor(
      "a reconcile deploy live",
      async () => {
        const d = await deploys();
        return d[0]?.trigger === "reconcile" && d[0].status === "live" && d;
      },
      { timeoutMs: 30_000 },
    );
    expect(history[0]!.revision).toBe(live.revision);
    expect(history.find((d) => d.id === live.id)?.status).toBe("stopped");
    expect(await answer()).toBe(`v1 ${SECRET}`);
  }, 60_000);

  it("logs mask secrets; unknown apps and bad flags fail; other projects' tokens get nothing", async () => {
    const logs = await cli(["apps", "logs", "web", "-n", "5"]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain("listening ***");
    expect(logs.stdout).not.toContain(SECRET);

    const unknown = await cli(["apps", "info", "nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no app 'nope'");
    expect((await api("GET", "/apps/nope")).body.code).toBe("APP_NOT_FOUND");
    expect((await cli(["apps", "rollback", "nope"])).code).toBe(1);
    expect((await cli(["apps", "logs", "web", "-n", "zero"])).code).toBe(2);
    expect((await cli(["apps", "ls", "--bogus"])).code).toBe(2);

    for (const [method, path] of [
      ["GET", "/apps"],
      ["GET", "/apps/web"],
      ["POST", "/apps/web/redeploy"],
      ["POST", "/apps/web/rollback"],
    ] as const) {
      expect((await api(method, path, method === "POST" ? {} : undefined, otherToken)).status, path).toBe(403);
    }
    expect((await appGet(otherToken)).status).toBe(403);
    expect((await appGet(undefined)).status).toBe(401);
  }, 60_000);

  it("apps open prints a link a browser uses without a token; its cookie carries it; forged links get 401", async () => {
    const opened = await cli(["apps", "open", "web"]);
    expect(opened.code).toBe(0);
    const link = new URL(opened.stdout.trim());
    expect(link.host).toBe(appHost());
    const first = await appRequest(link.pathname + link.search, {});
    expect(first).toMatchObject({ status: 200, body: `v1 ${SECRET}` });
    const cookie = first.setCookie.find((c) => c.startsWith("svc_app="))!;
    expect(cookie).toMatch(/HttpOnly/);
    const again = await appRequest("/other?x=1", { cookie: cookie.split(";")[0]! });
    expect(again).toMatchObject({ status: 200, body: `v1 ${SECRET}` });

    const grant = link.searchParams.get("svc_app")!;
    const forged = `${grant.split(".")[0]}.${"A".repeat(43)}`;
    expect((await appRequest(`/?svc_app=${forged}`, {})).status).toBe(401);
    // A link for one project's app opens nothing of another's: the grant names the project.
    const other = await cli(["apps", "open", "web"], otherToken);
    expect(other.code).toBe(1);
    expect(other.stdout).toBe("");
  }, 60_000);
});

describe("apps with SVC_APP_PROVIDER=none", () => {
  it("lists the manifest's apps as disabled and refuses redeploy and rollback naming the setting", async () => {
    const db = await freshDatabase("pglite");
    const api = await startApi(db.sql, { apps: { provider: "none" } });
    try {
      const user = await seedUser(api.services);
      const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Off" } })).body;
      const repo = await workRepo(authedUrl(project.repo_url, user.token));
      await repo.commit("apps", appFiles("v1"));
      await repo.pushed("main");
      const at = (path: string, method = "GET") =>
        call(api.url, method, `/v1/projects/${project.id}/apps${path}`, {
          token: user.token,
          body: method === "POST" ? {} : undefined,
        });
      expect((await at("")).body.apps).toEqual([
        expect.objectContaining({ name: "web", status: "disabled", last_deploy: null }),
      ]);
      for (const verb of ["redeploy", "rollback"]) {
        const res = await at(`/web/${verb}`, "POST");
        expect(res.status).toBe(409);
        expect(res.body).toMatchObject({ code: "APPS_DISABLED" });
        expect(res.body.error).toContain("SVC_APP_PROVIDER");
      }
    } finally {
      await api.close();
      await db.drop();
    }
  }, 60_000);
});
