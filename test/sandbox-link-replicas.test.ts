import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../api/app.ts";
import { openSql, type Sql } from "../api/db/sql.ts";
import { createEdge } from "../api/edge/server.ts";
import { createUpstreams } from "../api/edge/upstreams.ts";
import { createCipher } from "../api/secrets/cipher.ts";
import type { Services } from "../api/services.ts";
import { SANDBOX_SERVICE_KEY_CONTEXT } from "../api/sessions/service.ts";
import { SPARES } from "../daemon/link-spares.ts";
import { sandboxReach } from "../orchestrator/provisioning/sandbox-reach.ts";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { EXEC_UPGRADE } from "../protocol/sandbox-access.ts";
import { SANDBOX_LINK_PATH, SANDBOX_SPARE_UPGRADE } from "../protocol/sandbox-link.ts";
import { SERVICE_KEY_PREFIX } from "../protocol/token.ts";
import { call, seedUser, TEST_REPO_ALLOWED_HOSTS } from "./support/api-server.ts";
import { cliHome, svc } from "./support/cli.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { dialLink } from "./support/link-dial.ts";
import { noSandboxes, settings } from "./support/no-sandboxes.ts";
import { waitFor } from "./support/wait.ts";

/** A stand-in agent runtime: idle, no conversation busy; exits with its daemon. */
const AGENT = `
const parent = process.ppid;
setInterval(() => { try { process.kill(parent, 0); } catch { process.exit(0); } }, 200);
require("node:http").createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(req.url.startsWith("/session/status") ? "{}" : "[]");
}).listen(Number(process.env.SVC_AGENT_PORT), "127.0.0.1");
`;

/** The two replicas' addresses, as the edge resolves the API's name to them: both on loopback, on one port. */
const ADDRESSES = ["127.0.0.2", "127.0.0.3"] as const;

/** `links`: the link upgrades it got; `spares`: the spare connections; `execs`: the exec upgrades (`svc sessions exec`). */
type Replica = {
  url: string;
  services: Services;
  links: string[];
  spares: string[];
  execs: string[];
  close(): Promise<void>;
};

/**
 * Two API processes' worth of the real API (each its own HTTP server, connection pool and link registry) on one
 * PostgreSQL database and one data directory, listening on 127.0.0.2 and 127.0.0.3 on the same port, with the real
 * edge in front resolving the replicas' name to those two addresses, as a Swarm stack's `tasks.api` does. Each
 * replica's bridges listen on its own address (SVC_LINK_BRIDGE_HOST). The same port on 127.0.0.1 is a trap: an edge
 * that followed a link's hint anywhere would reach it.
 */
describe("sandbox links across API replicas: the edge follows a link's hint to its replica, the row says where it is", {
  timeout: 30_000,
}, () => {
  let db: TestDatabase;
  let otherSql: Sql;
  let edge: Server;
  let edgeUrl: string;
  let trap: Server;
  let trapped = 0;
  const replicas: Replica[] = [];
  const daemons: TestDaemon[] = [];
  const secretsKey = randomBytes(32).toString("base64");
  const dataDir = mkdtempSync(join(tmpdir(), "svc-replicas-"));
  let owner: Awaited<ReturnType<typeof seedUser>>;
  let projectId: string;
  /** The session of the first test, its sandbox linked to API 1. */
  let linkedSession = "";

  async function startReplica(sql: Sql, host: string, port: number): Promise<Replica> {
    const url = `http://${host}:${port}`;
    const { app, services } = await buildApp({
      sql,
      dataDir,
      publicUrl: url,
      logLevel: process.env.SVC_TEST_LOG_LEVEL ?? "error",
      secretsKey,
      repoAllowedHosts: TEST_REPO_ALLOWED_HOSTS,
      linkBridgeHost: host,
      orchestrator: {
        driver: noSandboxes,
        settings: { ...settings, sandboxLink: "dial-out", sandboxApiOrigin: edgeUrl },
        root: process.cwd(),
        baseImage: "none",
      },
    });
    // Which replica each link or exec upgrade reached, with the URL it asked for.
    const links: string[] = [];
    const spares: string[] = [];
    const execs: string[] = [];
    app.server.on("upgrade", (req) => {
      if (req.url?.startsWith(SANDBOX_LINK_PATH))
        (req.headers.upgrade === SANDBOX_SPARE_UPGRADE ? spares : links).push(req.url);
      if (req.headers.upgrade === EXEC_UPGRADE) execs.push(req.url ?? "");
    });
    await app.listen({ port, host });
    return { url, services, links, spares, execs, close: () => app.close() };
  }

  /** The real daemon, dialing the edge at the link URL `reach` makes: what a replica puts in a sandbox's env. */
  async function daemonDialing(linkUrl: string, serviceKey: string): Promise<TestDaemon> {
    const daemon = await startDaemon({
      serviceKey,
      sessionId: randomUUID(),
      agentCommand: [process.execPath, "-e", AGENT],
      env: { SVC_LINK_URL: linkUrl },
      stdio: "ignore",
    });
    daemons.push(daemon);
    return daemon;
  }

  /** The link URL a sandbox made by `replica` gets (the provisioner's and the warm pool's `reach.linkUrl`). */
  const linkUrlOf = (replica: Replica) =>
    sandboxReach("dial-out", edgeUrl, replica.services.sandboxLinks).linkUrl as string;

  /** A session row and its sandbox's, as the provisioner writes them; the sandbox's key sealed as it seals it. */
  async function seedSandbox(
    status: "provisioning" | "active",
    fields: { sandboxId?: string; serviceKey?: string; url?: string } = {},
  ) {
    const sessionId = randomUUID();
    const serviceKey = fields.serviceKey ?? newSecret(SERVICE_KEY_PREFIX);
    await db.sql.query(
      `insert into project_sessions (session_id, account_id, project_id, status, branch, base_ref, agent_name,
         created_by)
       values ($1, $2, $3, $4, $1, 'main', 'build', $5)`,
      [sessionId, owner.accountId, projectId, status === "active" ? "running" : "provisioning", owner.userId],
    );
    const [row] = await db.sql.query<{ sandbox_id: string }>(
      `insert into session_sandboxes (sandbox_id, session_id, project_id, status, service_key_hash, service_key_enc, url)
       values (coalesce($1::uuid, gen_random_uuid()), $2, $3, $4, $5, $6, $7) returning sandbox_id`,
      [
        fields.sandboxId ?? null,
        sessionId,
        projectId,
        status,
        hashSecret(serviceKey),
        createCipher(secretsKey).encrypt(serviceKey, SANDBOX_SERVICE_KEY_CONTEXT),
        fields.url ?? null,
      ],
    );
    return { sessionId, sandboxId: row!.sandbox_id, serviceKey };
  }

  beforeAll(async () => {
    db = await freshDatabase("postgres");
    otherSql = await openSql({ databaseUrl: db.url! });
    trap = createServer((_req, res) => res.end());
    trap.on("connection", () => {
      trapped += 1;
    });
    await new Promise<void>((r) => trap.listen(0, "127.0.0.1", r));
    const port = (trap.address() as AddressInfo).port;
    edge = createEdge({
      upstreams: createUpstreams("api.replicas.test", port, async () =>
        ADDRESSES.map((address) => ({ address, family: 4 })),
      ),
    });
    await new Promise<void>((r) => edge.listen(0, "127.0.0.1", r));
    edgeUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    replicas.push(await startReplica(db.sql, ADDRESSES[0], port), await startReplica(otherSql, ADDRESSES[1], port));
    owner = await seedUser(replicas[0]!.services, "replicas");
    const created = await call(edgeUrl, "POST", "/v1/projects", { token: owner.token, body: { name: "replicas" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    projectId = created.body.id;
  });
  afterAll(async () => {
    for (const daemon of daemons) daemon.child.kill("SIGKILL");
    for (const replica of replicas) await replica.close();
    edge?.close();
    trap?.close();
    await otherSql?.close();
    await db?.drop();
  });

  it("a sandbox made by API 1 links to API 1 through the edge; API 2 reaches it through the bridge URL in its row", async () => {
    const [api1, api2] = replicas as [Replica, Replica];
    // A warm-pool member: no row yet, its key announced to API 1 alone, so API 2 would refuse its link.
    const sandboxId = randomUUID();
    const serviceKey = newSecret(SERVICE_KEY_PREFIX);
    api1.services.sandboxLinks.expect(hashSecret(serviceKey), sandboxId);
    const linkUrl = linkUrlOf(api1);
    expect(linkUrl).toBe(`${edgeUrl.replace("http:", "ws:")}${SANDBOX_LINK_PATH}?replica=127.0.0.2`);
    await daemonDialing(linkUrl, serviceKey);

    const endpoint = await api1.services.sandboxLinks.waitFor(sandboxId, 15_000);
    // The bridge is on API 1's own address, where API 2 reaches it; not on loopback's 127.0.0.1.
    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.2:\d+$/);
    expect(api1.links).toEqual([`${SANDBOX_LINK_PATH}?replica=127.0.0.2`]);
    expect(api2.links).toEqual([]);
    // Its spare connections follow the same hint, to the replica that holds its link.
    await waitFor("the daemon's spares", async () => api1.spares.length >= SPARES || undefined);
    expect(new Set(api1.spares)).toEqual(new Set([`${SANDBOX_LINK_PATH}?replica=127.0.0.2`]));
    expect(api2.spares).toEqual([]);
    expect(api2.services.sandboxLinks.endpoint(sandboxId)).toBeUndefined();

    // Claimed by a session: its rows name the sandbox at API 1's bridge, as the provisioner writes them.
    const { sessionId } = await seedSandbox("active", { sandboxId, serviceKey, url: endpoint });
    linkedSession = sessionId;
    const abort = await waitFor("API 2 to reach the sandbox's agent", async () => {
      const res = await call(api2.url, "POST", `/v1/projects/${projectId}/sessions/${sessionId}/abort`, {
        token: owner.token,
      });
      // The agent runtime is still starting: the daemon said so, through the link.
      return res.body?.code === "SESSION_NOT_RUNNING" ? undefined : res;
    });
    expect(abort.status, JSON.stringify(abort.body)).toBe(200);
    expect(abort.body).toEqual({ aborted: [] });
  });

  it("a replica waiting for a link that reached another one finds it through the row, and reaches the sandbox there", async () => {
    const [api1, api2] = replicas as [Replica, Replica];
    // Made by API 2, whose hint the edge could not follow (say its replica list was older than API 2): it dials API 1.
    const { sandboxId, serviceKey } = await seedSandbox("provisioning");
    const waiting = api2.services.sandboxLinks.waitFor(sandboxId, 15_000);
    await daemonDialing(linkUrlOf(api1), serviceKey);

    const endpoint = await waiting;
    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.2:\d+$/);
    expect(endpoint).toBe(api1.services.sandboxLinks.endpoint(sandboxId));
    expect(api2.services.sandboxLinks.endpoint(sandboxId)).toBeUndefined();
    const health = await fetch(`${endpoint}/svc/health`);
    expect(((await health.json()) as { status: string }).status).toBe("ok");
  });

  it("a link with no hint, or one naming no replica, goes to a replica and never to the address it names", async () => {
    const [api1, api2] = replicas as [Replica, Replica];
    // A live row holds the key: whichever replica a dial reaches accepts it.
    const { serviceKey } = await seedSandbox("active");
    const port = new URL(api1.url).port;
    const dials = async (query: string) => {
      const before = [api1.links.length, api2.links.length];
      for (let i = 0; i < 4; i++)
        expect(await dialLink(edgeUrl, { authorization: `Bearer ${serviceKey}` }, query)).toBe(101);
      return [api1.links.length - before[0]!, api2.links.length - before[1]!];
    };

    expect(await dials("?replica=127.0.0.3")).toEqual([0, 4]);
    expect(await dials("?replica=127.0.0.2")).toEqual([4, 0]);
    // Spread over both, as every other request is.
    expect(await dials("")).toEqual([2, 2]);
    for (const hint of ["127.0.0.1", `127.0.0.1:${port}`, "127.0.0.1:1", "169.254.169.254", "localhost"]) {
      const [first, second] = await dials(`?replica=${encodeURIComponent(hint)}`);
      expect(first! + second!, hint).toBe(4);
    }
    expect(trapped).toBe(0);
  });

  it("svc sessions exec through the edge (an upgrade that is no WebSocket) reaches the sandbox from either replica", async () => {
    const [api1, api2] = replicas as [Replica, Replica];
    expect(linkedSession, "the first test's session").not.toBe("");
    const env = {
      ...cliHome().env,
      SVC_API_URL: `${edgeUrl}/v1`,
      SVC_CLI_TOKEN: owner.token,
      SVC_PROJECT_ID: projectId,
    };
    const before = [api1.execs.length, api2.execs.length];
    // The edge takes the replicas in turn: of three execs, one request apart between the last two, two reach
    // different replicas whatever number of requests one exec makes.
    for (const extra of [false, false, true]) {
      if (extra) expect((await fetch(`${edgeUrl}/v1/health`)).status).toBe(200);
      const exec = await svc(["sessions", "exec", linkedSession, "--", "sh", "-c", "echo through the edge; exit 3"], {
        env,
      });
      expect(exec, exec.stderr).toMatchObject({ code: 3, stdout: "through the edge" });
    }
    expect(api1.execs.length - before[0]!).toBeGreaterThan(0);
    expect(api2.execs.length - before[1]!).toBeGreaterThan(0);
  });
});
