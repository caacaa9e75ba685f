import { request } from "node:http";
import { request as requestTls } from "node:https";

export type HttpAnswer = { status: number; body: string };

/**
 * A small HTTP client on node:http. The daemon avoids the global fetch on purpose: loading it costs ~10 MB of
 * resident memory, which every idle sandbox would pay.
 */
export function httpRequest(
  method: string,
  url: string,
  options: { body?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === "https:" ? requestTls : request;
    const req = send(
      target,
      {
        method,
        headers: {
          ...options.headers,
          ...(options.body !== undefined ? { "content-length": Buffer.byteLength(options.body) } : {}),
        },
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${target.pathname} timed out`)));
    req.on("error", reject);
    req.end(options.body);
  });
}
