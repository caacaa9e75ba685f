import { type IncomingMessage, request } from "node:http";

/** Where the Docker engine answers: DOCKER_HOST (unix:// or tcp://) or the usual socket. */
function endpoint(): { socketPath: string } | { host: string; port: number } {
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith("tcp://")) {
    const url = new URL(host.replace(/^tcp:/, "http:"));
    return { host: url.hostname, port: Number(url.port || 2375) };
  }
  return { socketPath: host?.startsWith("unix://") ? host.slice("unix://".length) : "/var/run/docker.sock" };
}

export type DockerAnswer = { status: number; body: string } | { error: string };

/**
 * One call to the engine's API (a JSON body when given; a Buffer is sent as a tar archive, as `PUT .../archive`
 * takes): its status and body, or the reason it did not answer.
 */
export function dockerCall(method: string, path: string, body?: unknown, timeoutMs = 3000): Promise<DockerAnswer> {
  return new Promise((resolve) => {
    const tar = Buffer.isBuffer(body);
    const payload = body === undefined ? undefined : tar ? body : JSON.stringify(body);
    const type = tar ? "application/x-tar" : "application/json";
    const headers = payload ? { "content-type": type, "content-length": Buffer.byteLength(payload) } : {};
    const req = request({ ...endpoint(), path, method, headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end(payload);
  });
}

/** One GET to the engine's API: its status and body, or the reason it did not answer. */
export const dockerGet = (path: string, timeoutMs = 3000) => dockerCall("GET", path, undefined, timeoutMs);

/** A GET whose answer is read as it comes (a log followed): the response, or the reason the engine did not answer. */
export function dockerStream(path: string): Promise<IncomingMessage | { error: string }> {
  return new Promise((resolve) => {
    const req = request({ ...endpoint(), path, method: "GET" }, resolve);
    req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end();
  });
}
