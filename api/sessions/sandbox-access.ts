import { once } from "node:events";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { SandboxExec } from "../../orchestrator/sandbox/driver.ts";
import {
  createFrameReader,
  EXEC_UPGRADE,
  ExecQuery,
  ExecResize,
  encodeFrame,
  Frame,
  LogsQuery,
} from "../../protocol/sandbox-access.ts";
import { authorizeProject, bearer, checkSessionScope, type Principal, resolvePrincipal } from "../auth/authenticate.ts";
import { leastRole } from "../auth/route-roles.ts";
import { apiError } from "../errors.ts";
import { errorResponse, refuseUpgrade } from "../http/error-handler.ts";
import { sendJsonLines } from "../http/json-lines.ts";
import { parseInput } from "../http/validate.ts";
import { Params } from "./routes.ts";
import { type SessionAccessDeps, sessionsOf } from "./session-access.ts";

/**
 * A session's own token (its SVC_CLI_TOKEN) never reaches into a sandbox: with it, an agent could read or run
 * commands in the other sessions of its project. People and the project tokens they mint for scripts may.
 */
function refuseSessionToken(principal: Principal | null): void {
  if (principal?.kind === "project" && principal.sandbox) {
    throw apiError(
      "PROJECT_TOKEN_NOT_ALLOWED",
      "a session's token cannot read sandbox logs or run commands in sandboxes: use your own login (svc login)",
    );
  }
}

/** `svc sessions logs`: the sandbox's output as JSON lines (protocol/sandbox-access.ts), followed on request. */
export function sandboxLogRoutes(deps: SessionAccessDeps) {
  return async (app: FastifyInstance) => {
    app.get("/v1/projects/:projectId/sessions/:sessionId/logs", async (req, reply) => {
      refuseSessionToken(req.principal);
      const { sessionId } = parseInput(Params, req.params, "params");
      const query = parseInput(LogsQuery, req.query, "query");
      const abort = new AbortController();
      const lines = await sessionsOf(deps).logs(req.project!, sessionId, {
        follow: query.follow === "1",
        tail: query.tail,
        signal: abort.signal,
      });
      await sendJsonLines(reply, lines, abort);
    });
  };
}

const EXEC_PATH = /^\/v1\/projects\/([^/]+)\/sessions\/([^/]+)\/exec$/;

/** A query string as an object; a repeated key (`cmd`) becomes an array. */
function queryObject(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key);
    out[key] = values.length === 1 ? values[0]! : values;
  }
  return out;
}

/** A frame's JSON payload; undefined when it is not JSON (the schema then refuses it). */
function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString());
  } catch {
    return undefined;
  }
}

/** Carries frames between the client's connection and the running command until it exits or either side leaves. */
function relay(socket: Duplex, head: Buffer, running: SandboxExec): void {
  const read = createFrameReader();
  let finished = false;
  // One resize at a time: the engine may apply two calls in flight in either order, and the last size must win.
  let resizing = Promise.resolve();
  const onData = (chunk: Buffer) => {
    let frames: ReturnType<typeof read>;
    try {
      frames = read(chunk);
    } catch {
      socket.destroy();
      return;
    }
    for (const { kind, payload } of frames) {
      if (kind === Frame.STDIN && running.stdin && !running.stdin.write(payload)) {
        socket.pause();
        running.stdin.once("drain", () => socket.resume());
      } else if (kind === Frame.STDIN_EOF) running.stdin?.end();
      else if (kind === Frame.RESIZE) {
        const size = ExecResize.safeParse(parseJson(payload));
        if (size.success) {
          const { cols, rows } = size.data;
          resizing = resizing.then(() => running.resize(cols, rows)).catch(() => {});
        }
      }
    }
  };
  socket.on("data", onData);
  if (head.length) onData(head);
  // A client that leaves stops the relay; a tty's shell then hangs up as a closed terminal does.
  socket.on("close", () => {
    if (!finished) running.close();
  });
  void (async () => {
    try {
      for await (const { stream, data } of running.output) {
        if (!socket.write(encodeFrame(stream === "stderr" ? Frame.STDERR : Frame.STDOUT, data))) {
          await once(socket, "drain");
        }
      }
      const code = await running.exitCode();
      finished = true;
      socket.end(encodeFrame(Frame.EXIT, JSON.stringify({ code })));
    } catch (err) {
      finished = true;
      const failure = apiError("SANDBOX_BACKEND_FAILED", `the command's stream broke: ${(err as Error).message}`);
      socket.end(encodeFrame(Frame.ERROR, JSON.stringify(errorResponse(failure).body)));
    }
  })();
}

/**
 * `svc sessions exec|shell`: `GET …/sessions/{sid}/exec` upgraded to `svc-exec` (protocol/sandbox-access.ts).
 * Node hands upgrades to this handler rather than to the routes, so it authenticates and authorizes with the same
 * functions the routes' hook uses: a user token of the project's account or that project's token, never the
 * sandbox service key. Returns false for an upgrade that is not an exec (a preview's WebSocket).
 */
export function execUpgrade(deps: SessionAccessDeps, logError: (err: unknown) => void) {
  return (req: IncomingMessage, socket: Duplex, head: Buffer): boolean => {
    const url = new URL(req.url ?? "/", "http://api");
    const place = EXEC_PATH.exec(url.pathname);
    if (req.headers.upgrade?.toLowerCase() !== EXEC_UPGRADE || !place) return false;
    socket.on("error", () => socket.destroy());
    void (async () => {
      const decode = (s: string) => {
        try {
          return decodeURIComponent(s);
        } catch {
          throw apiError("BAD_REQUEST", "the path is not a valid URL");
        }
      };
      const params = parseInput(Params, { projectId: decode(place[1]!), sessionId: decode(place[2]!) }, "params");
      const principal = await resolvePrincipal(deps, bearer(req));
      const { project } = await authorizeProject(
        deps,
        principal,
        params.projectId,
        leastRole("EXEC /v1/projects/:projectId/sessions/:sessionId/exec"),
      );
      checkSessionScope(principal, params.sessionId);
      refuseSessionToken(principal);
      const query = parseInput(ExecQuery, queryObject(url.searchParams), "query");
      const running = await sessionsOf(deps).exec(project, params.sessionId, {
        cmd: query.cmd,
        tty: query.tty === "1",
        stdin: query.stdin === "1",
        cols: query.cols,
        rows: query.rows,
        term: query.term,
      });
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${EXEC_UPGRADE}\r\n\r\n`);
      relay(socket, head, running);
    })().catch((err) => refuseUpgrade(socket, err, logError));
    return true;
  };
}
