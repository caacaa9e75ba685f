import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { joinCluster } from "../orchestrator/cluster.ts";
import { call } from "./support/api-server.ts";
import { svc } from "./support/cli.ts";
import { containerEnv } from "./support/docker.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

const PROMPT = "Summarize the repository in one line";
const MANIFEST = `# svc manifest of the trigger suite
[project]
name = "triggers"

[[triggers]]
slug = "tick"            # every two seconds
schedule = "*/2 * * * * *"
prompt = "${PROMPT}"
`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("triggers: manifest on the default branch -> scheduler -> sessions (real cron, git, Docker, CLI)", () => {
  let sp: SandboxedProject;
  let repo: WorkRepo;
  let stopBackground: () => void;
  let cli: (args: string[]) => ReturnType<typeof svc>;
  const mergeToLive: number[] = [];

  const api = (method: string, path: string, body?: unknown) =>
    call(sp.api.url, method, `/v1/projects/${sp.project.id}${path}`, { token: sp.user.token, body });
  const scheduled = () => sp.api.services.triggerScheduler.scheduledSlugs(sp.project.id);
  const firings = async () =>
    sp.db.sql.query<{ scheduled_at: Date; claimed_at: Date; session_id: string | null; error: string | null }>(
      `select scheduled_at, created_at as claimed_at, session_id, error from trigger_firings
       where project_id = $1 and not manual order by scheduled_at`,
      [sp.project.id],
    );

  /** Pushes `files` on a new branch from main; without `merge` that is all. Returns the CR number when merged. */
  async function pushBranch(branch: string, files: Record<string, string>) {
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout(branch, { create: true, from: "origin/main" });
    await repo.commit(`${branch}`, files);
    await repo.pushed(branch);
  }
  async function merge(number: number, expectSlugs: (slugs: string[]) => boolean) {
    const res = await api("POST", `/change-requests/${number}/merge`, {});
    expect(res.status).toBe(200);
    const merged = Date.now();
    await waitFor("the new schedule", async () => expectSlugs(scheduled()), { timeoutMs: 30_000, everyMs: 20 });
    mergeToLive.push(Date.now() - merged);
  }
  async function land(branch: string, files: Record<string, string>, expectSlugs: (slugs: string[]) => boolean) {
    await pushBranch(branch, files);
    const cr = await api("POST", "/change-requests", { title: branch, head_ref: branch });
    expect(cr.status).toBe(201);
    await merge(cr.body.number, expectSlugs);
  }
  async function stopAll() {
    for (const s of (await api("GET", "/sessions")).body.sessions)
      if (["provisioning", "running"].includes(s.status)) await api("POST", `/sessions/${s.session_id}/stop`, {});
  }

  beforeAll(async () => {
    sp = await startSandboxedProject("Triggers", { sessionCap: 1 });
    const cluster = await joinCluster(sp.db.sql, { instanceId: sp.api.services.instanceId });
    stopBackground = sp.api.services.startBackgroundWork({ cluster, idleMs: 3_600_000 });
    repo = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    const env = sp.cliEnv;
    cli = (args) => svc(args, { env });
  }, 300_000);
  afterAll(async () => {
    stopBackground?.();
    await sp?.close();
  });

  it("fires only after the CR merges; the sandbox gets the prompt; the cap is recorded, not retried", async () => {
    await pushBranch("add-trigger", { "svc.toml": MANIFEST });
    await sleep(4500);
    expect(await firings()).toEqual([]);
    expect((await api("GET", "/triggers")).body).toEqual({ triggers: [], manifest_error: null });

    const cr = await api("POST", "/change-requests", { title: "add trigger", head_ref: "add-trigger" });
    await merge(cr.body.number, (s) => s.includes("tick"));
    const first = await waitFor(
      "a triggered session",
      async () =>
        (await api("GET", "/sessions")).body.sessions.find((s: { trigger: string | null }) => s.trigger === "tick"),
      { timeoutMs: 30_000, everyMs: 20 },
    );
    expect(first).toMatchObject({ trigger: "tick", base_ref: "main", agent_name: "build" });
    // Its own container: a pooled one made for the same id before main moved is replaced by it, and may be gone.
    const env = await waitFor(
      "the session's container",
      async () => {
        const containers = await sp.docker.listContainers({
          all: true,
          filters: { label: [`dev.svc.session=${first.session_id}`] },
        });
        const own = containers.find((c) => !c.Labels["dev.svc.pool"]);
        return own && (await containerEnv(sp.docker, own.Id).catch(() => undefined));
      },
      { timeoutMs: 300_000, everyMs: 20 },
    );
    expect(env.SVC_INITIAL_PROMPT).toBe(PROMPT);
    // The trigger's prompt is the first entry of the session's transcript.
    const transcript = (await api("GET", `/sessions/${first.session_id}/transcript`)).body;
    expect(transcript[0]).toMatchObject({ role: "user", text: PROMPT });

    // Cap 1: the next instants are claimed, refused with the cap's error, and never retried.
    await waitFor(
      "a refused firing",
      async () => (await firings()).find((f) => f.error?.includes("sessions at once")),
      { timeoutMs: 30_000, everyMs: 20 },
    );
    const info = (await api("GET", "/triggers/tick")).body;
    expect(info).toMatchObject({ slug: "tick", enabled: true, schedule: "*/2 * * * * *", prompt: PROMPT });
    expect(info.last_error).toContain("sessions at once");
    expect(info.last_fired_at).not.toBeNull();
    const rows = await firings();
    expect(rows.filter((f) => f.session_id).length).toBe(1);
    expect(new Set(rows.map((f) => f.scheduled_at.getTime())).size).toBe(rows.length);
    expect((await api("GET", "/triggers/nope")).body.code).toBe("TRIGGER_NOT_FOUND");
  }, 400_000);

  it("an invalid manifest merged keeps the last schedule, and `triggers ls` shows the error", async () => {
    await land("break-manifest", { "svc.toml": `${MANIFEST}\n[[triggers]]\nslug = \n` }, (s) => s.includes("tick"));
    const list = (await api("GET", "/triggers")).body;
    expect(list.manifest_error).not.toBeNull();
    expect(list.triggers.map((t: { slug: string }) => t.slug)).toEqual(["tick"]);
    const before = (await firings()).length;
    await waitFor("a firing on the last good schedule", async () => (await firings()).length > before, {
      timeoutMs: 10_000,
    });
    const ls = await cli(["triggers", "ls", "--json"]);
    expect(ls.code).toBe(0);
    expect(JSON.parse(ls.stdout)).toEqual([expect.objectContaining({ slug: "tick", enabled: true })]);
    expect(ls.stderr).toContain("invalid");
    await land("fix-manifest", { "svc.toml": MANIFEST }, (s) => s.includes("tick"));
    expect((await api("GET", "/triggers")).body.manifest_error).toBeNull();
  }, 120_000);

  it("`disable` opens a CR on a new branch (main untouched); once merged the firing stops; `fire` still works", async () => {
    const bare = sp.api.services.repos.managedDir(sp.project.id);
    const mainBefore = (await git(["rev-parse", "main"], { dir: bare })).stdout.trim();
    const disabled = await cli(["triggers", "disable", "tick"]);
    expect(disabled.code).toBe(0);
    const number = Number(disabled.stdout.trim());
    expect(number).toBeGreaterThan(0);
    expect((await git(["rev-parse", "main"], { dir: bare })).stdout.trim()).toBe(mainBefore);
    const cr = (await api("GET", `/change-requests/${number}`)).body.change_request;
    expect(cr.head_ref).toBe("svc/trigger-tick-disabled-1");
    const branchCommit = (await git(["log", "-1", "--format=%an <%ae>%n%P", cr.head_ref], { dir: bare })).stdout;
    expect(branchCommit).toBe(`svc <noreply@svc.local>\n${mainBefore}\n`);
    // Still firing until the CR merges.
    expect(scheduled()).toContain("tick");

    await merge(number, (s) => !s.includes("tick"));
    const onMain = (await git(["show", "main:svc.toml"], { dir: bare })).stdout;
    expect(onMain).toBe(MANIFEST.replace('slug = "tick"            # every two seconds\n', "$&enabled = false\n"));
    const settled = (await firings()).length;
    await sleep(4500);
    expect((await firings()).length).toBe(settled);
    const info = JSON.parse((await cli(["triggers", "info", "tick", "--json"])).stdout);
    expect(info).toMatchObject({ slug: "tick", enabled: false });
    expect((await cli(["triggers", "disable", "tick"])).code).toBe(1);

    // Firing by hand works for a disabled trigger and prints the session id.
    await stopAll();
    const fired = await cli(["triggers", "fire", "tick"]);
    expect(fired.code).toBe(0);
    const session = (await api("GET", `/sessions/${fired.stdout.trim()}`)).body;
    expect(session).toMatchObject({ trigger: "tick", status: "provisioning" });
    const infoOut = await cli(["sessions", "info", session.session_id]);
    expect(infoOut.stdout).toContain("trigger:  tick");
    expect((await cli(["triggers", "fire", "nope"])).code).toBe(1);
    expect((await cli(["triggers", "info", "nope"])).code).toBe(1);
    await stopAll();

    // Enabling goes through a CR too, on the next free branch name.
    const enabled = await cli(["triggers", "enable", "tick", "--json"]);
    expect(JSON.parse(enabled.stdout).change_request.head_ref).toBe("svc/trigger-tick-enabled-1");
  }, 200_000);

  it("a person's push to main is refused; the same commit's CR merge reschedules at once", async () => {
    await repo.git(["fetch", "-q", "origin", "main"]);
    await repo.checkout("direct", { create: true, from: "origin/main" });
    await repo.commit("direct", {
      "svc.toml": `[[triggers]]\nslug = "yearly"\nschedule = "0 0 1 1 *"\ntimezone = "Europe/Paris"\nprompt = "happy new year"\n`,
    });
    const direct = await repo.push("direct:main");
    expect(direct.code).not.toBe(0);
    expect(direct.stderr).toMatch(/svc cr open/);
    expect(scheduled().join()).not.toBe("yearly");
    await landOnDefault(sp.api.url, sp.user.token, sp.project.id, repo, "yearly trigger");
    const pushed = Date.now();
    await waitFor("the pushed schedule", async () => scheduled().join() === "yearly", { timeoutMs: 5000, everyMs: 20 });
    mergeToLive.push(Date.now() - pushed);
    const list = (await api("GET", "/triggers")).body;
    expect(list.triggers).toEqual([
      expect.objectContaining({ slug: "yearly", timezone: "Europe/Paris", enabled: true, last_fired_at: null }),
    ]);
  }, 60_000);

  afterAll(async () => {
    const rows = await firings().catch(() => []);
    const ms = (a: Date, b: Date) => b.getTime() - a.getTime();
    const claim = rows.map((r) => ms(r.scheduled_at, r.claimed_at)).sort((a, b) => a - b);
    const sessions = await sp.db.sql.query<{ d: number }>(
      `select extract(epoch from (s.created_at - f.scheduled_at)) * 1000 as d from trigger_firings f
       join project_sessions s on s.session_id = f.session_id where f.project_id = $1 and not f.manual`,
      [sp.project.id],
    );
    const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
    writeFileSync(
      "/tmp/svc-trigger-timings.json",
      JSON.stringify({
        firings: claim.length,
        claim_delay_ms: { p50: pct(claim, 50), p99: pct(claim, 99), max: claim.at(-1) },
        session_delay_ms: sessions.map((r) => Number(r.d)),
        merge_to_live_ms: mergeToLive,
      }),
    );
  });
});
