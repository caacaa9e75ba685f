/** The doctor's model-gateway checks: one real request, and whether sandboxes can reach a gateway on loopback. */
import { connect } from "node:net";
import { failureReason, type HttpAnswer, httpRequest } from "../../http-client.ts";
import { dockerGet } from "./docker-engine.ts";
import type { configuredModel } from "./state.ts";

/** One line of `svc self-host doctor`: what was checked, whether it passed, and what to do when not. */
export type Check = { check: string; ok: boolean; detail: string };

const GATEWAY_TIMEOUT_MS = 10_000;

type Model = NonNullable<ReturnType<typeof configuredModel>>;

/** The gateway's own error message, without anything that could be the key. */
function gatewayMessage(body: string, apiKey: string | undefined): string {
  let message: unknown;
  try {
    const json = JSON.parse(body);
    message = json?.error?.message ?? json?.error ?? json?.message;
  } catch {}
  if (typeof message !== "string" || message === "") return "";
  const clean = apiKey ? message.split(apiKey).join("***") : message;
  return `: ${clean.replace(/\s+/g, " ").slice(0, 200)}`;
}

/** One tiny chat-completions request, the way sandboxes' agents will send theirs. */
export async function checkGateway(model: Model): Promise<Check> {
  const check = "model-gateway";
  const base = model.baseUrl.replace(/\/+$/, "");
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (model.apiKey) headers.authorization = `Bearer ${model.apiKey}`;
  let res: HttpAnswer;
  let body: string;
  try {
    res = await httpRequest(`${base}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        model: model.model,
        messages: [{ role: "user", content: "Reply with OK." }],
        max_tokens: 1,
        stream: false,
      }),
      timeoutMs: GATEWAY_TIMEOUT_MS,
    });
    body = await res.text();
  } catch (err) {
    if ((err as Error).name === "TimeoutError") {
      return { check, ok: false, detail: `the model gateway at ${base} did not answer within 10 s` };
    }
    return { check, ok: false, detail: `the model gateway at ${base} cannot be reached (${failureReason(err)})` };
  }
  const message = gatewayMessage(body, model.apiKey);
  if (res.ok) return { check, ok: true, detail: `the model gateway at ${base} answers with model '${model.model}'` };
  if (res.status === 401 || res.status === 403) {
    const key = model.apiKey ? "refused the API key" : "wants an API key: set SVC_LLM_API_KEY";
    return { check, ok: false, detail: `the model gateway ${key} (HTTP ${res.status}${message})` };
  }
  if ([400, 404, 422].includes(res.status) && /model/i.test(body)) {
    return {
      check,
      ok: false,
      detail: `the model gateway does not know the model '${model.model}' (HTTP ${res.status}${message})`,
    };
  }
  if (res.status === 404) {
    return {
      check,
      ok: false,
      detail: `the model gateway has no ${base}/chat/completions (HTTP 404): the base URL usually ends in /v1`,
    };
  }
  return { check, ok: false, detail: `the model gateway answered HTTP ${res.status}${message}` };
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "0.0.0.0"]);

/** This machine's address on Docker's default bridge (its interface may be down, the address answers anyway). */
async function defaultBridgeAddress(): Promise<string | undefined> {
  // An engine busy building images can take seconds to answer.
  const res = await dockerGet("/networks/bridge", 10_000);
  if (!("status" in res) || res.status !== 200) return undefined;
  const configs: { Gateway?: string; Subnet?: string }[] = JSON.parse(res.body)?.IPAM?.Config ?? [];
  const ipv4 = configs.find((c) => (c.Gateway ?? c.Subnet ?? ":").includes(":") === false);
  if (ipv4?.Gateway) return ipv4.Gateway;
  // An engine that chose the subnet itself may not report the gateway: the engine takes the subnet's first address.
  const subnet = /^(\d+\.\d+\.\d+\.)(\d+)\//.exec(ipv4?.Subnet ?? "");
  return subnet ? `${subnet[1]}${Number(subnet[2]) + 1}` : undefined;
}

function tcpOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 2000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("timeout", () => done(false));
    socket.once("error", () => done(false));
  });
}

/**
 * A gateway on this machine's loopback is what sandboxes call as host.docker.internal, an address of this machine
 * on a Docker bridge: one that listens on 127.0.0.1 only answers here and never to them. The default bridge's
 * gateway stands for theirs: a gateway listening on every address answers on both.
 */
export async function checkGatewayFromSandboxes(model: Model): Promise<Check | undefined> {
  const url = new URL(model.baseUrl);
  if (!LOOPBACK.has(url.hostname)) return undefined;
  const bridge = await defaultBridgeAddress();
  if (!bridge) return undefined;
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const ok = await tcpOpen(bridge, port);
  return {
    check: "model-gateway-from-sandboxes",
    ok,
    detail: ok
      ? `sandboxes reach the model gateway as http://host.docker.internal:${port}`
      : `the model gateway listens on loopback only: sandboxes call it as host.docker.internal:${port}, this machine's Docker bridge address (${bridge}); make it listen on 0.0.0.0`,
  };
}
