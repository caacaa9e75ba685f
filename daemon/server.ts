import { createServer, Agent as HttpAgent, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import httpProxy from "http-proxy";
import type { z } from "zod";
import {
  AbortBody,
  type AbortResult,
  type DaemonHealth,
  EnvBody,
  type EnvResult,
  type PromptAccepted,
  PromptBody,
  type RefreshResult,
} from "../protocol/daemon.ts";
import { createForwarder } from "../protocol/http-forward.ts";
import { USER_CONTEXT_HEADER } from "../protocol/user-context.ts";
import type { Activity } from "./activity.ts";
import { relayAgentEvents } from "./agent-events.ts";
import { createUserContextCheck, hasServiceKey } from "./auth.ts";
import { handleConnection, upstreamError } from "./proxy-tunnel.ts";

export type ControlHandlers = {
  health(): Promise<DaemonHealth>;
  refresh(): Promise<RefreshResult>;
  prompt(body: PromptBody): Promise<PromptAccepted>;
  abort(body: AbortBody): Promise<AbortResult>;
  env(body: EnvBody): Promise<EnvResult>;
  runtimeReady(): boolean;
};

export type ServerDeps = {
  serviceKey: string;
  /** The agent runtime's working directory (opencode scopes its events by it). */
  workspace: string;
  sessionId: string;
  servicePort: number;
  agentPort: number;
  activity: Activity;
  control: ControlHandlers;
};

const MAX_CONTROL_BODY = 1 << 20;

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_CONTROL_BODY) throw Object.assign(new Error("request body too large"), { status: 413 });
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw Object.assign(new Error("request body is not valid JSON"), { status: 400 });
  }
}

function parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw Object.assign(new Error(`${issue.path.join(".") || "body"}: ${issue.message}`), { status: 400 });
}

/** `/proxy/{port}/rest` -> [port, "/rest"]; undefined when the path is not a proxy path. */
export function proxyTarget(url: string): { port: number; path: string } | { error: string } | undefined {
  const match = /^\/proxy\/([^/?]*)(.*)$/.exec(url);
  if (!match) return undefined;
  const port = Number(match[1]);
  if (!/^\d{1,5}$/.test(match[1]!) || port < 1 || port > 65535) return { error: `'${match[1]}' is not a port` };
  const rest = match[2] || "/";
  return { port, path: rest.startsWith("/") ? rest : `/${rest}` };
}

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
  const controls: Record<string, (body: unknown) => Promise<unknown>> = {
    "/svc/refresh": () => deps.control.refresh(),
    "/svc/prompt": (body) => deps.control.prompt(parse(PromptBody, body)),
    "/svc/abort": (body) => deps.control.abort(parse(AbortBody, body)),
    "/svc/env": (body) => deps.control.env(parse(EnvBody, body)),
  };

  /** Where a non-/svc request goes, after the user-context check; undefined when it was already answered. */
  function route(req: IncomingMessage, answer: (status: number, body: unknown) => void): number | undefined {
    const auth = checkUserContext(req.headers[USER_CONTEXT_HEADER] as string | undefined);
    if (!auth.ok) {
      answer(401, { error: `missing or invalid ${USER_CONTEXT_HEADER} (${auth.reason})` });
      return undefined;
    }
    delete req.headers[USER_CONTEXT_HEADER];
    deps.activity.touch();
    const target = proxyTarget(req.url ?? "/");
    if (target && "error" in target) {
      answer(400, { error: target.error });
      return undefined;
    }
    if (target) {
      if (target.port === deps.servicePort) {
        answer(403, { error: "the daemon's own port cannot be proxied" });
        return undefined;
      }
      req.url = target.path;
      return target.port;
    }
    if (!deps.control.runtimeReady()) {
      answer(503, { error: "the agent runtime is starting" });
      return undefined;
    }
    return deps.agentPort;
  }

  const server = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    try {
      if (path === "/svc/health" && req.method === "GET") return send(res, 200, await deps.control.health());
      if (path === "/svc/events" && req.method === "GET") {
        if (!hasServiceKey(req, deps.serviceKey))
          return send(res, 401, { error: "control routes need the sandbox service key" });
        if (!deps.control.runtimeReady()) return send(res, 503, { error: "the agent runtime is starting" });
        deps.activity.touch();
        return relayAgentEvents(res, deps.agentPort, deps.workspace);
      }
      if (path.startsWith("/svc/")) {
        const handler = controls[path];
        if (!handler) return send(res, 404, { error: `no control route ${path}` });
        if (req.method !== "POST") return send(res, 405, { error: "use POST" });
        if (!hasServiceKey(req, deps.serviceKey))
          return send(res, 401, { error: "control routes need the sandbox service key" });
        deps.activity.touch();
        return send(res, 200, await handler(await readJson(req)));
      }
      const target = route(req, (status, body) => send(res, status, body));
      if (target)
        await forward(req, res, `http://127.0.0.1:${target}`, req.url ?? "/", {
          unreachable: (r, err) => send(r, 502, { error: upstreamError(target, err) }),
        });
    } catch (err) {
      const status = (err as { status?: number }).status ?? 500;
      if (!res.headersSent) send(res, status, { error: (err as Error).message });
    }
  });

  server.on("upgrade", (req, socket, head) => {
    const target = route(req, (status, body) => {
      socket.end(
        `HTTP/1.1 ${status} ${status === 401 ? "Unauthorized" : "Error"}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify(body)}`,
      );
    });
    if (target) proxy.ws(req, socket, head, { target: `http://127.0.0.1:${target}` });
  });

  server.keepAliveTimeout = 65_000;
  const [fullHttp] = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) =>
    handleConnection(socket, {
      servicePort: deps.servicePort,
      contextHeader: USER_CONTEXT_HEADER,
      checkContext: checkUserContext,
      target: proxyTarget,
      touch: deps.activity.touch,
      fallback: (s) => fullHttp!.call(server, s),
    }),
  );
  return server;
}
