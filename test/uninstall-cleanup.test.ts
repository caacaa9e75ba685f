import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeProject } from "../cli/commands/self-host/compose.ts";
import type { SelfHostPaths } from "../cli/commands/self-host/state.ts";
import { cliHome, freePort, shipNewApp, svc } from "./support/cli.ts";
import { BASE_IMAGE, removeProjectContainers, requireDocker } from "./support/docker.ts";

/** A container labelled as another stack's sandbox (an installation id that is not ours), running `image`. */
async function foreignSandbox(docker: Docker, image: string): Promise<Docker.Container> {
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: ["sleep"],
    Cmd: ["600"],
    Labels: {
      "dev.svc.installation": randomUUID(),
      "dev.svc.sandbox": randomUUID(),
      "dev.svc.session": randomUUID(),
      "dev.svc.project": randomUUID(),
    },
  });
  await container.start();
  return container;
}

const imageExists = (docker: Docker, ref: string) =>
  docker
    .getImage(ref)
    .inspect()
    .then(
      () => true,
      () => false,
    );

describe("svc uninstall removes its installation's containers, networks and images; self-host stop its idle networks (real CLI, real Docker)", () => {
  const home = cliHome();
  const svcHome = home.env.SVC_HOME!;
  const app = join(home.dir, "app");
  // A base image tag of this test's own: the platform image (keyed by its base) and the project images built on it
  // are this installation's alone, so removing them touches no image another test or the developer's stack uses.
  const base = { repo: "svc-uninstall-test-base", tag: randomUUID().slice(0, 8) };
  const baseRef = `${base.repo}:${base.tag}`;
  let docker: Docker;
  let project: string | undefined;
  let installation: string;
  let sandboxImage: string;
  const foreign: Docker.Container[] = [];
  const run = (args: string[]) => svc(args, { env: home.env, cwd: app });
  const selfHost = (args: string[]) => svc(["self-host", ...args], { env: home.env });
  const label = () => `dev.svc.installation=${installation}`;
  const containers = async () => docker.listContainers({ all: true, filters: { label: [label()] } });
  const networks = async () => (await docker.listNetworks({ filters: { label: [label()] } })).map((n) => n.Name);
  const sharedNetwork = () => `svc-sandboxes-${installation}`;
  const platformImage = () => `svc-sandbox:${sandboxImage.slice(sandboxImage.lastIndexOf("-") + 1)}`;
  /**
   * An install record naming a checkout that is not this one: uninstall removes only the shims that record's script
   * wrote, never this machine's real `svc` shim (which the checkout this test runs from may have written).
   */
  const installRecord = () =>
    writeFileSync(
      join(svcHome, "install.json"),
      JSON.stringify({
        kind: "checkout",
        checkout: home.dir,
        script: join(home.dir, "scripts", "install.sh"),
        shim: join(home.dir, "bin", "svc"),
        node: process.execPath,
        installed_at: new Date().toISOString(),
      }),
    );
  const newSession = async () => {
    const created = await run(["sessions", "new"]);
    expect(created.code, created.stderr).toBe(0);
    return created.stdout.trim();
  };

  beforeAll(async () => {
    docker = await requireDocker();
    await docker.getImage(BASE_IMAGE).tag(base);
    mkdirSync(svcHome, { recursive: true, mode: 0o700 });
    installRecord();
    const set = await selfHost(["env", "set", `SVC_SANDBOX_BASE_IMAGE=${baseRef}`, "SVC_POOL_SIZE=0"]);
    expect(set.code, set.stderr).toBe(0);
    const start = await selfHost(["start", "--port", String(await freePort())]);
    expect(start.code, start.stderr).toBe(0);
    const state = JSON.parse(readFileSync(join(svcHome, "selfhost.json"), "utf8"));
    expect(state.installations).toHaveLength(1);
    expect(state.installations[0]).toMatchObject({ mode: "embedded" });
    installation = state.installations[0].id;
    project = await shipNewApp(app, run);
  }, 300_000);

  afterAll(async () => {
    if (existsSync(join(svcHome, "selfhost.json"))) await selfHost(["stop"]);
    for (const c of foreign) await c.remove({ force: true }).catch(() => {});
    await removeProjectContainers(docker, project, installation);
    // What a failed test left of this installation's images (all of them built on this test's own base).
    for (const ref of sandboxImage ? [sandboxImage, platformImage()] : []) {
      await docker
        .getImage(ref)
        .remove()
        .catch(() => {});
    }
    await docker
      .getImage(baseRef)
      .remove()
      .catch(() => {});
  }, 120_000);

  it("self-host stop keeps the sandbox network while a sandbox is left on it, and removes it once none is", async () => {
    const id = await newSession();
    const [sandbox] = await containers();
    expect(sandbox?.Labels["dev.svc.session"]).toBe(id);
    sandboxImage = sandbox!.Image;
    expect(sandboxImage).toMatch(/^svc-project:[0-9a-f]{16}-[0-9a-f]{16}$/);
    expect(await networks()).toEqual([sharedNetwork()]);

    const kept = await selfHost(["stop", "--json"]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ stopped: true, networks_removed: [] });
    expect((await containers()).map((c) => c.State)).toEqual(["running"]);
    expect(await networks()).toEqual([sharedNetwork()]);

    const again = await selfHost(["start"]);
    expect(again.code, again.stderr).toBe(0);
    const stop = await selfHost(["stop", "--sandboxes"]);
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stderr).toContain(`removed the sandbox network ${sharedNetwork()} (no sandbox left on it)`);
    expect(await containers()).toEqual([]);
    expect(await networks()).toEqual([]);

    // Not running: nothing left to remove, and saying so is no error.
    const idle = await selfHost(["stop", "--json"]);
    expect(idle.code, idle.stderr).toBe(0);
    expect(JSON.parse(idle.stdout)).toMatchObject({ stopped: false, networks_removed: [] });
  }, 300_000);

  it("a project this stack does not know gets a hint at the other mode's data only when that data exists", async () => {
    const start = await selfHost(["start"]);
    expect(start.code, start.stderr).toBe(0);
    const unknown = randomUUID();
    const alone = await run(["projects", "info", unknown]);
    expect(alone.code).toBe(1);
    expect(alone.stderr.split("\n")).toContain(`error: project ${unknown} not found (PROJECT_NOT_FOUND, HTTP 404)`);
    // The compose mode's database volume of this home, as `start --mode compose` would have left it.
    const volume = `${composeProject({ home: svcHome } as SelfHostPaths)}_pgdata`;
    await docker.createVolume({ Name: volume });
    try {
      const hinted = await run(["projects", "info", unknown]);
      expect(hinted.code).toBe(1);
      expect(hinted.stderr.split("\n")).toContain(
        `error: project ${unknown} not found (PROJECT_NOT_FOUND, HTTP 404); this project may live in the compose ` +
          "mode's data: svc self-host restart --mode compose",
      );
      // Another host's 404 is that host's business.
      const elsewhere = await svc(["projects", "info", unknown], {
        env: { ...home.env, SVC_API_URL: `${start.stdout.trim()}/v1` },
        cwd: app,
      });
      expect(elsewhere.stderr).toContain("PROJECT_NOT_FOUND");
      expect(elsewhere.stderr).not.toContain("this project may live");
    } finally {
      await docker.getVolume(volume).remove();
    }
    const stop = await selfHost(["stop"]);
    expect(stop.code, stop.stderr).toBe(0);
  }, 120_000);

  it("uninstall --keep-home --keep-images removes the containers and networks, keeps the images, and leaves another installation's container running", async () => {
    const start = await selfHost(["start"]);
    expect(start.code, start.stderr).toBe(0);
    const id = await newSession();
    const [sandbox] = await containers();
    expect(sandbox?.Labels["dev.svc.session"]).toBe(id);
    foreign.push(await foreignSandbox(docker, BASE_IMAGE));

    installRecord();
    const res = await svc(["uninstall", "--yes", "--keep-home", "--keep-auth", "--keep-images"], { env: home.env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain(
      `on the Docker engine 1 container (${sandbox!.Names[0]!.slice(1)}), 1 network (${sharedNetwork()})`,
    );
    expect(await containers()).toEqual([]);
    expect(await networks()).toEqual([]);
    expect(await imageExists(docker, sandboxImage)).toBe(true);
    expect(await imageExists(docker, platformImage())).toBe(true);
    expect((await foreign[0]!.inspect()).State.Running).toBe(true);
    // The home, and in it what the stack recorded of its installation, stays for the next uninstall.
    expect(JSON.parse(readFileSync(join(svcHome, "selfhost.json"), "utf8")).installations[0]).toMatchObject({
      id: installation,
      images: expect.arrayContaining([sandboxImage]),
    });
  }, 300_000);

  it("uninstall keeps a platform image another installation runs; without one it removes every image of the installation", async () => {
    // Another installation's sandbox on the same platform image: its images stay, and the uninstall says why.
    const sharer = await foreignSandbox(docker, platformImage());
    foreign.push(sharer);
    installRecord();
    const shared = await svc(["uninstall", "--yes", "--keep-home", "--keep-auth", "--json"], { env: home.env });
    expect(shared.code, shared.stderr).toBe(0);
    const kept = JSON.parse(shared.stdout).docker;
    expect(kept.images).toEqual([]);
    expect(kept.images_kept).toEqual(
      expect.arrayContaining([
        { image: sandboxImage, reason: expect.stringContaining("another installation runs") },
        { image: platformImage(), reason: "another container runs it" },
      ]),
    );
    expect(await imageExists(docker, platformImage())).toBe(true);
    await sharer.remove({ force: true });

    installRecord();
    const res = await svc(["uninstall", "--yes", "--json"], { env: home.env });
    expect(res.code, res.stderr).toBe(0);
    const out = JSON.parse(res.stdout);
    expect(out).toMatchObject({ home: { path: svcHome, removed: true }, config: { removed: true } });
    expect(out.docker).toEqual({
      installations: [installation],
      containers: [],
      networks: [],
      volumes: [],
      images: [sandboxImage, platformImage()],
      images_kept: [],
    });
    expect(await imageExists(docker, sandboxImage)).toBe(false);
    expect(await imageExists(docker, platformImage())).toBe(false);
    // Base images are every installation's: never removed.
    expect(await imageExists(docker, baseRef)).toBe(true);
    expect(await imageExists(docker, BASE_IMAGE)).toBe(true);
    expect(await containers()).toEqual([]);
    expect(await networks()).toEqual([]);
    expect((await docker.listVolumes({ filters: { label: [label()] } })).Volumes ?? []).toEqual([]);
    expect((await foreign[0]!.inspect()).State.Running).toBe(true);
    expect(existsSync(svcHome)).toBe(false);
  }, 300_000);
});
