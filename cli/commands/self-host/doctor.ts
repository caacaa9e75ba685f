import { connect } from "node:net";
import { LOCAL_BASE_IMAGE, MODEL_ENV_SET_LINE, PUBLIC_BASE_IMAGE } from "../../../protocol/stack-settings.ts";
import { CliError } from "../../errors.ts";
import { printJson, printLine } from "../../output.ts";
import { dockerGet } from "./docker-engine.ts";
import { probeHealth } from "./health.ts";
import { ensureState, localOrigin, selfHostPaths } from "./state.ts";
import { configuredModel } from "./status.ts";

const GATEWAY_TIMEOUT_MS = 10_000;

type Check = { check: string; ok: boolean; detail: string };
type Model = NonNullable<ReturnType<typeof configuredModel>>;

async function checkStack(origin: string): Promise<Check> {
  const ok = await probeHealth(origin, 2000);
  return {
    check: "stack",
    ok,
    detail: ok ? `the stack answers at ${origin}` : `the stack does not answer at ${origin}: run 'svc self-host start'`,
  };
}

async function checkDocker(): Promise<Check> {
  const ping = await dockerGet("/_ping");
  if ("status" in ping && ping.status === 200)
    return { check: "docker", ok: true, detail: "the Docker engine answers" };
  const why = "error" in ping ? ping.error : `HTTP ${ping.status}`;
  return { check: "docker", ok: false, detail: `the Docker engine does not answer (${why}): start dockerd` };
}

async function checkBaseImage(configured: string | undefined, docker: boolean): Promise<Check> {
  const image = configured ?? LOCAL_BASE_IMAGE;
  const check = "base-image";
  if (!docker)
    return { check, ok: false, detail: `base image ${image} not checked: the Docker engine does not answer` };
  const exists = async (name: string) => {
    const res = await dockerGet(`/images/${encodeURIComponent(name)}/json`);
    return "status" in res && res.status === 200;
  };
  if (await exists(image)) return { check, ok: true, detail: `the base image ${image} exists` };
  if (!configured && (await exists(PUBLIC_BASE_IMAGE))) {
    return { check, ok: true, detail: `the base image ${PUBLIC_BASE_IMAGE} exists (${LOCAL_BASE_IMAGE} does not)` };
  }
  const fix = configured ? "build it or change SVC_SANDBOX_BASE_IMAGE" : "run 'bash scripts/setup.sh'";
  return { check, ok: false, detail: `the base image ${image} does not exist: ${fix}` };
}

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
async function checkGateway(model: Model): Promise<Check> {
  const check = "model-gateway";
  const base = model.baseUrl.replace(/\/+$/, "");
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (model.apiKey) headers.authorization = `Bearer ${model.apiKey}`;
  let res: Response;
  let body: string;
  try {
    res = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        model: model.model,
        messages: [{ role: "user", content: "Reply with OK." }],
        max_tokens: 1,
        stream: false,
      }),
      signal: AbortSignal.timeout(GATEWAY_TIMEOUT_MS),
    });
    body = await res.text();
  } catch (err) {
    if ((err as Error).name === "TimeoutError") {
      return { check, ok: false, detail: `the model gateway at ${base} did not answer within 10 s` };
    }
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (err as Error).message;
    return { check, ok: false, detail: `the model gateway at ${base} cannot be reached (${why})` };
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
  const res = await dockerGet("/networks/bridge");
  if (!("status" in res) || res.status !== 200) return undefined;
  const configs: { Gateway?: string }[] = JSON.parse(res.body)?.IPAM?.Config ?? [];
  return configs.find((c) => c.Gateway && !c.Gateway.includes(":"))?.Gateway;
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
async function checkGatewayFromSandboxes(model: Model): Promise<Check | undefined> {
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

export async function doctor(options: { json?: boolean }): Promise<void> {
  const state = ensureState(selfHostPaths());
  const model = configuredModel(state);
  const [stack, docker] = await Promise.all([checkStack(localOrigin(state)), checkDocker()]);
  const checks = [stack, docker, await checkBaseImage(state.env.SVC_SANDBOX_BASE_IMAGE, docker.ok)];
  checks.push({
    check: "model",
    ok: model !== undefined,
    detail: model ? `model '${model.model}' at ${model.baseUrl}` : `no model is configured: ${MODEL_ENV_SET_LINE}`,
  });
  if (model) {
    const gateway = await checkGateway(model);
    checks.push(gateway);
    const fromSandboxes = gateway.ok ? await checkGatewayFromSandboxes(model) : undefined;
    if (fromSandboxes) checks.push(fromSandboxes);
  }
  const failed = checks.filter((c) => !c.ok).length;
  if (options.json) printJson({ ok: failed === 0, checks });
  else for (const c of checks) printLine(`${c.ok ? "✓" : "✗"} ${c.detail}`);
  if (failed) throw new CliError(`${failed} of ${checks.length} checks failed`);
}
