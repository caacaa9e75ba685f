import { createServer, Agent as HttpAgent, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import httpProxy from "http-proxy";
import type { z } from "zod";
import {
  AbortBody,
  type AbortResult,
  type AgentEvent,
  type CheckpointResult,
  ClaimBody,
  type DaemonHealth,
  EgressRefusedBody,
  EnvBody,
  type EnvResult,
  type PromptAccepted,
  PromptBody,
  type RefreshResult,
  SeedRuntime,
} from "../protocol/daemon.ts";
import { DAEMON_EXEC_PATH } from "../protocol/daemon-exec.ts";
import { createForwarder } from "../protocol/http-forward.ts";
import { LogsQuery } from "../protocol/sandbox-access.ts";
import { DAEMON_LOGS_PATH } from "../protocol/sandbox-log.ts";
import type { RuntimeTranscript } from "../protocol/transcript.ts";
import { USER_CONTEXT_HEADER } from "../protocol/user-context.ts";
import type { Activity } from "./activity.ts";
import { type NoticeSource, openEventStream, relayAgentEvents } from "./agent-events.ts";
import { createUserContextCheck, hasServiceKey } from "./auth.ts";
import { type DaemonError, daemonError, rawErrorResponse, sendError, toDaemonError } from "./errors.ts";
import { createExecUpgrade } from "./exec-socket.ts";
import { isPageNavigation, sendWaitingPage } from "./port-waiting.ts";
import { proxyTarget } from "./proxy-target.ts";
import { handleConnection, upstreamError } from "./proxy-tunnel.ts";
import { type SandboxLogReader, serveSandboxLog } from "./sandbox-log.ts";

export type ControlHandlers = {
  health(): Promise<DaemonHealth>;
  refresh(): Promise<RefreshResult>;
  prompt(body: PromptBody): Promise<PromptAccepted>;
  abort(body: AbortBody): Promise<AbortResult>;
  env(body: EnvBody): Promise<EnvResult>;
  /** A pooled sandbox's workspace, as a git bundle streamed in the request body; when its runtime boots. */
  seed(bundle: NodeJS.ReadableStream, runtime: SeedRuntime): Promise<{ commit: string | null }>;
  claim(body: ClaimBody): Promise<{ claimed: true }>;
  checkpoint(): Promise<CheckpointResult>;
  /** GET /svc/transcript: the runtime's conversations as transcript entries (transcript.ts). */
  transcript(conversation?: string): Promise<RuntimeTranscript>;
  runtimeReady(): boolean;
  /**
   * Someone means to use the agent (its events, a request for the runtime): a runtime left to its first use starts.
   * Resolves once the runtime runs, or after `waitMs`.
   */
  wake(waitMs?: number): Promise<void>;
};

export type ServerDeps = {
  serviceKey: string;
  /** The agent runtime's working directory (opencode scopes its events by it). */
  workspace: string;
  sessionId: string;
  servicePort: number;
  agentPort: number;
  /** The model gateway the runtime talks to, named when it cannot be reached or sends nothing. */
  gatewayUrl?: string;
  /** Seconds the gateway may send nothing before a turn fails (SVC_MODEL_TIMEOUT_S). */
  modelTimeoutS?: number;
  /** No model gateway or provider is configured: the runtime could run no prompt, and following it boots none. */
  modelMissing?: boolean;
  activity: Activity;
  control: ControlHandlers;
  /** A line of the sandbox's log (the daemon's stderr, which PID 1 passes on). */
  log: (msg: string) => void;
  /**
   * Commands run for the API (`GET /svc/exec`, exec-socket.ts): where the session's environment file is, and the
   * sandbox's own environment. Absent: the daemon runs none (404).
   */
  exec?: { agentHome: string; env: NodeJS.ProcessEnv };
  /** The sandbox's log its keeper writes (`GET /svc/logs`); absent or not kept: 404, and the API asks the engine. */
  sandboxLog?: SandboxLogReader;
};

const MAX_CONTROL_BODY = 1 << 20;

/** A successful JSON answer; errors go through errors.ts's sendError. */
function sendOk(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_CONTROL_BODY) throw daemonError("PAYLOAD_TOO_LARGE", "request body too large");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw daemonError("BAD_REQUEST", "request body is not valid JSON");
  }
}

function parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join(".");
  throw daemonError("VALIDATION_FAILED", `${field || "body"}: ${issue.message}`, field ? { field } : {});
}

/** The seed's `runtime` query parameter (SeedRuntime); absent: `now`. */
const seedRuntime = (url: string | undefined): SeedRuntime =>
  parse(SeedRuntime, new URL(url ?? "/", "http://daemon").searchParams.get("runtime") ?? "now");

const NO_SERVICE_KEY = "control routes need the sandbox service key";
const RUNTIME_STARTING = "the agent runtime is starting";
/** How long a request for the agent's events waits for its runtime to boot before it is answered 503. */
const EVENTS_BOOT_WAIT_MS = 30_000;

/**
 * The daemon's port 8000: `/svc/*` control surface, `/proxy/{port}/*` to sandbox ports, everything else to
 * the agent runtime. Plain HTTP goes through an undici pool (forward.ts), WebSocket upgrades through http-proxy;
 * bodies stream untouched both ways.
 */
export function createDaemonServer(deps: ServerDeps) {
  const proxy = httpProxy.createProxyServer({ agent: new HttpAgent({ keepAlive: true }), xfwd: true, ws: true });
  proxy.on("error", (_err, _req, socket) => (socket as Duplex | undefined)?.destroy());

  const forward = createForwarder();
  const checkUserContext = createUserContextCheck(deps.serviceKey, deps.sessionId);
  // The events clients connected now: what the daemon itself has to tell them besides the runtime's events.
  const listeners = new Set<(event: AgentEvent) => void>();
  const notices: NoticeSource = (notify) => {
    listeners.add(notify);
    return () => listeners.delete(notify);
  };
  async function egressRefused(body: EgressRefusedBody): Promise<{ reported: true }> {
    deps.log(`egress refused: ${body.host}:${body.port} (${body.reason})`);
    for (const notify of listeners) notify({ type: "egress_refused", ...body });
    return { reported: true };
  }
  const controls: Record<string, (body: unknown) => Promise<unknown>> = {
    "/svc/refresh": () => deps.control.refresh(),
    "/svc/prompt": (body) => deps.control.prompt(parse(PromptBody, body)),
    "/svc/abort": (body) => deps.control.abort(parse(AbortBody, body)),
    "/svc/env": (body) => deps.control.env(parse(EnvBody, body)),
    "/svc/claim": (body) => deps.control.claim(parse(ClaimBody, body)),
    "/svc/egress-refused": (body) => egressRefused(parse(EgressRefusedBody, body)),
    "/svc/checkpoint": () => deps.control.checkpoint(),
  };

  /** Where a non-/svc request goes, after the user-context check; the error to answer when it goes nowhere. */
  function route(req: IncomingMessage): number | DaemonError {
    const auth = checkUserContext(req.headers[USER_CONTEXT_HEADER] as string | undefined);
    if (!auth.ok) return daemonError("UNAUTHENTICATED", `missing or invalid ${USER_CONTEXT_HEADER} (${auth.reason})`);
    delete req.headers[USER_CONTEXT_HEADER];
    deps.activity.touch();
    const target = proxyTarget(req.url ?? "/", deps);
    if (target && "error" in target) return target.error;
    if (target) {
      req.url = target.path;
      return target.port;
    }
    if (!deps.control.runtimeReady()) {
      void deps.control.wake();
      return daemonError("AGENT_RUNTIME_UNAVAILABLE", RUNTIME_STARTING);
    }
    return deps.agentPort;
  }

  const server = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    try {
      if (path === "/svc/health" && req.method === "GET") return sendOk(res, await deps.control.health());
      if (path === "/svc/transcript" && req.method === "GET") {
        if (!hasServiceKey(req, deps.serviceKey)) throw daemonError("UNAUTHENTICATED", NO_SERVICE_KEY);
        if (!deps.control.runtimeReady()) throw daemonError("AGENT_RUNTIME_UNAVAILABLE", RUNTIME_STARTING);
        const conversation = new URL(req.url ?? "/", "http://daemon").searchParams.get("conversation") ?? undefined;
        return sendOk(res, await deps.control.transcript(conversation));
      }
      if (path === DAEMON_LOGS_PATH && req.method === "GET") {
        if (!hasServiceKey(req, deps.serviceKey)) throw daemonError("UNAUTHENTICATED", NO_SERVICE_KEY);
        if (!deps.sandboxLog?.kept()) throw daemonError("NOT_FOUND", "this sandbox keeps no log of its own");
        const query = parse(LogsQuery, Object.fromEntries(new URL(req.url ?? "/", "http://daemon").searchParams));
        return await serveSandboxLog(req, res, deps.sandboxLog, query);
      }
      if (path === "/svc/events" && req.method === "GET") {
        if (!hasServiceKey(req, deps.serviceKey)) throw daemonError("UNAUTHENTICATED", NO_SERVICE_KEY);
        // The API's transcript recorder follows every running session: its stream is no sign of use.
        const entries = new URL(req.url ?? "/", "http://daemon").searchParams.get("entries") === "1";
        // Someone following the agent waits for its boot rather than retrying: a session's first use starts it.
        // Without a model it could run nothing: the stream opens at once, and no runtime boots for it.
        if (!entries) {
          deps.activity.touch();
          if (deps.modelMissing && !deps.control.runtimeReady()) return void openEventStream(res, notices);
          await deps.control.wake(EVENTS_BOOT_WAIT_MS);
        }
        if (!deps.control.runtimeReady()) throw daemonError("AGENT_RUNTIME_UNAVAILABLE", RUNTIME_STARTING);
        return relayAgentEvents(res, deps.agentPort, deps.workspace, {
          entries,
          gatewayUrl: deps.gatewayUrl,
          modelTimeoutS: deps.modelTimeoutS,
          log: deps.log,
          abort: (session) => void deps.control.abort({ session }).catch(() => {}),
          notices,
        });
      }
      if (path.startsWith("/svc/")) {
        const seed = path === "/svc/pool/seed";
        const handler = controls[path];
        if (!handler && !seed) throw daemonError("NOT_FOUND", `no control route ${path}`);
        if (req.method !== "POST") throw daemonError("METHOD_NOT_ALLOWED", "use POST");
        if (!hasServiceKey(req, deps.serviceKey)) throw daemonError("UNAUTHENTICATED", NO_SERVICE_KEY);
        deps.activity.touch();
        return sendOk(
          res,
          seed ? await deps.control.seed(req, seedRuntime(req.url)) : await handler!(await readJson(req)),
        );
      }
      const target = route(req);
      if (typeof target !== "number") return sendError(res, target);
      const page = isPageNavigation(
        req.method ?? "",
        req.headers.accept,
        req.headers["sec-fetch-mode"] as string | undefined,
      );
      await forward(req, res, `http://127.0.0.1:${target}`, req.url ?? "/", {
        unreachable: (r, err) =>
          page
            ? sendWaitingPage(r, upstreamError(target, err))
            : sendError(r, daemonError("UPSTREAM_UNAVAILABLE", upstreamError(target, err))),
      });
    } catch (err) {
      if (!res.headersSent) sendError(res, toDaemonError(err));
    }
  });

  const exec =
    deps.exec &&
    createExecUpgrade({
      ...deps.exec,
      workspace: deps.workspace,
      serviceKey: deps.serviceKey,
      touch: deps.activity.touch,
    });
  server.on("upgrade", (req, socket, head) => {
    if ((req.url ?? "/").split("?")[0] === DAEMON_EXEC_PATH) {
      if (exec) return exec(req, socket, head);
      return void socket.end(rawErrorResponse(daemonError("NOT_FOUND", "this daemon runs no commands")));
    }
    const target = route(req);
    if (typeof target !== "number") socket.end(rawErrorResponse(target));
    else proxy.ws(req, socket, head, { target: `http://127.0.0.1:${target}` });
  });

  server.keepAliveTimeout = 65_000;
  const [fullHttp] = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) =>
    handleConnection(socket, {
      contextHeader: USER_CONTEXT_HEADER,
      checkContext: checkUserContext,
      target: (url) => proxyTarget(url, deps),
      touch: deps.activity.touch,
      fallback: (s) => fullHttp!.call(server, s),
    }),
  );
  return server;
}
