import { request } from "node:http";

/** Where the Docker engine answers: DOCKER_HOST (unix:// or tcp://) or the usual socket. */
function endpoint(): { socketPath: string } | { host: string; port: number } {
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith("tcp://")) {
    const url = new URL(host.replace(/^tcp:/, "http:"));
    return { host: url.hostname, port: Number(url.port || 2375) };
  }
  return { socketPath: host?.startsWith("unix://") ? host.slice("unix://".length) : "/var/run/docker.sock" };
}

/** One GET to the engine's API: its status and body, or the reason it did not answer. */
export function dockerGet(
  path: string,
  timeoutMs = 3000,
): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = request({ ...endpoint(), path, method: "GET", timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end();
  });
}
