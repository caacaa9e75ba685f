import { textLines } from "../../protocol/json-lines.ts";
import { SandboxLogLine } from "../../protocol/sandbox-access.ts";
import { DAEMON_LOGS_PATH } from "../../protocol/sandbox-log.ts";

/** How long the daemon may take to start answering. */
const ANSWER_TIMEOUT_MS = 5000;

export type LogsOptions = { follow: boolean; tail?: number; signal: AbortSignal };

function parseLine(text: string): SandboxLogLine | undefined {
  try {
    const line = SandboxLogLine.safeParse(JSON.parse(text));
    return line.success ? line.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The sandbox's log as its daemon serves it (`GET /svc/logs`, daemon/sandbox-log.ts), over the link it dialed like
 * everything else the API asks of a sandbox. Undefined when the daemon cannot be reached or keeps no log (an image
 * that predates the keeper): the engine's log serves then. A stream the link drops ends the log, as the engine's
 * ends with its container.
 */
export async function daemonLogs(
  target: { url: string; serviceKey: string },
  options: LogsOptions,
): Promise<AsyncIterable<SandboxLogLine> | undefined> {
  const query = new URLSearchParams({ follow: options.follow ? "1" : "0" });
  if (options.tail !== undefined) query.set("tail", String(options.tail));
  // A daemon that does not answer at once (frozen, its link half dead) leaves the log to the engine.
  const asked = new AbortController();
  const slow = setTimeout(() => asked.abort(), ANSWER_TIMEOUT_MS);
  const leave = () => asked.abort();
  options.signal.addEventListener("abort", leave, { once: true });
  const res = await fetch(`${target.url}${DAEMON_LOGS_PATH}?${query}`, {
    headers: { authorization: `Bearer ${target.serviceKey}` },
    signal: asked.signal,
  })
    .catch(() => undefined)
    .finally(() => clearTimeout(slow));
  if (!res?.ok || !res.body) {
    options.signal.removeEventListener("abort", leave);
    await res?.body?.cancel();
    return undefined;
  }
  const body = res.body as unknown as AsyncIterable<Uint8Array>;
  return (async function* () {
    try {
      for await (const text of textLines(body)) {
        const line = parseLine(text);
        if (line) yield line;
      }
    } catch {
      // The link dropped (the sandbox stopped) or the reader left: the log ends here.
    }
  })();
}
