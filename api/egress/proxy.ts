import { request as httpRequest, type IncomingMessage, type ServerResponse, STATUS_CODES } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { EgressRefusedBody } from "../../protocol/daemon.ts";
import { type EgressRule, egressMatch } from "../../protocol/egress.ts";

/** A live sandbox, as its proxy credential (its service key) finds it. */
export type EgressSandbox = { sessionId: string; projectId: string; url: string | null };

export type EgressProxyDeps = {
  /** The provisioning or active sandbox whose service key this is. */
  sandboxOf(serviceKey: string): Promise<EgressSandbox | undefined>;
  /** The project's `[sandbox] egress` rules as its default branch has them; null when it has none (open). */
  rules(projectId: string): Promise<EgressRule[] | null>;
  /** What every sandbox reaches whatever its list: the stack's model gateway, when it is not on this host. */
  always: EgressRule[];
  /** The address to connect to for a host (target.ts). */
  resolve(host: string): Promise<string>;
  /** Why an address may not be reached through a `*.` entry; undefined when it may (target.ts). */
  notPublic(address: string): string | undefined;
  /** Tells the sandbox (its log, its events clients) about a refusal. */
  refused(sandbox: EgressSandbox, serviceKey: string, refusal: EgressRefusedBody): void;
  log: (msg: string, extra: Record<string, unknown>) => void;
};

type Verdict = { address: string } | { status: 400 | 403 | 407 | 502; message: string };

const NOT_LISTED = "not in [sandbox] egress of svc.toml on the default branch";

/** The password of a `Proxy-Authorization: Basic` header: the sandbox's service key. */
function proxyPassword(req: IncomingMessage): string | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(req.headers["proxy-authorization"] ?? "");
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

function rawAnswer(status: number, message: string): string {
  const body = `svc egress proxy: ${message}\n`;
  const challenge = status === 407 ? 'proxy-authenticate: Basic realm="svc egress"\r\n' : "";
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n${challenge}\r\n${body}`
  );
}

/**
 * The HTTP forward proxy that is the only way out of a sandbox whose project lists its egress: CONNECT for https
 * (and any TCP), absolute-URI requests for plain http. It runs in the API process on the API's port (which the
 * host firewall lets sandboxes reach), knows a sandbox by the service key in its proxy URL (a sandbox cannot pass
 * for another), lets through the hosts its project's list names and refuses the rest with 403, telling the sandbox.
 * A host matched only by a `*.` entry must resolve to a public address, never this machine or a private network;
 * without a list (the project dropped it while the sandbox ran) every host is treated that way.
 */
export function createEgressProxy(deps: EgressProxyDeps) {
  async function decide(req: IncomingMessage, host: string, port: number): Promise<Verdict> {
    const key = proxyPassword(req);
    const sandbox = key ? await deps.sandboxOf(key) : undefined;
    if (!key || !sandbox) return { status: 407, message: "use the proxy URL of your sandbox's environment" };
    const rules = await deps.rules(sandbox.projectId);
    const match = rules === null ? "wildcard" : egressMatch([...deps.always, ...rules], host, port);
    const refuse = (reason: string): Verdict => {
      deps.log("egress refused", { session: sandbox.sessionId, host, port, reason });
      deps.refused(sandbox, key, { host, port, reason });
      return { status: 403, message: `${host}:${port} refused: ${reason}` };
    };
    if (!match) return refuse(NOT_LISTED);
    let address: string;
    try {
      address = await deps.resolve(host);
    } catch (err) {
      return { status: 502, message: `cannot resolve ${host}: ${(err as Error).message}` };
    }
    const kind = match === "wildcard" ? deps.notPublic(address) : undefined;
    if (kind) return refuse(`it resolves to ${address}, ${kind}, which only an entry naming the host may reach`);
    return { address };
  }

  /** A decision that failed (the database) is the proxy's failure, never a way through. */
  const decideSafely = (req: IncomingMessage, host: string, port: number) =>
    decide(req, host, port).catch((err): Verdict => ({ status: 502, message: (err as Error).message }));

  function answer(res: ServerResponse, status: number, message: string): void {
    const body = `svc egress proxy: ${message}\n`;
    res.writeHead(status, {
      "content-type": "text/plain; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      ...(status === 407 ? { "proxy-authenticate": 'Basic realm="svc egress"' } : {}),
    });
    res.end(body);
  }

  return {
    /** A request in absolute form (`GET http://host/path`): a proxy request, which no API route ever is. */
    owns: (req: IncomingMessage) => /^[a-z][a-z0-9+.-]*:\/\//i.test(req.url ?? ""),

    request(req: IncomingMessage, res: ServerResponse): void {
      let url: URL;
      try {
        url = new URL(req.url ?? "");
      } catch {
        answer(res, 400, "not a URL");
        return;
      }
      if (url.protocol !== "http:") {
        answer(res, 400, `${url.protocol} goes through CONNECT`);
        return;
      }
      const port = Number(url.port || 80);
      void decideSafely(req, url.hostname, port).then((verdict) => {
        if ("status" in verdict) return answer(res, verdict.status, verdict.message);
        const headers = { ...req.headers };
        delete headers["proxy-authorization"];
        delete headers["proxy-connection"];
        const upstream = httpRequest({
          host: verdict.address,
          port,
          method: req.method,
          path: `${url.pathname}${url.search}`,
          headers,
          setHost: false,
        });
        upstream.on("response", (answered) => {
          res.writeHead(answered.statusCode ?? 502, answered.statusMessage, answered.rawHeaders);
          answered.pipe(res);
        });
        upstream.on("error", (err) => {
          if (res.headersSent) res.destroy();
          else answer(res, 502, `${url.host}: ${err.message}`);
        });
        req.pipe(upstream);
      });
    },

    connect(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      const match = /^([^:/\s[\]]+):(\d{1,5})$/.exec(req.url ?? "");
      if (!match) return void socket.end(rawAnswer(400, "CONNECT takes host:port"));
      const host = match[1]!;
      const port = Number(match[2]);
      socket.on("error", () => socket.destroy());
      void decideSafely(req, host, port).then((verdict) => {
        if ("status" in verdict) return void socket.end(rawAnswer(verdict.status, verdict.message));
        const upstream: Socket = connect({ host: verdict.address, port });
        let open = false;
        upstream.once("connect", () => {
          open = true;
          socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          if (head.length > 0) upstream.write(head);
          upstream.pipe(socket);
          socket.pipe(upstream);
        });
        upstream.on("error", (err) => {
          if (open) socket.destroy();
          else socket.end(rawAnswer(502, `${host}:${port}: ${err.message}`));
        });
        socket.on("close", () => upstream.destroy());
      });
    },
  };
}

export type EgressProxy = ReturnType<typeof createEgressProxy>;
