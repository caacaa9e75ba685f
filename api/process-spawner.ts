import { type ChildProcess, spawn } from "node:child_process";

/** One command run to its end, its output collected: what `git` and the CLI's callers need. */
export type SpawnRequest = {
  file: string;
  args: string[];
  cwd?: string;
  /** Set over this process's environment; `undefined` removes a variable. */
  env?: Record<string, string | undefined>;
  input?: string;
  timeoutMs?: number;
  maxBuffer?: number;
};

export type SpawnResult = {
  stdout: string;
  stderr: string;
  /** null when the command was killed (a signal, its timeout, too much output) or could not start. */
  exitCode: number | null;
  /** Why there is no exit code, in words; undefined when the command ran to its end. */
  failure?: string;
};

type Wire = {
  id: number;
  file: string;
  args: string[];
  cwd?: string;
  set: Record<string, string>;
  unset: string[];
  input?: string;
  timeoutMs: number;
  maxBuffer: number;
};

/**
 * The helper's whole program, run with `node -e`: it spawns what it is sent and answers with the output. Plain
 * node:child_process here, since it carries no modules of ours (so the bundles need no file beside them).
 */
const HELPER = `
const { spawn } = require("node:child_process");
process.on("disconnect", () => process.exit(0));
process.on("message", (m) => {
  const env = { ...process.env, ...m.set };
  for (const name of m.unset) delete env[name];
  const out = [], err = [];
  let size = 0, failure, done = false;
  const finish = (exitCode) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    process.send({ id: m.id, exitCode, failure, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() });
  };
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env, stdio: [m.input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
  } catch (e) {
    failure = e.message;
    return finish(null);
  }
  const timer = setTimeout(() => { failure = "timed out after " + m.timeoutMs + " ms"; child.kill(); }, m.timeoutMs);
  const collect = (chunks) => (chunk) => {
    size += chunk.length;
    if (size <= m.maxBuffer) chunks.push(chunk);
    else if (!failure) { failure = "output over " + m.maxBuffer + " bytes"; child.kill(); }
  };
  child.stdout.on("data", collect(out));
  child.stderr.on("data", collect(err));
  child.on("error", (e) => { failure = failure || e.message; finish(null); });
  child.on("close", (code) => finish(failure ? null : code));
  if (m.input !== undefined) { child.stdin.on("error", () => {}); child.stdin.end(m.input); }
});
`;

/**
 * Runs commands from a small helper process instead of this one. Linux copies a process's page tables at every
 * fork and then takes a write fault on each page it touches: a spawn from an API or a test process holding 300 to
 * 900 MB costs 25 to 50 ms of a core (measured here), from a 45 MB helper 2 to 3 ms, and an API spawns git for most
 * requests. The helper starts at the first command, leaves with this process (its IPC channel closes), and keeps
 * nothing alive while idle; a helper that died is replaced at the next command, and its commands in flight fail.
 */
export function createProcessSpawner() {
  let helper: ChildProcess | undefined;
  let nextId = 1;
  const pending = new Map<number, (result: SpawnResult) => void>();

  function start(): ChildProcess {
    const child = spawn(process.execPath, ["-e", HELPER], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "advanced",
    });
    child.on("message", (message: SpawnResult & { id: number }) => {
      const settle = pending.get(message.id);
      pending.delete(message.id);
      if (pending.size === 0) child.channel?.unref();
      const { id: _, ...result } = message;
      settle?.(result);
    });
    const lost = (why: string) => {
      if (helper === child) helper = undefined;
      for (const [id, settle] of pending) {
        pending.delete(id);
        settle({ stdout: "", stderr: "", exitCode: null, failure: `the process spawner ${why}` });
      }
    };
    child.on("exit", (code, signal) => lost(`exited (${signal ?? code})`));
    child.on("error", (err) => lost(`failed: ${err.message}`));
    child.unref();
    child.channel?.unref();
    return child;
  }

  return {
    run(request: SpawnRequest): Promise<SpawnResult> {
      helper ??= start();
      const child = helper;
      const set: Record<string, string> = {};
      const unset: string[] = [];
      for (const [name, value] of Object.entries(request.env ?? {})) {
        if (value === undefined) unset.push(name);
        else set[name] = value;
      }
      const wire: Wire = {
        id: nextId++,
        file: request.file,
        args: request.args,
        cwd: request.cwd,
        set,
        unset,
        input: request.input,
        timeoutMs: request.timeoutMs ?? 120_000,
        maxBuffer: request.maxBuffer ?? 64 * 1024 * 1024,
      };
      return new Promise((resolve) => {
        pending.set(wire.id, resolve);
        // Held while a command runs: an API or a CLI that awaits one must not exit under it.
        child.channel?.ref();
        child.send(wire, (err) => {
          if (!err || !pending.delete(wire.id)) return;
          resolve({ stdout: "", stderr: "", exitCode: null, failure: `the process spawner is gone: ${err.message}` });
        });
      });
    },
  };
}

export type ProcessSpawner = ReturnType<typeof createProcessSpawner>;

/**
 * This process's spawner: one per process, since what it saves is this process's own cost of forking, and a
 * helper per caller would only add helpers.
 */
const shared = createProcessSpawner();
export const spawnBuffered = (request: SpawnRequest): Promise<SpawnResult> => shared.run(request);
