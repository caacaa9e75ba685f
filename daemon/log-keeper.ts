import { constants, openSync } from "node:fs";
import { Socket } from "node:net";
import { join } from "node:path";
import { createLogWriter } from "./log-writer.ts";

/**
 * The keeper, started by the sandbox's entrypoint before anything else: reads the two FIFOs PID 1's stdout and
 * stderr now write to, passes every byte on to the container's own outputs (the engine's log) and records the lines.
 * It must outlive everything else in the sandbox: a failed write is dropped, never fatal.
 */
function keep(dir: string): void {
  const writer = createLogWriter(dir);
  for (const [stream, out] of [
    ["stdout", process.stdout],
    ["stderr", process.stderr],
  ] as const) {
    out.on("error", () => {});
    // Opened for reading and writing: the open never waits for a writer, and the pipe never reaches end-of-file.
    const pipe = new Socket({ fd: openSync(join(dir, stream), constants.O_RDWR), readable: true, writable: false });
    pipe.on("data", (data: Buffer) => {
      out.write(data);
      try {
        writer.write(stream, data);
      } catch (err) {
        process.stderr.write(`svc-log: could not record the log: ${(err as Error).message}\n`);
      }
    });
    pipe.on("error", (err) => process.stderr.write(`svc-log: ${stream}: ${err.message}\n`));
  }
}

const [dir] = process.argv.slice(2);
if (!dir) {
  process.stderr.write("usage: svc-log <dir>\n");
  process.exit(2);
}
keep(dir);
