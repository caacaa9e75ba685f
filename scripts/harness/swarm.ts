import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import type Docker from "dockerode";

const run = promisify(execFile);

/**
 * A single-node Docker Swarm for the test files that need one, on the machine's engine. Several test files (in
 * several worker processes, maybe of several `vitest` runs) share it: the first that finds no swarm initialises one
 * and marks it as the tests' own; each user registers under its pid; the last live user leaves it and removes what
 * leaving leaves behind (docker_gwbridge, ingress). A swarm that was there before (someone's own) is never left.
 *
 * State lives in a directory under os.tmpdir(), changed only under a mkdir-based lock:
 *   lock/owner     the pid holding the lock (a lock whose holder died is broken)
 *   users/<pid>    `<process start time> <count>`: a pid whose process is gone, or was reused, no longer counts
 *   ours           present while the swarm is one the tests initialised
 */
export const SWARM_STATE_DIR = join(tmpdir(), "svc-test-swarm");
const LOCK = join(SWARM_STATE_DIR, "lock");
const USERS = join(SWARM_STATE_DIR, "users");
const OURS = join(SWARM_STATE_DIR, "ours");
/** A lock held longer than this is taken for abandoned whatever its owner file says (a holder stuck mid-write). */
const LOCK_STALE_MS = 120_000;

/** The kernel's start time of a process (field 22 of /proc/<pid>/stat), or undefined when there is none. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces: count fields from after its closing parenthesis.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function lockIsStale(): boolean {
  try {
    const owner = Number(readFileSync(join(LOCK, "owner"), "utf8").trim());
    if (owner && startTime(owner) === undefined) return true;
  } catch {
    // No owner file yet: its holder is between mkdir and the write, or died there; the age decides.
  }
  try {
    return Date.now() - statSync(LOCK).mtimeMs > LOCK_STALE_MS;
  } catch {
    return false;
  }
}

async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  mkdirSync(SWARM_STATE_DIR, { recursive: true });
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (lockIsStale()) {
        // Moved aside first: of two breakers only one rename succeeds, and neither removes a lock taken since.
        const aside = `${LOCK}.stale-${process.pid}-${Date.now()}`;
        try {
          renameSync(LOCK, aside);
          rmSync(aside, { recursive: true, force: true });
        } catch {}
        continue;
      }
      await delay(50 + Math.random() * 100);
    }
  }
  writeFileSync(join(LOCK, "owner"), String(process.pid));
  try {
    return await fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/** Live users by pid and count; entries of dead processes (or of a pid now reused) are removed. */
function liveUsers(): Map<number, number> {
  mkdirSync(USERS, { recursive: true });
  const live = new Map<number, number>();
  for (const name of readdirSync(USERS)) {
    const pid = Number(name);
    const [started, count] = readFileSync(join(USERS, name), "utf8").trim().split(" ");
    if (pid && started && startTime(pid) === started) live.set(pid, Number(count) || 0);
    else rmSync(join(USERS, name), { force: true });
  }
  return live;
}

function setUser(count: number): void {
  const file = join(USERS, String(process.pid));
  if (count > 0) writeFileSync(file, `${startTime(process.pid)} ${count}`);
  else rmSync(file, { force: true });
}

const docker = (...args: string[]) => run("docker", args, { timeout: 60_000 });

async function swarmState(): Promise<{ state: string; manager: boolean }> {
  const { stdout } = await docker("info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}");
  const [state = "", manager] = stdout.trim().split(" ");
  return { state, manager: manager === "true" };
}

/** Registers this process as a user of the tests' swarm, initialising one when the engine is in none. */
export async function acquireSwarm(): Promise<void> {
  await withLock(async () => {
    const users = liveUsers();
    const { state, manager } = await swarmState();
    if (state === "inactive") {
      await docker("swarm", "init", "--advertise-addr", "127.0.0.1", "--listen-addr", "127.0.0.1:2377");
      writeFileSync(OURS, String(process.pid));
    } else if (!manager) {
      throw new Error(`the Docker engine is in a swarm (${state}) but not a manager: the swarm tests need one`);
    }
    setUser((users.get(process.pid) ?? 0) + 1);
  });
}

/** Unregisters this process; the last live user leaves a swarm the tests initialised, and tidies after it. */
export async function releaseSwarm(): Promise<void> {
  await withLock(async () => {
    const users = liveUsers();
    const mine = (users.get(process.pid) ?? 1) - 1;
    setUser(mine);
    if (mine > 0) users.set(process.pid, mine);
    else users.delete(process.pid);
    if (users.size > 0) return;
    let ours = false;
    try {
      statSync(OURS);
      ours = true;
    } catch {}
    if (!ours) return;
    await docker("swarm", "leave", "--force").catch(() => {});
    // Leaving keeps the node's gateway bridge (and, on a busy engine, sometimes the ingress network's remains).
    for (const network of ["docker_gwbridge", "ingress"]) await docker("network", "rm", network).catch(() => {});
    rmSync(OURS, { force: true });
  });
}

/** Removes services, networks and volumes carrying a label (`key=value`): what a test file made. */
export async function removeLabelled(engine: Docker, label: string): Promise<void> {
  const filters = { label: [label] };
  for (const service of await engine.listServices({ filters }))
    await engine
      .getService(service.ID)
      .remove()
      .catch(() => {});
  // Containers joined to its networks (a relay: orchestrator/sandbox/swarm-relay.ts) hold them too.
  for (const container of await engine.listContainers({ all: true, filters }))
    await engine
      .getContainer(container.Id)
      .remove({ force: true })
      .catch(() => {});
  // A service's network stays in use until its task's container stopped: try for a while.
  const deadline = Date.now() + 20_000;
  for (const network of await engine.listNetworks({ filters })) {
    while (
      !(await engine
        .getNetwork(network.Id)
        .remove()
        .then(
          () => true,
          (err) => (err as { statusCode?: number }).statusCode === 404,
        )) &&
      Date.now() < deadline
    )
      await delay(250);
  }
  const { Volumes } = await engine.listVolumes({ filters });
  for (const volume of Volumes ?? [])
    await engine
      .getVolume(volume.Name)
      .remove()
      .catch(() => {});
}
