import type { z } from "zod";
import { ErrorBody } from "../protocol/errors.ts";
import { CliError } from "./errors.ts";

export type RequestOptions = { body?: unknown; query?: Record<string, string | undefined> };

/** One HTTP error from the API, with its status and stable code, turned into exit code 1 by the CLI. */
export class ApiRequestError extends CliError {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly body: ErrorBody | undefined,
  ) {
    super(message);
  }
}

export function createApiClient(options: { baseUrl: string; token: string | undefined }) {
  const base = options.baseUrl.replace(/\/+$/, "");

  async function request<S extends z.ZodType>(
    method: string,
    path: string,
    schema: S,
    opts: RequestOptions = {},
  ): Promise<z.infer<S>> {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const headers: Record<string, string> = { accept: "application/json" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(`cannot reach ${base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const body = ErrorBody.safeParse(json);
      const message = body.success ? body.data.error : `HTTP ${res.status}`;
      const detail =
        body.success && Array.isArray(body.data.conflicts) ? `: ${(body.data.conflicts as string[]).join(", ")}` : "";
      const reason = body.success && typeof body.data.reason === "string" ? ` (${body.data.reason})` : "";
      throw new ApiRequestError(
        `${message}${reason}${detail} [HTTP ${res.status}]`,
        res.status,
        body.success ? body.data.code : undefined,
        body.success ? body.data : undefined,
      );
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new CliError(`unexpected answer from ${method} ${path}: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  }

  return { baseUrl: base, request };
}

export type ApiClient = ReturnType<typeof createApiClient>;
