import { randomUUID } from "node:crypto";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git } from "../api/git/run.ts";
import { bridgeGateway, containerEnv, execIn } from "./support/docker.ts";
import { authedUrl, type WorkRepo, workRepo } from "./support/git-fixture.ts";
import { landOnDefault } from "./support/land.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";

/** Limits no other suite uses, so a value read back inside a build can only have come from them. */
const LIMITS = { memoryBytes: 640 * 1024 * 1024, nanoCpus: 1_500_000_000, pids: 512 };

/**
 * A project Dockerfile whose one RUN step writes `marker` and what it saw of its fences into the image. The run id
 * makes `.svc/` a tree no earlier run built, so the image (and the engine's layer cache) is built afresh here.
 */
const dockerfile = (marker: string, run: string) =>
  [
    "ARG SVC_BASE_IMAGE",
    "FROM $SVC_BASE_IMAGE",
    `RUN echo ${run} > /etc/svc-run && echo ${marker} > /etc/svc-marker \\`,
    // cgroup v1 (this machine) or v2 (newer CI hosts).
    " && (cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) > /etc/svc-build-memory \\",
    " && (cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) > /etc/svc-build-cpu \\",
    " && cat /proc/net/route > /etc/svc-build-route \\",
    " && (getent hosts host.docker.internal || true) > /etc/svc-build-host",
    "",
  ].join("\n");

/** The default route's gateway in a /proc/net/route dump (little-endian hex), as a dotted address. */
function defaultGateway(route: string): string | undefined {
  const row = route
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .find((fields) => fields[1] === "00000000" && fields[2] !== "00000000");
  if (!row?.[2]) return undefined;
  return (row[2].match(/../g) ?? [])
    .map((byte) => Number.parseInt(byte, 16))
    .reverse()
    .join(".");
}

/**
 * The image a session runs is built from `.svc/` of the project's default branch only, under the limits and on the
 * network of the sandbox that runs it: an agent that edits `.svc/Dockerfile` on its own branch gets nothing built,
 * and a build step never escapes the sandbox's fences.
 */
describe("session images on real Docker", () => {
  let sp: SandboxedProject;
  let docker: Docker;
  let work: WorkRepo;
  let sessionId: string;
  let mainImage: string;

  async function waitStatus(id: string, statuses: string[], timeoutMs = 180_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await sp.sessions(`/${id}`);
      if (statuses.includes(res.body.status)) return res.body;
      if (Date.now() > deadline) throw new Error(`session ${id} stuck in ${res.body.status}: ${res.body.error}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function containerOf(id: string) {
    const [container] = await docker.listContainers({ filters: { label: [`dev.svc.session=${id}`] } });
    if (!container) throw new Error(`session ${id} has no running container`);
    return container;
  }

  /** Lands `files` on main the only way main moves: a branch, a change request, its merge by a person. */
  async function landOnMain(branch: string, files: Record<string, string>) {
    await work.git(["fetch", "-q", "origin", "main"]);
    await work.checkout(branch, { create: true, from: "FETCH_HEAD" });
    await work.commit(branch, files);
    await landOnDefault(sp.api.url, sp.user.token, sp.project.id, work, branch);
  }

  const read = async (containerId: string, path: string) => {
    const res = await execIn(docker, containerId, ["cat", path]);
    expect(res.code, res.out).toBe(0);
    return res.out.trim();
  };

  beforeAll(async () => {
    sp = await startSandboxedProject("Images", { limits: LIMITS });
    docker = sp.docker;
    work = await workRepo(authedUrl(sp.project.repo_url, sp.user.token));
    await landOnMain("project-image", { ".svc/Dockerfile": dockerfile("main", randomUUID()) });
    sessionId = (await sp.sessions("", "POST", {})).body.session_id;
    const session = await waitStatus(sessionId, ["running", "failed"]);
    expect(session.error).toBeNull();
    mainImage = (await containerOf(sessionId)).Image;
  }, 400_000);
  afterAll(async () => {
    await sp?.close();
  });

  it("a session that changes .svc/Dockerfile on its own branch still runs the default branch's image after a restart", async () => {
    expect(mainImage).toMatch(/^svc-project:/);
    const before = await containerOf(sessionId);
    expect(await read(before.Id, "/etc/svc-marker")).toBe("main");

    // The agent, with its session's own token, pushes another Dockerfile to its branch.
    const token = (await containerEnv(docker, before.Id)).SVC_CLI_TOKEN!;
    const agent = await workRepo(authedUrl(sp.project.repo_url, token));
    await agent.git(["fetch", "-q", "origin", sessionId]);
    await agent.checkout(sessionId, { create: true, from: "FETCH_HEAD" });
    await agent.commit("my own image", { ".svc/Dockerfile": dockerfile("agent", randomUUID()) });
    const pushed = await agent.push(sessionId);
    expect(pushed.code, pushed.stderr).toBe(0);

    expect((await sp.sessions(`/${sessionId}/restart`, "POST")).status).toBe(200);
    expect((await waitStatus(sessionId, ["running", "failed"])).status).toBe("running");
    const after = await containerOf(sessionId);
    expect(after.Id).not.toBe(before.Id);
    expect(after.Image).toBe(mainImage);
    expect(await read(after.Id, "/etc/svc-marker")).toBe("main");
    // Nothing was built from the agent's .svc/ at all: no image carries its tree's key.
    const bare = sp.api.services.repos.managedDir(sp.project.id);
    const agentTree = (await git(["rev-parse", `${sessionId}:.svc`], { dir: bare })).stdout.trim();
    expect(agentTree).toMatch(/^[0-9a-f]{40}$/);
    const built = await docker.listImages({ filters: { reference: [`svc-project:${agentTree.slice(0, 16)}-*`] } });
    expect(built).toEqual([]);
  });

  it("the build's steps ran under the sandbox's memory and CPU limits and on its network, not the default bridge", async () => {
    const sandbox = (await containerOf(sessionId)).Id;
    expect(Number(await read(sandbox, "/etc/svc-build-memory"))).toBe(LIMITS.memoryBytes);
    // 1.5 CPUs: 150 ms of every 100 ms period.
    expect(Number(await read(sandbox, "/etc/svc-build-cpu"))).toBe(150_000);

    // The build's default route and host alias are the sandbox's own: the gateway of the sandbox network.
    const sandboxGateway = defaultGateway(await read(sandbox, "/proc/net/route"));
    expect(sandboxGateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(sandboxGateway).not.toBe(await bridgeGateway(docker));
    expect(defaultGateway(await read(sandbox, "/etc/svc-build-route"))).toBe(sandboxGateway);
    expect((await read(sandbox, "/etc/svc-build-host")).split(/\s+/)).toEqual([sandboxGateway, "host.docker.internal"]);
  });

  it("a .svc/Dockerfile that breaks on the default branch fails new sessions, saying the fix lands there through a CR", async () => {
    await landOnMain("broken-image", {
      ".svc/Dockerfile": `ARG SVC_BASE_IMAGE\nFROM $SVC_BASE_IMAGE\nRUN echo ${randomUUID()} && exit 3\n`,
    });
    const created = (await sp.sessions("", "POST", {})).body;
    const session = await waitStatus(created.session_id, ["running", "failed"]);
    expect(session.status).toBe("failed");
    expect(session.error).toMatch(
      /^the project's \.svc\/Dockerfile \(main at [0-9a-f]{7}\) failed at Step 3\/3 : RUN /,
    );
    expect(session.error).toContain(
      "Fix .svc/Dockerfile on main through a change request (svc cr open), then start a new session",
    );
  });
});
