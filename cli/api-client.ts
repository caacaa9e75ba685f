import { STATUS_CODES } from "node:http";
import { createParser } from "eventsource-parser";
import { z } from "zod";
import { ACCOUNT_HEADER } from "../protocol/account.ts";
import { ErrorBody } from "../protocol/errors.ts";
import { textLines } from "../protocol/json-lines.ts";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.ts";
import { failureReason, type HttpAnswer, httpRequest } from "./http-client.ts";

export type RequestOptions = { body?: unknown; query?: Record<string, string | undefined> };

/** API codes that mean the command line was wrong (exit 2), not that the operation failed. */
const USAGE_CODES = new Set(["SESSION_ID_AMBIGUOUS"]);

/** One HTTP error from the API, with its status and stable code, turned into exit code 1 (2 for USAGE_CODES). */
export class ApiRequestError extends CliError {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly body: ErrorBody | undefined,
  ) {
    super(message, code && USAGE_CODES.has(code) ? EXIT_USAGE : EXIT_FAILURE);
  }
}

/** An answer that is not the API's ErrorBody (an old daemon, a proxy in between) may still carry a message. */
const LooseError = z.object({ error: z.string().min(1) }).loose();

/**
 * `unreachableHint`: what to try when nothing answers at the URL (for the self-hosted stack: start it);
 * `unauthorizedHint`: how to log in again when the stored token is refused (401).
 */
export function createApiClient(options: {
  baseUrl: string;
  token: string | undefined;
  unreachableHint?: string;
  unauthorizedHint?: string;
  /** The account the user's account routes act on (`svc accounts use`), sent as ACCOUNT_HEADER. */
  account?: string;
}) {
  const base = options.baseUrl.replace(/\/+$/, "");

  async function send(method: string, path: string, opts: RequestOptions & { accept?: string; signal?: AbortSignal }) {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const headers: Record<string, string> = { accept: opts.accept ?? "application/json" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.account) headers[ACCOUNT_HEADER] = options.account;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    try {
      return await httpRequest(url, {
        method,
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: opts.signal,
      });
    } catch (err) {
      const hint = options.unreachableHint ? `; ${options.unreachableHint}` : "";
      throw new CliError(`cannot reach ${base} (${failureReason(err)})${hint}`);
    }
  }

  /** `<message> (<CODE>, HTTP <status>)`: what went wrong for the person, the code and status for a script. */
  function failure(res: { status: number }, json: unknown): ApiRequestError {
    const body = ErrorBody.safeParse(json);
    const loose = LooseError.safeParse(json);
    const message = loose.success ? loose.data.error : (STATUS_CODES[res.status] ?? "error").toLowerCase();
    const detail =
      body.success && Array.isArray(body.data.conflicts) ? `: ${(body.data.conflicts as string[]).join(", ")}` : "";
    const reason = body.success && typeof body.data.reason === "string" ? ` (${body.data.reason})` : "";
    const code = body.success ? `${body.data.code}, ` : "";
    const hint = res.status === 401 && options.unauthorizedHint ? `; ${options.unauthorizedHint}` : "";
    return new ApiRequestError(
      `${message}${reason}${detail} (${code}HTTP ${res.status})${hint}`,
      res.status,
      body.success ? body.data.code : undefined,
      body.success ? body.data : undefined,
    );
  }

  /** The answer's body as JSON; undefined when empty or not JSON (an error page of a proxy in between). */
  async function bodyJson(res: HttpAnswer): Promise<unknown> {
    const text = await res.text();
    try {
      return text ? JSON.parse(text) : undefined;
    } catch {
      return undefined;
    }
  }

  async function request<S extends z.ZodType>(
    method: string,
    path: string,
    schema: S,
    opts: RequestOptions = {},
  ): Promise<z.infer<S>> {
    const res = await send(method, path, opts);
    const json = await bodyJson(res);
    if (!res.ok) throw failure(res, json);
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new CliError(`unexpected answer from ${method} ${path}: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  }

  /** A server-sent event stream: each `data:` payload, parsed as JSON, until the server or `signal` ends it. */
  async function* events(path: string, signal: AbortSignal): AsyncGenerator<unknown> {
    const res = await send("GET", path, { accept: "text/event-stream", signal });
    if (!res.ok) throw failure(res, await bodyJson(res));
    const ready: string[] = [];
    const parser = createParser({ onEvent: ({ data }) => data && ready.push(data) });
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
        for (let data = ready.shift(); data !== undefined; data = ready.shift()) yield JSON.parse(data);
      }
    } catch (err) {
      if (!signal.aborted) throw new CliError(`the event stream broke: ${(err as Error).message}`);
    }
  }

  /** A binary answer's body as it arrives (a backup's dump, say), once the answer said it succeeded. */
  async function download(path: string): Promise<HttpAnswer["body"]> {
    const res = await send("GET", path, { accept: "application/octet-stream" });
    if (!res.ok) throw failure(res, await bodyJson(res));
    return res.body;
  }

  /** A JSON-lines stream (`application/x-ndjson`): each line parsed, until the server or `signal` ends it. */
  async function* jsonLines(path: string, query: Record<string, string | undefined>, signal: AbortSignal) {
    const res = await send("GET", path, { accept: "application/x-ndjson", query, signal });
    if (!res.ok) throw failure(res, await bodyJson(res));
    try {
      for await (const line of textLines(res.body)) yield JSON.parse(line) as unknown;
    } catch (err) {
      if (!signal.aborted) throw new CliError(`the stream broke: ${(err as Error).message}`);
    }
  }

  return { baseUrl: base, token: options.token, request, events, jsonLines, download, failure };
}

export type ApiClient = ReturnType<typeof createApiClient>;
