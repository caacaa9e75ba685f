import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { createConnection, createServer } from "node:net";

export type DataDirLock = { release(): Promise<void> };

/** The socket's name: one per directory, however the path to it is spelled. */
function lockName(dir: string): string {
  return `\0svc-pglite-${createHash("sha256").update(realpathSync(dir)).digest("hex").slice(0, 32)}`;
}

/** The pid the holder answers with, or undefined when it does not answer within a second. */
function askHolder(name: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    let answer = "";
    const socket = createConnection(name);
    socket.setTimeout(1000, () => socket.destroy());
    socket.on("data", (chunk) => {
      answer += chunk.toString();
    });
    socket.on("error", () => resolve(undefined));
    socket.on("close", () => resolve(Number.parseInt(answer, 10) || undefined));
  });
}

/**
 * Holds `dir` for this process alone. PGlite has no lock of its own (a server has postmaster.pid): two processes
 * on one data directory each write it as if alone, and the database silently loses the rows of one of them, or no
 * longer opens. The lock is an abstract Unix socket named after the directory, which the kernel frees when its
 * process ends, a SIGKILL included, so no stale lock outlives its holder. Abstract names are per network namespace:
 * enough for the embedded API, which runs on the host; containers run PostgreSQL instead.
 */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const name = lockName(dir);
  const server = createServer((socket) => socket.end(`${process.pid}\n`));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(name, () => resolve());
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    const pid = await askHolder(name);
    throw new Error(
      `the embedded database in ${dir} is in use by another process${pid ? ` (pid ${pid})` : ""}: ` +
        "one svc API at a time may open it; stop the other (svc self-host stop) or give this one its own SVC_HOME",
    );
  }
  server.unref();
  return { release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
