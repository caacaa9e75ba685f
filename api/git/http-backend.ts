import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { type StreamingChild, spawnStreaming } from "../../orchestrator/process-spawner.ts";
import { BASE_ENV, credentialsIn, redact } from "./run.ts";

export type CgiRequest = {
  method: string;
  /** `/<repo>.git/<service path>`, already validated. */
  pathInfo: string;
  query: string;
  headers: IncomingMessage["headers"];
  body: Readable | undefined;
  remoteUser: string;
  remoteAddr: string;
  /** Settles when the request must not reach git after all (a push past its size): git is stopped, this answers. */
  refusal?: Promise<CgiAnswer>;
};

/** An answer of the API's own in place of git's. */
export type CgiAnswer = { status: number; contentType: string; body: Buffer };

/** A request git still serves after this long is ended, clone or push: no client waits that long on one. */
export const GIT_REQUEST_DEADLINE_MS = 15 * 60_000;

const HEADER_END = Buffer.from("\r\n\r\n");
const HEADER_END_LF = Buffer.from("\n\n");

/**
 * Serves one smart-HTTP request with `git http-backend` (CGI): the request body streams into it, its answer
 * streams back at the pace the client reads, so packs of any size pass without being buffered.
 * http-backend runs upload-pack, which runs pack-objects (and receive-pack its hooks): they run in a process group of
 * their own, ended whole when the client goes away or the deadline passes. Killing http-backend alone left its
 * children packing for minutes.
 */
export async function runHttpBackend(
  req: CgiRequest,
  res: ServerResponse,
  env: Record<string, string>,
  deadlineMs = GIT_REQUEST_DEADLINE_MS,
): Promise<{ exitCode: number; failure?: string }> {
  let child: StreamingChild;
  try {
    child = await spawnStreaming({
      file: "git",
      args: ["http-backend"],
      // Nothing of the API's own environment (its secrets) reaches git or the hooks it runs.
      extendEnv: false,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...BASE_ENV,
        ...env,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method,
        PATH_INFO: req.pathInfo,
        QUERY_STRING: req.query,
        REMOTE_USER: req.remoteUser,
        REMOTE_ADDR: req.remoteAddr,
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
        ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
        ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
      },
    });
  } catch (err) {
    const failure = `git http-backend did not start: ${(err as Error).message}`;
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`${failure}\n`);
    return { exitCode: -1, failure };
  }
  const { stdio } = child;
  let exited = false;
  const deadline = setTimeout(() => {
    child.killGroup();
    res.destroy();
  }, deadlineMs);
  let head = Buffer.alloc(0);
  let headersSent = false;
  let stderr = "";
  let refused = false;
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  void req.refusal?.then((answer) => {
    if (res.writableEnded) return;
    refused = true;
    // Git never sees the end of the body, so receive-pack updates no ref and drops the quarantined pack.
    req.body?.unpipe(stdio);
    stdio.destroy();
    child.killGroup();
    // Until the body ends, receive-pack writes nothing after http-backend's headers: the answer follows them.
    if (!headersSent) res.writeHead(answer.status, { "content-type": answer.contentType });
    res.end(answer.body);
  });

  stdio.on("data", (chunk: Buffer) => {
    if (refused) return;
    if (headersSent) {
      write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    let end = head.indexOf(HEADER_END);
    let sep = HEADER_END.length;
    if (end < 0) {
      end = head.indexOf(HEADER_END_LF);
      sep = HEADER_END_LF.length;
    }
    if (end < 0) return;
    let status = 200;
    for (const line of head.subarray(0, end).toString("latin1").split(/\r?\n/)) {
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 500;
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    headersSent = true;
    write(head.subarray(end + sep));
  });
  function write(chunk: Buffer): void {
    if (res.write(chunk)) return;
    stdio.pause();
    res.once("drain", () => stdio.resume());
  }
  stdio.on("error", () => {});
  // The client gone before git finished: every process of the request ends with it.
  res.on("close", () => {
    if (!exited) child.killGroup();
    stdio.destroy();
  });
  if (req.body) req.body.pipe(stdio);
  else stdio.end();

  const [code] = await Promise.all([
    child.exited.finally(() => {
      exited = true;
    }),
    new Promise((r) => stdio.once("close", r)),
  ]);
  clearTimeout(deadline);
  const exitCode = code ?? -1;
  if (refused) return { exitCode };
  if (headersSent) {
    res.end();
    return { exitCode };
  }
  // Git ended without an answer: the client sees a 500, the log says why (a relayed push's hook talks to a remote
  // with credentials in its environment: none of them in either).
  const said = redact(stderr, credentialsIn(env)).trim();
  const failure = `git http-backend ended (${exitCode}) before its headers: ${said || "no stderr"}`;
  res.writeHead(500, { "content-type": "text/plain" });
  res.end(`git http-backend failed: ${said.split("\n").at(-1) || exitCode}\n`);
  return { exitCode, failure };
}
