import { type IncomingMessage, request as requestPlain } from "node:http";

/** One answer: its status, and its body to read once, as text or as the stream it arrives as. */
export type HttpAnswer = {
  status: number;
  /** 2xx. */
  ok: boolean;
  body: IncomingMessage;
  text(): Promise<string>;
};

export type HttpRequestOptions = {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Ends the request, or the body being read; the request then fails with the signal's reason, as fetch does. */
  signal?: AbortSignal;
  /** Fails the request with a TimeoutError when it has not finished by then, the body included. */
  timeoutMs?: number;
};

/**
 * The CLI's HTTP client, on node:http rather than the global fetch: a command that called fetch once spent 0.34 CPU-s,
 * one that used node:http 0.07 (loading Node's bundled undici and compiling its WebAssembly HTTP parser, at every
 * command). node:https is loaded only for an https URL.
 */
export async function httpRequest(url: string | URL, options: HttpRequestOptions = {}): Promise<HttpAnswer> {
  const target = typeof url === "string" ? new URL(url) : url;
  const request = target.protocol === "https:" ? (await import("node:https")).request : requestPlain;
  const timeout = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const signal = timeout && options.signal ? AbortSignal.any([options.signal, timeout]) : (timeout ?? options.signal);
  const headers: Record<string, string | number> = { ...options.headers };
  if (options.body !== undefined) headers["content-length"] = Buffer.byteLength(options.body);
  return new Promise((resolve, reject) => {
    const req = request(target, { method: options.method ?? "GET", headers, signal }, (res) => {
      const status = res.statusCode ?? 0;
      resolve({
        status,
        ok: status >= 200 && status < 300,
        body: res,
        text: () =>
          new Promise((done, fail) => {
            const chunks: Buffer[] = [];
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () => done(Buffer.concat(chunks).toString("utf8")));
            res.on("error", (err) => fail(signal?.aborted ? signal.reason : err));
          }),
      });
    });
    req.on("error", (err) => reject(signal?.aborted ? signal.reason : err));
    req.end(options.body);
  });
}

/** Why a request failed, for a message: the system's code (ECONNREFUSED, ENOTFOUND) when there is one. */
export function failureReason(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : (err as Error).message;
}
