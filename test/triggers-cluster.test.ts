import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, joinCluster } from "../orchestrator/cluster.ts";
import type { TriggerPort } from "../orchestrator/ports.ts";
import { createTriggerScheduler } from "../orchestrator/triggers/scheduler.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { freePort } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import {
  orchestratorFor,
  removeInstallationNetworks,
  removeProjectContainers,
  requireDocker,
} from "./support/docker.ts";
import { authedUrl, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A 6-field UTC expression matching exactly one second of the day: `at`. */
const onlyAt = (at: Date) => `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;

describe("trigger firings with two API processes on one PostgreSQL (real server, cron, git, Docker)", () => {
  let db: TestDatabase;
  let a: TestApi;
  let b: TestApi;
  let project: { id: string; repo_url: string };
  let user: Awaited<ReturnType<typeof seedUser>>;

  beforeAll(async () => {
    await requireDocker();
    db = await freshDatabase("postgres");
    const [portA, portB] = [await freePort(), await freePort()];
    a = await startApi(db.sql, { host: "0.0.0.0", port: portA, orchestrator: orchestratorFor(portA) });
    b = await startApi(db.sql, {
      host: "0.0.0.0",
      port: portB,
      orchestrator: orchestratorFor(portB),
      dataDir: a.dataDir,
    });
    user = await seedUser(a.services);
    project = (await call(a.url, "POST", "/v1/projects", { token: user.token, body: { name: "Cron" } })).body;
  }, 300_000);
  afterAll(async () => {
    const docker = await requireDocker();
    await removeProjectContainers(docker, project?.id);
    await removeInstallationNetworks(docker, a.services.installationId);
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  const sessionsOf = async (slug: string) =>
    db.sql.query<{ session_id: string }>(
      "select session_id from project_sessions where project_id = $1 and trigger_slug = $2",
      [project.id, slug],
    );
  const firingsOf = async (slug: string) =>
    db.sql.query("select scheduled_at from trigger_firings where project_id = $1 and slug = $2", [project.id, slug]);

  it("fires each instant once: only the leader schedules, racing schedulers share the claim, a restart catches up one missed instant", async () => {
    const once = new Date(Math.ceil((Date.now() + 8000) / 1000) * 1000);
    const later = new Date(once.getTime() + 3000);
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.commit("triggers", {
      "svc.toml": [
        ["once", once],
        ["later", later],
      ]
        .map(
          ([slug, at]) =>
            `[[triggers]]\nslug = "${slug}"\nschedule = "${onlyAt(at as Date)}"\ntimezone = "UTC"\nprompt = "${slug}"\n`,
        )
        .join("\n"),
    });
    await repo.pushed("main");

    // Both processes run their background work; one leads and alone schedules.
    const clusters: Record<string, Cluster> = {
      a: await joinCluster(db.sql, { instanceId: a.services.instanceId }),
      b: await joinCluster(db.sql, { instanceId: b.services.instanceId }),
    };
    const stops = {
      a: a.services.startBackgroundWork({ cluster: clusters.a!, idleMs: 3_600_000 }),
      b: b.services.startBackgroundWork({ cluster: clusters.b!, idleMs: 3_600_000 }),
    };
    const slugs = (api: TestApi) => api.services.triggerScheduler.scheduledSlugs(project.id);
    // A scheduler records its triggers one by one (each awaits the database): wait for both, not the first.
    for (let i = 0; i < 100 && slugs(a).length + slugs(b).length < 2; i++) await sleep(50);
    const [leader, standby] = slugs(a).length > 0 ? (["a", "b"] as const) : (["b", "a"] as const);
    expect(slugs({ a, b }[leader]).sort()).toEqual(["later", "once"]);
    expect(slugs({ a, b }[standby])).toEqual([]);

    // Two more schedulers that both believe they lead race the leader for the same instant.
    let attempts = 0;
    let wins = 0;
    const racing = [a, b].map((api) => {
      const port: TriggerPort = {
        ...api.services.triggerPort,
        claim: async (...args) => {
          attempts++;
          const won = await api.services.triggerPort.claim(...args);
          if (won) wins++;
          return won;
        },
      };
      return createTriggerScheduler({ port, log: () => {} });
    });
    for (const s of racing) await s.start(async () => true);
    while (Date.now() < once.getTime() + 1000) await sleep(100);
    for (const s of racing) s.stop();
    // Everything stops before `later`: nobody runs at that instant.
    stops.a();
    stops.b();
    expect(Date.now()).toBeLessThan(later.getTime());
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect(wins).toBeLessThanOrEqual(1);
    expect(await sessionsOf("once")).toHaveLength(1);
    expect(await firingsOf("once")).toHaveLength(1);

    // The leader goes away; after `later` passed, the standby takes over and fires that one missed instant, once.
    await clusters[leader]!.leave();
    while (Date.now() < later.getTime() + 1500) await sleep(100);
    expect(await firingsOf("later")).toHaveLength(0);
    const api2 = { a, b }[standby];
    const stop2 = api2.services.startBackgroundWork({ cluster: clusters[standby]!, idleMs: 3_600_000 });
    for (let i = 0; i < 100 && (await sessionsOf("later")).length === 0; i++) await sleep(50);
    await sleep(1000);
    stop2();
    expect(await sessionsOf("later")).toHaveLength(1);
    expect(await sessionsOf("once")).toHaveLength(1);

    // Another restart replays nothing: both instants are claimed.
    const again = createTriggerScheduler({ port: a.services.triggerPort, log: () => {} });
    await again.start(async () => true);
    await sleep(1500);
    again.stop();
    expect(await firingsOf("later")).toHaveLength(1);
    expect(await firingsOf("once")).toHaveLength(1);
    const delays = await db.sql.query<{ slug: string; claim: number; session: number }>(
      `select f.slug, extract(epoch from (f.created_at - f.scheduled_at)) * 1000 as claim,
         extract(epoch from (s.created_at - f.scheduled_at)) * 1000 as session
       from trigger_firings f join project_sessions s on s.session_id = f.session_id where f.project_id = $1`,
      [project.id],
    );
    writeFileSync("/tmp/svc-trigger-timings-cluster.json", JSON.stringify(delays));
    await clusters[standby]!.leave();
    for (const s of [...(await sessionsOf("once")), ...(await sessionsOf("later"))])
      await call(a.url, "POST", `/v1/projects/${project.id}/sessions/${s.session_id}/stop`, {
        token: user.token,
        body: {},
      });
  }, 120_000);

  it("a CR merged by the standby process reaches the leader's jobs within a lead check; a push to main is refused there", async () => {
    const clusters = {
      a: await joinCluster(db.sql, { instanceId: a.services.instanceId }),
      b: await joinCluster(db.sql, { instanceId: b.services.instanceId }),
    };
    const stops = [a, b].map((api, i) =>
      api.services.startBackgroundWork({ cluster: i === 0 ? clusters.a : clusters.b, idleMs: 3_600_000 }),
    );
    try {
      const slugs = (api: TestApi) => api.services.triggerScheduler.scheduledSlugs(project.id);
      for (let i = 0; i < 100 && slugs(a).length + slugs(b).length === 0; i++) await sleep(50);
      const [leader, standby] = slugs(a).length > 0 ? [a, b] : [b, a];
      expect(slugs(standby)).toEqual([]);
      const repo = await workRepo(authedUrl(project.repo_url, user.token));
      await repo.git(["fetch", "-q", "origin", "main"]);
      await repo.checkout("more", { create: true, from: "origin/main" });
      const current = (await repo.git(["show", "origin/main:svc.toml"])).stdout;
      await repo.commit("more", {
        "svc.toml": `${current}\n[[triggers]]\nslug = "yearly"\nschedule = "0 0 1 1 *"\nprompt = "y"\n`,
      });
      await repo.pushed("more");
      const opts = { token: user.token, body: { title: "more", head_ref: "more" } };
      const cr = await call(standby.url, "POST", `/v1/projects/${project.id}/change-requests`, opts);
      const merged = await call(
        standby.url,
        "POST",
        `/v1/projects/${project.id}/change-requests/${cr.body.number}/merge`,
        {
          token: user.token,
          body: {},
        },
      );
      expect(merged.status).toBe(200);
      const at = Date.now();
      for (let i = 0; i < 200 && !slugs(leader).includes("yearly"); i++) await sleep(50);
      expect(slugs(leader)).toContain("yearly");
      writeFileSync("/tmp/svc-trigger-standby-merge-ms.json", JSON.stringify(Date.now() - at));

      // A person's direct (fast-forward) push to main through the standby's git endpoint: refused, main stays.
      const viaStandby = authedUrl(`${standby.url}/git/${project.id}.git`, user.token);
      await repo.git(["fetch", "-q", viaStandby, "main"]);
      await repo.git(["checkout", "-q", "-B", "direct", "FETCH_HEAD"]);
      const mainTip = await repo.sha("HEAD");
      await repo.commit("direct", { "svc.toml": "" });
      const direct = await repo.git(["push", "-q", viaStandby, "HEAD:main"], { reject: false });
      expect(direct.code).not.toBe(0);
      expect(direct.stderr).toMatch(/svc cr open/);
      await repo.git(["fetch", "-q", viaStandby, "main"]);
      expect(await repo.sha("FETCH_HEAD")).toBe(mainTip);
    } finally {
      for (const stop of stops) stop();
      await clusters.a.leave();
      await clusters.b.leave();
    }
  }, 60_000);

  it("over ten seconds of a per-second trigger, two processes and two rogue schedulers claim each instant once", async () => {
    const repo = await workRepo(authedUrl(project.repo_url, user.token));
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("every-second", { create: true, from: "origin/main" });
    await repo.commit("every second", {
      "svc.toml": '[[triggers]]\nslug = "tick"\nschedule = "* * * * * *"\nprompt = "tick"\n',
    });
    await landOnDefault(a.url, user.token, project.id, repo, "every second");
    const clusters = {
      a: await joinCluster(db.sql, { instanceId: a.services.instanceId }),
      b: await joinCluster(db.sql, { instanceId: b.services.instanceId }),
    };
    const stops = [
      a.services.startBackgroundWork({ cluster: clusters.a, idleMs: 3_600_000 }),
      b.services.startBackgroundWork({ cluster: clusters.b, idleMs: 3_600_000 }),
    ];
    let claims = 0;
    const rogues = [a, b].map((api) =>
      createTriggerScheduler({
        port: {
          ...api.services.triggerPort,
          claim: async (...args) => {
            claims++;
            return api.services.triggerPort.claim(...args);
          },
        },
        log: () => {},
      }),
    );
    for (const rogue of rogues) await rogue.start(async () => true);
    const from = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000);
    await sleep(from.getTime() + 10_000 - Date.now());
    const to = new Date(from.getTime() + 10_000);
    for (const rogue of rogues) rogue.stop();
    for (const stop of stops) stop();
    await clusters.a.leave();
    await clusters.b.leave();

    const firings = await db.sql.query<{ at: Date; n: number; session_id: string | null }>(
      `select scheduled_at as at, count(*)::int as n, max(session_id) as session_id from trigger_firings
       where project_id = $1 and slug = 'tick' and scheduled_at >= $2 and scheduled_at < $3 group by scheduled_at`,
      [project.id, from, to],
    );
    // Every second fired (a second or two may be lost to a blocked event loop), none twice...
    expect(firings.length).toBeGreaterThanOrEqual(8);
    expect(firings.every((f) => f.n === 1)).toBe(true);
    expect(claims).toBeGreaterThan(firings.length);
    // ...and every session the trigger started belongs to exactly one instant.
    const sessions = await db.sql.query<{ session_id: string; instants: number }>(
      `select s.session_id, (select count(*)::int from trigger_firings f where f.session_id = s.session_id) as instants
       from project_sessions s where s.project_id = $1 and s.trigger_slug = 'tick'`,
      [project.id],
    );
    expect(sessions.length).toBeGreaterThan(0);
    expect(sessions.every((s) => s.instants === 1)).toBe(true);
    for (const s of sessions)
      await call(a.url, "DELETE", `/v1/projects/${project.id}/sessions/${s.session_id}`, { token: user.token });
  }, 120_000);
});
