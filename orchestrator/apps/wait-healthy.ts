import type { AppProvider } from "./provider.ts";

const POLL_MS = 200;

/** The end of an instance's output, for a deploy's error: what the user needs to see why it died. */
export async function logTail(provider: AppProvider, id: string, secretNames: string[]): Promise<string> {
  try {
    const lines: string[] = [];
    const signal = AbortSignal.timeout(5000);
    for await (const { line } of await provider.logs(id, { follow: false, tail: 20, signal, secretNames }))
      lines.push(line);
    return lines.join("\n").slice(-4000);
  } catch {
    return "";
  }
}

/**
 * Resolves once `GET endpoint + path` answers 2xx; rejects when the instance stops running or the deadline
 * passes, with the end of its log.
 */
export async function waitHealthy(options: {
  provider: AppProvider;
  id: string;
  endpoint: string;
  path: string;
  timeoutMs: number;
  secretNames: string[];
}): Promise<void> {
  const { provider, id } = options;
  const deadline = Date.now() + options.timeoutMs;
  const fail = async (why: string) => {
    const tail = await logTail(provider, id, options.secretNames);
    return new Error(tail ? `${why}; its last output:\n${tail}` : why);
  };
  for (let i = 0; Date.now() < deadline; i++) {
    try {
      const res = await fetch(`${options.endpoint}${options.path}`, { signal: AbortSignal.timeout(2000) });
      await res.body?.cancel();
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    if (i % 5 === 4 && !(await provider.inspect(id))?.running) throw await fail("the app's container exited");
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  throw await fail(
    `the app did not answer GET ${options.path} with 2xx within ${Math.round(options.timeoutMs / 1000)}s`,
  );
}
