import { afterEach, describe, expect, it, vi } from "vitest";
import { hashSecret } from "../../protocol/credential.ts";
import { createMemoryDriver } from "../../test/support/memory-driver.ts";
import { memoryProject, memoryProvisionerDeps, memorySeal, memorySession } from "../../test/support/memory-ports.ts";
import { waitFor } from "../../test/support/wait.ts";
import { OrchestratorError } from "../errors.ts";
import type { SandboxDriver } from "../sandbox/driver.ts";
import { createProvisioner, type Provisioner } from "./provisioner.ts";

const FITS = { baseRef: "main", agent: "build", model: null };
const until = (what: string, fn: () => boolean) => waitFor(what, async () => fn(), { timeoutMs: 5000, everyMs: 5 });

let provisioners: Provisioner[] = [];
afterEach(async () => {
  await Promise.all(provisioners.map((p) => p.stopPool()));
  provisioners = [];
  vi.unstubAllGlobals();
});

function setup(poolSize = 0, driver: Partial<SandboxDriver> = {}) {
  const mem = createMemoryDriver();
  vi.stubGlobal("fetch", mem.fetch);
  const world = memoryProvisionerDeps({ ...mem.driver, ...driver }, { settings: { poolSize } });
  const provisioner = createProvisioner(world.deps);
  provisioners.push(provisioner);
  const project = memoryProject();
  /** A session as the API creates it: its row first, `provisioning`. */
  const newSession = (over: Parameters<typeof memorySession>[1] = {}) => {
    const session = memorySession(project, over);
    world.records.addSession(session, { provisioner: "me" });
    return session;
  };
  return { mem, provisioner, project, newSession, ...world };
}

describe("provisioner", () => {
  it("cold: cuts the branch, mints a token, starts a container with the session's env, and the session runs", async () => {
    const { mem, provisioner, project, newSession, records, tokens, repos, secrets } = setup();
    secrets.set(project.id, { API_KEY: "project-secret-1" });
    const session = newSession({ initial_prompt: "add a health endpoint" });
    await provisioner.provision(project, session, { cutBranch: true });

    const row = records.session(session.session_id)!;
    expect(row).toMatchObject({ status: "running", error: null, progress: null });
    expect(row.progressLog).toEqual(expect.arrayContaining(["preparing the sandbox image", "starting sandbox"]));
    expect(repos.branches(project).get(session.branch)).toBe(repos.tip(project));

    const container = mem.sandboxOf({ sessionId: session.session_id })!;
    expect(container.running).toBe(true);
    expect(row.sandbox_url).toBe((await mem.driver.inspect(container.id))!.endpoint);
    const [token] = tokens.live();
    expect(token).toMatchObject({ projectId: project.id, sessionId: session.session_id });
    expect(container.env).toMatchObject({
      SVC_SESSION_ID: session.session_id,
      SVC_CLI_TOKEN: token!.token,
      SVC_INITIAL_PROMPT: "add a health endpoint",
      SVC_PROJECT_AUTO_CLONE: "1",
      API_KEY: "project-secret-1",
    });
    expect(container.pool).toBeNull();
    expect(container.yielding).toBe(false);

    const [sandbox] = records.sandboxesOf(session.session_id);
    expect(sandbox).toMatchObject({
      status: "active",
      container_id: container.id,
      url: row.sandbox_url,
      token_id: token!.id,
      image: "svc-sandbox:test",
      service_key_hash: hashSecret(container.env.SVC_TOKEN!),
      service_key_sealed: memorySeal(container.env.SVC_TOKEN!),
    });
    expect(container.owner.sandboxId).toBe(sandbox!.sandbox_id);
    expect(provisioner.isProvisioning(session.session_id)).toBe(false);
  });

  it("pooled: a reserved warm sandbox is claimed with the session's token and prompt; no container is created", async () => {
    const { mem, provisioner, project, newSession, records, tokens } = setup(1);
    expect(provisioner.reservePooled(project, FITS)).toBeUndefined();
    await until("a warm sandbox", () => mem.pooled(project.id, "ready").length === 1);
    const [warm] = mem.pooled(project.id, "ready");
    const id = provisioner.reservePooled(project, FITS)!;
    expect(id).toBe(warm!.owner.sessionId);

    const session = newSession({ session_id: id, branch: id, initial_prompt: "go" });
    await provisioner.provision(project, session, { cutBranch: true });

    const row = records.session(id)!;
    expect(row.status).toBe("running");
    expect(row.sandbox_url).toBe((await mem.driver.inspect(warm!.id))!.endpoint);
    const [sandbox] = records.sandboxesOf(id);
    expect(sandbox).toMatchObject({ status: "active", sandbox_id: warm!.owner.sandboxId, container_id: warm!.id });
    const [token] = tokens.live();
    expect(warm!.daemon!.pool).toBe("claimed");
    expect(warm!.daemon!.claimedEnv).toEqual({
      SVC_CLI_TOKEN: token!.token,
      SVC_EXECUTOR_TOKEN: token!.token,
      SVC_INITIAL_PROMPT: "go",
      SVC_BOOTSTRAP_AGENT_SESSION: "1",
    });
    // Only pool members were ever created: the session got no container of its own.
    expect([...mem.containers(), ...mem.removed()].filter((c) => c.pool === null)).toEqual([]);
    expect(sandbox!.service_key_hash).toBe(hashSecret(warm!.env.SVC_TOKEN!));
  });

  it("pooled: a check's claim says it runs no agent, so a member that boots its runtime at the claim does not", async () => {
    const { mem, provisioner, project, newSession } = setup(1);
    provisioner.reservePooled(project, FITS);
    await until("a warm sandbox", () => mem.pooled(project.id, "ready").length === 1);
    const id = provisioner.reservePooled(project, FITS)!;
    await provisioner.provision(project, newSession({ session_id: id, branch: id }), {
      cutBranch: true,
      commandsOnly: true,
    });
    const [claimed] = mem.pooled(project.id, "claimed");
    expect(claimed!.daemon!.claimedEnv).toMatchObject({ SVC_AGENT_RUNTIME: "0" });
  });

  it("a project with no egress list goes out as the driver says: through the API's proxy where the driver cannot fence the host", async () => {
    const proxyOf = (env: Record<string, string>) => env.HTTPS_PROXY ?? null;
    const open = setup();
    const direct = open.newSession();
    await open.provisioner.provision(open.project, direct, { cutBranch: true });
    const plain = open.mem.sandboxOf({ sessionId: direct.session_id })!;
    expect(plain.egress).toBe("open");
    expect(proxyOf(plain.env)).toBeNull();
    vi.unstubAllGlobals();

    const fenced = setup(1, { unlistedEgress: async () => "proxy" });
    expect(fenced.provisioner.reservePooled(fenced.project, FITS)).toBeUndefined();
    await until("a warm sandbox", () => fenced.mem.pooled(fenced.project.id, "ready").length === 1);
    const [warm] = fenced.mem.pooled(fenced.project.id, "ready");
    const session = fenced.newSession();
    await fenced.provisioner.provision(fenced.project, session, { cutBranch: true });
    const cold = fenced.mem.sandboxOf({ sessionId: session.session_id })!;
    for (const sandbox of [warm!, cold]) {
      expect(sandbox.egress).toBe("proxy");
      // Its own key is its proxy credential: the proxy knows it by that key.
      expect(proxyOf(sandbox.env)).toContain(`:${sandbox.env.SVC_TOKEN}@`);
    }
  });

  it("pooled: a reserved sandbox made before the secrets changed is removed and a cold one made for the same id", async () => {
    const { mem, provisioner, project, newSession, records, secrets } = setup(1);
    provisioner.reservePooled(project, FITS);
    await until("a warm sandbox", () => mem.pooled(project.id, "ready").length === 1);
    const id = provisioner.reservePooled(project, FITS)!;
    const warm = mem.sandboxOf({ sessionId: id })!;
    secrets.set(project.id, { API_KEY: "rotated" });
    await provisioner.provision(project, newSession({ session_id: id, branch: id }), { cutBranch: true });

    expect(records.session(id)!.status).toBe("running");
    expect(mem.container(warm.id)).toBeUndefined();
    const cold = mem.sandboxOf({ sessionId: id })!;
    expect(cold.pool).toBeNull();
    expect(cold.env.API_KEY).toBe("rotated");
    expect(records.sandboxesOf(id)[0]!.container_id).toBe(cold.id);
  });

  it("pooled: a reserved sandbox that died before the pool noticed is removed and a cold one made for the same id", async () => {
    const { mem, provisioner, project, newSession, records } = setup(1);
    provisioner.reservePooled(project, FITS);
    await until("a warm sandbox", () => mem.pooled(project.id, "ready").length === 1);
    const id = provisioner.reservePooled(project, FITS)!;
    const warm = mem.sandboxOf({ sessionId: id })!;
    mem.kill(warm.id);
    await provisioner.provision(project, newSession({ session_id: id, branch: id }), { cutBranch: true });

    expect(records.session(id)).toMatchObject({ status: "running", error: null });
    expect(mem.container(warm.id)).toBeUndefined();
    const cold = mem.sandboxOf({ sessionId: id })!;
    expect(cold.pool).toBeNull();
    expect(cold.running).toBe(true);
    expect(records.sandboxesOf(id)[0]!.container_id).toBe(cold.id);
  });

  it("a stop or an idle close asks the live sandbox to save its work first; an error close and a failed save do not hold the stop", async () => {
    const { mem, provisioner, project, newSession, deps, tokens } = setup();
    const asked: { session: string; running: boolean; tokenLive: boolean }[] = [];
    deps.checkpoint = async (sandbox) => {
      asked.push({
        session: sandbox.session_id,
        running: Boolean(mem.sandboxOf({ sessionId: sandbox.session_id })?.running),
        tokenLive: tokens.live().some((t) => t.sessionId === sandbox.session_id),
      });
      if (sandbox.session_id === failing.session_id) throw new Error("the sandbox did not answer");
    };
    const [stopped, idle, broken, failing] = [newSession(), newSession(), newSession(), newSession()];
    for (const s of [stopped, idle, broken, failing]) await provisioner.provision(project, s, { cutBranch: true });

    await provisioner.stopSandboxOf(stopped.session_id);
    const sandboxOf = async (id: string) => (await deps.records.currentSandbox(id))!;
    await provisioner.closeSandbox(await sandboxOf(idle.session_id), "stopped", "idle");
    await provisioner.closeSandbox(await sandboxOf(broken.session_id), "error", "the container died");
    await provisioner.stopSandboxOf(failing.session_id);

    // Asked while the container still ran and its token still worked: the push needs both.
    expect(asked).toEqual([
      { session: stopped.session_id, running: true, tokenLive: true },
      { session: idle.session_id, running: true, tokenLive: true },
      { session: failing.session_id, running: true, tokenLive: true },
    ]);
    for (const s of [stopped, idle, broken, failing])
      expect(mem.sandboxOf({ sessionId: s.session_id })).toBeUndefined();
  });

  it("a failure leaves the session failed, no container, the token revoked and the sandbox row in error", async () => {
    const { mem, provisioner, project, newSession, records, tokens } = setup();
    mem.failNext(
      "start",
      new OrchestratorError("SANDBOX_BACKEND_FAILED", "the container engine failed to start: boom"),
    );
    const session = newSession();
    await provisioner.provision(project, session, { cutBranch: true });

    expect(records.session(session.session_id)).toMatchObject({
      status: "failed",
      error: "the container engine failed to start: boom",
    });
    expect(mem.containers()).toEqual([]);
    expect(mem.removed()).toHaveLength(1);
    expect(tokens.minted).toHaveLength(1);
    expect(tokens.live()).toEqual([]);
    expect(records.sandboxesOf(session.session_id)[0]).toMatchObject({
      status: "error",
      error: "the container engine failed to start: boom",
    });
  });

  it("a base branch that does not exist fails the session before any token or container", async () => {
    const { mem, provisioner, project, newSession, records, tokens } = setup();
    const session = newSession({ base_ref: "gone" });
    await provisioner.provision(project, session, { cutBranch: true });
    expect(records.session(session.session_id)).toMatchObject({
      status: "failed",
      error: "base branch 'gone' not found",
    });
    expect(tokens.minted).toEqual([]);
    expect(mem.calls.filter((c) => c.op === "create")).toEqual([]);
  });

  it("a session stopped while its sandbox booted is torn down: no container, token revoked, it stays stopped", async () => {
    const { mem, provisioner, project, newSession, records, tokens } = setup();
    mem.behaviour.clone = "cloning";
    const session = newSession();
    const provisioning = provisioner.provision(project, session, { cutBranch: true });
    await until("the container", () => mem.sandboxOf({ sessionId: session.session_id })?.running === true);
    const container = mem.sandboxOf({ sessionId: session.session_id })!;
    expect(provisioner.isProvisioning(session.session_id)).toBe(true);
    await until("cloning reported", () =>
      records.session(session.session_id)!.progressLog.includes("cloning workspace"),
    );

    records.setStatus(session.session_id, "stopped");
    container.daemon!.repo.state = "cloned";
    await provisioning;

    expect(records.session(session.session_id)!.status).toBe("stopped");
    expect(mem.container(container.id)).toBeUndefined();
    expect(tokens.live()).toEqual([]);
    expect(records.sandboxesOf(session.session_id)[0]!.status).toBe("stopped");
    expect(provisioner.isProvisioning(session.session_id)).toBe(false);
  });

  it("credentials the engine quotes in its error are redacted from the session, the sandbox row and the log", async () => {
    const { mem, provisioner, project, newSession, records, tokens, secrets, logs } = setup();
    secrets.set(project.id, { DB_PASSWORD: "hunter2-db-password" });
    let env: Record<string, string> = {};
    // As Docker does: the refused spec comes back in the message, env and all.
    mem.failNext("create", (spec: { env: Record<string, string> }) => {
      env = spec.env;
      const quoted = Object.entries(spec.env).map(([k, v]) => `${k}=${v}`);
      return new OrchestratorError(
        "SANDBOX_BACKEND_FAILED",
        `the container engine failed to create: bad env ${JSON.stringify(quoted)}`,
      );
    });
    const session = newSession();
    await provisioner.provision(project, session, { cutBranch: true });

    const error = records.session(session.session_id)!.error!;
    expect(error).toContain("the container engine failed to create: bad env");
    expect(error).toContain("DB_PASSWORD=***");
    const credentials = ["hunter2-db-password", "sk-llm-gateway-secret", env.SVC_TOKEN!, tokens.minted[0]!.token];
    for (const secret of credentials) {
      expect(secret.length).toBeGreaterThan(8);
      expect(error).not.toContain(secret);
      expect(records.sandboxesOf(session.session_id)[0]!.error).not.toContain(secret);
      expect(logs.text()).not.toContain(secret);
    }
    expect(tokens.live()).toEqual([]);
    expect(mem.containers()).toEqual([]);
  });
});
