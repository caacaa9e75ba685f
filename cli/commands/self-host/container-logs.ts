import { demux, linesOf } from "../../../protocol/docker-streams.ts";
import type { SandboxLogLine } from "../../../protocol/sandbox-access.ts";
import { CliError } from "../../errors.ts";
import { dockerStream } from "./docker-engine.ts";

/**
 * A container's log as the engine keeps it (`GET /containers/{name}/logs`), line by line: its last `tail` lines, then
 * with `follow` each line as it is written, until the container stops. Compose mode reads its services' logs this
 * way: Debian's docker-compose is Python, and its own `logs` spent half a second starting each time.
 */
export async function* containerLogLines(
  name: string,
  options: { tail: number; follow?: boolean },
): AsyncIterable<SandboxLogLine> {
  const query = `stdout=1&stderr=1&tail=${options.tail}${options.follow ? "&follow=1" : ""}`;
  const res = await dockerStream(`/containers/${encodeURIComponent(name)}/logs?${query}`);
  if ("error" in res) throw new CliError(`the Docker engine did not answer: ${res.error}`);
  if (res.statusCode !== 200) {
    res.resume();
    throw new CliError(`the Docker engine refused the log of ${name} (HTTP ${res.statusCode})`);
  }
  yield* linesOf(demux(res));
}
