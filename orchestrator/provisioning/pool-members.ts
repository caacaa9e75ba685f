import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { newSecret } from "../../protocol/credential.ts";
import type { SeedRuntime } from "../../protocol/daemon.ts";
import { CLAIMED_ENV, SANDBOX_SERVICE_PORT, SandboxEnv } from "../../protocol/env.ts";
import type { Project } from "../../protocol/project.ts";
import { SERVICE_KEY_PREFIX } from "../../protocol/token.ts";
import { resolveSessionImage } from "../images/project-image.ts";
import type { Log, RepositoryPort, SecretsPort, SessionToProvision } from "../ports.ts";
import type { SandboxDriver, SandboxEgress, SandboxLimits } from "../sandbox/driver.ts";
import type { SandboxReach } from "./sandbox-reach.ts";
import { waitHealth } from "./wait-live.ts";

const run = promisify(execFile);

/** A pooled sandbox: made for one session id (its labels and branch carry it) before any session has it. */
export type PoolMember = {
  projectId: string;
  sessionId: string;
  sandboxId: string;
  serviceKey: string;
  containerId: string;
  url: string;
  image: string;
  baseRef: string;
  baseSha: string;
  secretsRevision: number;
  state: "warming" | "ready" | "reserved";
  /** When its agent runtime boots (SeedRuntime): `now`, warmed up before it is ready; `on-claim`, a burst's extra. */
  runtime: SeedRuntime;
  /** Health checks in a row a ready member did not answer `ready` to. */
  missed: number;
};

export type PoolMembersDeps = {
  driver: SandboxDriver;
  /** How a project's sandboxes go out (the provisioner's egressOf). */
  egressOf: (project: Project) => Promise<SandboxEgress>;
  repos: RepositoryPort;
  secrets: SecretsPort;
  platformImage: () => Promise<string>;
  /** The environment a session's sandbox gets (sandbox-env.ts), as the provisioner builds it. */
  envFor: (
    project: Project,
    session: SessionToProvision,
    credentials: {
      serviceKey: string;
      cliToken: string;
      secrets: { values: Record<string, string>; revision: number };
    },
    egress: SandboxEgress,
  ) => Record<string, string>;
  /** How the API reaches a member's daemon (sandbox-reach.ts). */
  reach: SandboxReach;
  settings: { readyTimeoutMs: number; defaultAgent: string; limits: SandboxLimits };
  installationId: string;
  /** This API process: its pool's containers carry it, so the reconciler leaves them to it while it lives. */
  instanceId: string;
  log: Log;
  /** The pool stopped: a boot under way gives up. */
  stopped: () => boolean;
};

/** The session a pool sandbox is made for, before anyone asked for it: the project's default branch and agent. */
function pooledSession(project: Project, sessionId: string, agent: string): SessionToProvision {
  return {
    session_id: sessionId,
    branch: sessionId,
    base_ref: project.default_branch,
    agent_name: agent,
    agent_model: null,
    initial_prompt: null,
  } as SessionToProvision;
}

const MAX_BUNDLE_BYTES = 512 << 20;
const SEED_TIMEOUT_MS = 60_000;

/**
 * The project's base branch as a git bundle: what seeds a pooled workspace without any credential. Held in memory
 * (a repository past MAX_BUNDLE_BYTES gets no pool; its sessions clone as cold ones do).
 */
async function bundleOf(gitDir: string, branch: string): Promise<Buffer> {
  const { stdout } = await run("git", ["bundle", "create", "-", `refs/heads/${branch}`], {
    cwd: gitDir,
    encoding: "buffer",
    maxBuffer: MAX_BUNDLE_BYTES,
  });
  return stdout;
}

/**
 * The pool's sandboxes themselves, apart from when to make or drop one (warm-pool.ts): made for one session id
 * each (container, workspace seeded from the default branch, agent runtime booted now or at the claim: SeedRuntime),
 * found by project or id, and removed with their container.
 */
export function createPoolMembers(deps: PoolMembersDeps) {
  const { driver, settings, log, reach } = deps;
  const members = new Map<string, PoolMember>();

  async function discard(member: PoolMember): Promise<void> {
    members.delete(member.sessionId);
    reach.forget(member.sandboxId);
    await driver.remove(member.containerId).catch((err) => {
      log("could not remove a pooled sandbox", { container: member.containerId, error: (err as Error).message });
    });
  }

  /** Waits until the daemon's pool state is `want`; rejects when it failed, went away or took too long. */
  const waitPool = (member: PoolMember, want: "seeding" | "ready") =>
    waitHealth(
      member.url,
      Date.now() + settings.readyTimeoutMs,
      ({ pool }) => (pool === want ? true : pool === "failed" ? "the pooled sandbox failed to boot" : undefined),
      {
        everyMs: 50,
        timeout: `the pooled sandbox was not ${want} in time`,
        stopped: () => deps.stopped() || !members.has(member.sessionId),
      },
    );

  /** Makes one ready member: `failed` when its sandbox did not boot (logged, nothing left behind). */
  async function addMember(project: Project, runtime: SeedRuntime): Promise<"ready" | "no base" | "failed"> {
    const baseSha = (await deps.repos.tips(project))?.get(project.default_branch);
    if (!baseSha) return "no base";
    const gitDir = await deps.repos.gitDir(project);
    const sessionId = randomUUID();
    const sandboxId = randomUUID();
    // The default branch's .svc/ as a cold session's is: a claim needs the image it would have built.
    const image = await resolveSessionImage(driver, {
      gitDir,
      branch: project.default_branch,
      commit: baseSha,
      platformImage: await deps.platformImage(),
      sandbox: { owner: { installationId: deps.installationId, sandboxId }, limits: settings.limits },
    });
    const secrets = await deps.secrets.values(project.id);
    const serviceKey = newSecret(SERVICE_KEY_PREFIX);
    // Fixed with the default branch the member holds: a merge that changes the list replaces the member.
    const egress = await deps.egressOf(project);
    const env = deps.envFor(
      project,
      pooledSession(project, sessionId, settings.defaultAgent),
      { serviceKey, cliToken: "", secrets },
      egress,
    );
    for (const name of [...CLAIMED_ENV, SandboxEnv.autoClone]) delete env[name];
    env[SandboxEnv.pooled] = "1";
    const containerId = await driver.create({
      name: `svc-${sessionId.slice(0, 8)}-${sandboxId.slice(0, 8)}`,
      image,
      env,
      owner: { installationId: deps.installationId, sandboxId, sessionId, projectId: project.id },
      servicePort: SANDBOX_SERVICE_PORT,
      limits: settings.limits,
      pool: deps.instanceId,
      egress,
    });
    const member: PoolMember = {
      projectId: project.id,
      sessionId,
      sandboxId,
      serviceKey,
      containerId,
      url: "",
      image,
      baseRef: project.default_branch,
      baseSha,
      secretsRevision: secrets.revision,
      state: "warming",
      runtime,
      missed: 0,
    };
    members.set(sessionId, member);
    try {
      // No session row holds this key yet: the link is told to take it before the daemon can dial.
      reach.expect(serviceKey, sandboxId);
      const info = await driver.start(containerId);
      member.url = await reach.endpoint(sandboxId, info, Date.now() + settings.readyTimeoutMs, "the pooled sandbox");
      await waitPool(member, "seeding");
      await seed(member, gitDir);
      await waitPool(member, "ready");
      await driver.booted(containerId);
      member.state = "ready";
      return "ready";
    } catch (err) {
      log("a pooled sandbox failed", { project: project.id, error: (err as Error).message });
      await discard(member);
      return "failed";
    }
  }

  /** Sends the base branch; the daemon answers once its workspace is cloned, with the commit it holds. */
  async function seed(member: PoolMember, gitDir: string): Promise<void> {
    const res = await fetch(`${member.url}/svc/pool/seed?runtime=${member.runtime}`, {
      method: "POST",
      headers: { authorization: `Bearer ${member.serviceKey}`, "content-type": "application/octet-stream" },
      body: new Uint8Array(await bundleOf(gitDir, member.baseRef)),
      signal: AbortSignal.timeout(SEED_TIMEOUT_MS),
    });
    const body = (await res.json()) as { commit?: string | null; error?: { message?: string } };
    if (!res.ok) throw new Error(body.error?.message ?? `seed answered ${res.status}`);
    if (body.commit) member.baseSha = body.commit;
  }

  return {
    get: (sessionId: string) => members.get(sessionId),
    all: () => [...members.values()],
    ofProject: (projectId: string) => [...members.values()].filter((m) => m.projectId === projectId),
    /** Out of the pool for good, its container left running: the provisioner's now. */
    hand: (sessionId: string) => members.delete(sessionId),
    add: addMember,
    discard,
  };
}
