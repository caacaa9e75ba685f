import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, joinCluster } from "../orchestrator/cluster.ts";
import { createReconciler } from "../orchestrator/reconciler.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freePort } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { orchestratorFor, requireDocker } from "./support/docker.ts";

const MEMBER = new URL("./fixtures/cluster-member.ts", import.meta.url).pathname;

/** Another API process on the same database, as far as the cluster is concerned. */
async function startMember(databaseUrl: string): Promise<{ child: ChildProcess; instanceId: string; leads: boolean }> {
  const child = spawn(process.execPath, ["--import", "tsx", MEMBER], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve(out.split("\n")[0]!);
    });
    child.on("exit", (code) => reject(new Error(`cluster member exited with ${code}`)));
  });
  return { child, ...JSON.parse(line) };
}

describe("several API processes on one PostgreSQL database (real server, real processes)", () => {
  let db: TestDatabase;
  let api: TestApi;
  let here: Cluster;
  let project: { id: string };
  let user: Awaited<ReturnType<typeof seedUser>>;

  beforeAll(async () => {
    await requireDocker();
    db = await freshDatabase("postgres");
    const port = await freePort();
    api = await startApi(db.sql, { host: "0.0.0.0", port, orchestrator: orchestratorFor(port) });
    user = await seedUser(api.services);
    project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Replicated" } })).body;
  });
  afterAll(async () => {
    await here?.leave();
    await api?.close();
    await db?.drop();
  });

  const provisioningBy = async (provisioner: string) =>
    (
      await db.sql.query<{ session_id: string }>(
        `insert into project_sessions (account_id, project_id, status, branch, base_ref, agent_name, created_by, provisioner)
         values ($1, $2, 'provisioning', 'x', 'main', 'build', $3, $4) returning session_id`,
        [user.accountId, project.id, user.userId, provisioner],
      )
    )[0]!.session_id;
  const statusOf = async (sessionId: string) =>
    (
      await db.sql.query<{ status: string }>("select status from project_sessions where session_id = $1", [sessionId])
    )[0]!.status;

  it("lets one process lead, tells live processes from dead ones, and hands the lead over when the leader dies", async () => {
    const other = await startMember(db.url!);
    expect(other.leads).toBe(true);
    here = await joinCluster(db.sql, { instanceId: api.services.instanceId });
    expect(await here.lead()).toBe(false);
    expect(await here.isAlive(other.instanceId)).toBe(true);
    expect(await here.isAlive(randomUUID())).toBe(false);
    expect(await here.isAlive(null)).toBe(false);

    // The leader's reconciler leaves alone a session another live process is provisioning...
    const reconcile = createReconciler({
      driver: orchestratorFor(0).driver,
      records: api.services.sessionStore,
      provisioner: api.services.orchestrator!.provisioner,
      installationId: api.services.installationId,
      isAlive: here.isAlive,
      log: () => {},
    });
    const busy = await provisioningBy(other.instanceId);
    const orphaned = await provisioningBy(randomUUID());
    await reconcile();
    expect(await statusOf(busy)).toBe("provisioning");
    expect(await statusOf(orphaned)).toBe("failed");

    // ...and fails it once that process is killed outright, after taking over the lead.
    other.child.kill("SIGKILL");
    await new Promise((r) => other.child.once("exit", r));
    let leads = false;
    for (let i = 0; i < 50 && !leads; i++) {
      leads = await here.lead();
      if (!leads) await new Promise((r) => setTimeout(r, 100));
    }
    expect(leads).toBe(true);
    expect(await here.isAlive(other.instanceId)).toBe(false);
    await reconcile();
    expect(await statusOf(busy)).toBe("failed");

    // A process that joins later stands by while this one leads.
    const late = await startMember(db.url!);
    expect(late.leads).toBe(false);
    expect(await here.lead()).toBe(true);
    late.child.kill("SIGKILL");
  });
});
