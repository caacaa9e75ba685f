import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { PassThrough, type Readable } from "node:stream";

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

/** A command whose input and output stream, in a process group of its own (e.g. `git http-backend` and its children). */
export type StreamRequest = {
  file: string;
  args: string[];
  env?: Record<string, string | undefined>;
  /** false: `env` is the whole environment, nothing of this process's (say, its secrets) reaches the command. */
  extendEnv?: boolean;
};

export type StreamingChild = {
  pid: number;
  /** Its standard input (end it for EOF) and its standard output, on one socket. */
  stdio: Socket;
  stderr: Readable;
  /** Its exit code, null when a signal ended it. */
  exited: Promise<number | null>;
  /** Signals its whole process group. */
  killGroup(): void;
};

type Env = { set: Record<string, string>; unset: string[]; extend: boolean };
type RunWire = Env & {
  kind: "run";
  id: number;
  file: string;
  args: string[];
  cwd?: string;
  input?: string;
  timeoutMs: number;
  maxBuffer: number;
};
type StreamWire = Env & { kind: "stream"; id: number; file: string; args: string[] };
type Answer =
  | ({ id: number; kind: "ran" } & SpawnResult)
  | { id: number; kind: "started"; pid: number }
  | { id: number; kind: "stderr"; chunk: string }
  | { id: number; kind: "exited"; exitCode: number | null; failure?: string };

/**
 * The helper's whole program, run with `node -e`: it spawns what it is sent and answers with the output. Plain
 * node:child_process here, since it carries no modules of ours (so the bundles need no file beside them). A
 * streaming command gets one end of a Unix socket pair as its stdin and stdout, the other end goes to the caller
 * with the answer (IPC handle passing): its bytes never pass through the helper. The pairs come from a socket in a
 * directory only this user may enter.
 */
const HELPER = `
const { spawn } = require("node:child_process");
const { createServer, connect } = require("node:net");
const { mkdtempSync, rmSync } = require("node:fs");
const { join } = require("node:path");
const { tmpdir } = require("node:os");
// The caller's commands end with it. One that would move a branch (a merge's update-ref) must not land after
// another process has judged the caller's unfinished work (its merge intent) by the branch as it was: SIGTERM, on
// which git removes its lock files and leaves the ref as it found it, unless the ref was already written.
const running = new Set();
process.on("disconnect", () => {
  for (const end of running) end();
  process.exit(0);
});
// A command read after the caller died is not started, for the same reason.
const parent = process.ppid;
const orphaned = () => process.ppid !== parent && process.exit(0);
let pairs;
function pair() {
  if (!pairs) {
    const dir = mkdtempSync(join(tmpdir(), "svc-spawner-"));
    const path = join(dir, "pair.sock");
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    const accepting = [];
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (s) => accepting.shift()(s));
    pairs = { accepting, listening: new Promise((r) => server.listen(path, r)), path };
  }
  // The command gets the connecting end; the caller the accepted one, which the server never reads (pauseOnConnect):
  // a connecting socket reads from the start, so as the caller's end it would swallow what the command writes
  // before the caller holds it (git http-backend's headers) into this process, where it is lost.
  // Accepted ends pair with connecting ones in order; a connection that failed never arrives, so its place goes too.
  return pairs.listening.then(() => new Promise((resolve, reject) => {
    const inner = connect({ path: pairs.path, allowHalfOpen: true });
    const take = (outer) => resolve([inner, outer]);
    pairs.accepting.push(take);
    inner.on("error", (e) => {
      const place = pairs.accepting.indexOf(take);
      if (place >= 0) pairs.accepting.splice(place, 1);
      reject(e);
    });
  }));
}
function environment(m) {
  const env = m.extend ? { ...process.env, ...m.set } : { ...m.set };
  for (const name of m.unset) delete env[name];
  return env;
}
function run(m) {
  const out = [], err = [];
  let size = 0, failure, done = false, timer;
  const finish = (exitCode) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    process.send({ id: m.id, kind: "ran", exitCode, failure, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() });
  };
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env: environment(m), stdio: [m.input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
  } catch (e) {
    failure = e.message;
    return finish(null);
  }
  const end = () => child.kill("SIGTERM");
  running.add(end);
  child.on("exit", () => running.delete(end));
  timer = setTimeout(() => { failure = "timed out after " + m.timeoutMs + " ms"; child.kill(); }, m.timeoutMs);
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
}
async function stream(m) {
  let inner, outer, child;
  try {
    [inner, outer] = await pair();
    orphaned();
    child = spawn(m.file, m.args, { env: environment(m), stdio: [inner, inner, "pipe"], detached: true });
  } catch (e) {
    inner?.destroy();
    outer?.destroy();
    return process.send({ id: m.id, kind: "exited", exitCode: null, failure: e.message });
  }
  inner.destroy();
  let exited = false;
  child.on("error", (e) => {
    if (exited) return;
    exited = true;
    outer.destroy();
    process.send({ id: m.id, kind: "exited", exitCode: null, failure: e.message });
  });
  if (child.pid === undefined) return;
  const end = () => { try { process.kill(-child.pid, "SIGTERM"); } catch {} };
  running.add(end);
  child.on("exit", () => running.delete(end));
  process.send({ id: m.id, kind: "started", pid: child.pid }, outer);
  child.stderr.on("data", (chunk) => process.send({ id: m.id, kind: "stderr", chunk: chunk.toString() }));
  child.on("close", (code) => {
    if (exited) return;
    exited = true;
    process.send({ id: m.id, kind: "exited", exitCode: code });
  });
}
process.on("message", (m) => orphaned() || (m.kind === "run" ? run(m) : stream(m)));
`;

function wireEnv(env: Record<string, string | undefined> = {}, extend = true): Env {
  const set: Record<string, string> = {};
  const unset: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) unset.push(name);
    else set[name] = value;
  }
  return { set, unset, extend };
}

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
  /** Each command in flight: what its helper's answers go to, and what it is told when the helper is lost. */
  const pending = new Map<number, { answer(message: Answer, handle?: Socket): void; lost(why: string): void }>();

  function start(): ChildProcess {
    const child = spawn(process.execPath, ["-e", HELPER], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "advanced",
    });
    child.on("message", (message: Answer, handle?: Socket) => pending.get(message.id)?.answer(message, handle));
    const lost = (why: string) => {
      if (helper === child) helper = undefined;
      for (const command of [...pending.values()]) command.lost(`the process spawner ${why}`);
    };
    child.on("exit", (code, signal) => lost(`exited (${signal ?? code})`));
    child.on("error", (err) => lost(`failed: ${err.message}`));
    child.unref();
    child.channel?.unref();
    return child;
  }

  function settled(id: number): void {
    pending.delete(id);
    if (pending.size === 0) helper?.channel?.unref();
  }

  /** Sends a command; the helper is held (this process kept alive) while any command is in flight. */
  function send(wire: RunWire | StreamWire, lost: (why: string) => void): void {
    helper ??= start();
    helper.channel?.ref();
    helper.send(wire, (err) => {
      if (err && pending.has(wire.id)) lost(`is gone: ${err.message}`);
    });
  }

  return {
    run(request: SpawnRequest): Promise<SpawnResult> {
      const id = nextId++;
      return new Promise((resolve) => {
        const settle = (result: SpawnResult) => {
          settled(id);
          resolve(result);
        };
        const lost = (why: string) => settle({ stdout: "", stderr: "", exitCode: null, failure: why });
        pending.set(id, { answer: ({ id: _, kind: __, ...result }: Answer & SpawnResult) => settle(result), lost });
        send(
          {
            kind: "run",
            id,
            file: request.file,
            args: request.args,
            cwd: request.cwd,
            ...wireEnv(request.env),
            input: request.input,
            timeoutMs: request.timeoutMs ?? 120_000,
            maxBuffer: request.maxBuffer ?? 64 * 1024 * 1024,
          },
          lost,
        );
      });
    },

    /** Starts a streaming command; rejects when it could not start. */
    stream(request: StreamRequest): Promise<StreamingChild> {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        const stderr = new PassThrough();
        let exit: (code: number | null) => void = () => {};
        const exited = new Promise<number | null>((r) => {
          exit = r;
        });
        let started: StreamingChild | undefined;
        const end = (code: number | null, failure?: string) => {
          settled(id);
          stderr.end();
          if (started) exit(code);
          else reject(new Error(failure ?? "the command did not start"));
        };
        pending.set(id, {
          answer(message, handle) {
            if (message.kind === "started" && handle) {
              const pid = message.pid;
              started = {
                pid,
                stdio: handle,
                stderr,
                exited,
                killGroup() {
                  try {
                    process.kill(-pid, "SIGKILL");
                  } catch {
                    // Already gone.
                  }
                },
              };
              resolve(started);
            } else if (message.kind === "stderr") stderr.write(message.chunk);
            else if (message.kind === "exited") end(message.exitCode, message.failure);
          },
          lost: (why) => end(null, why),
        });
        send(
          { kind: "stream", id, file: request.file, args: request.args, ...wireEnv(request.env, request.extendEnv) },
          (why) => end(null, why),
        );
      });
    },
  };
}

/**
 * This process's spawner: one per process, since what it saves is this process's own cost of forking, and a
 * helper per caller would only add helpers.
 */
const shared = createProcessSpawner();
export const spawnBuffered = (request: SpawnRequest): Promise<SpawnResult> => shared.run(request);
export const spawnStreaming = (request: StreamRequest): Promise<StreamingChild> => shared.stream(request);
