import { SANDBOX_WORKSPACE, SESSION_ENV_FILE } from "../../protocol/env.ts";
import { redact } from "../../protocol/redact.ts";
import { CLONE_CREDENTIAL_PREFIX, SERVICE_KEY_PREFIX, TOKEN_PREFIX } from "../../protocol/token.ts";
import { sensitiveValues } from "../provisioning/sandbox-env.ts";
import type { ContainerVerbs, SandboxExec, SandboxLogLine } from "./driver.ts";

/** Any of the platform's credentials, whichever sandbox or process printed it. */
const PLATFORM_CREDENTIAL = new RegExp(
  `(${[TOKEN_PREFIX, SERVICE_KEY_PREFIX, CLONE_CREDENTIAL_PREFIX].join("|")})[\\w-]+`,
  "g",
);

export type ExecRequest = { cmd: string[]; tty: boolean; stdin: boolean; cols?: number; rows?: number; term?: string };

/**
 * What a person reaches inside their session's sandbox (`svc sessions logs|exec|shell`): its log, with the
 * credentials and secret values it was given masked, and commands run in its workspace as its own user.
 */
export function createSandboxAccess(driver: ContainerVerbs) {
  /**
   * The session's variables its container's own environment does not hold: a claimed pooled sandbox's, and secrets
   * set (a value) or unset (null) while it runs (the file the daemon writes for the agent's shells).
   */
  async function sessionEnv(containerId: string): Promise<{ set: string[]; unset: string[] }> {
    const read = await driver.exec(containerId, {
      cmd: ["cat", SESSION_ENV_FILE],
      tty: false,
      stdin: false,
      workingDir: "/",
      env: [],
    });
    const chunks: Buffer[] = [];
    for await (const { stream, data } of read.output) if (stream === "stdout") chunks.push(data);
    try {
      const entries = Object.entries(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>);
      return {
        set: entries.flatMap(([name, value]) => (typeof value === "string" ? [`${name}=${value}`] : [])),
        unset: entries.flatMap(([name, value]) => (value === null ? [name] : [])),
      };
    } catch {
      return { set: [], unset: [] };
    }
  }

  /** Masks what the sandbox was given (its secrets' values, the platform's credentials) in text it printed. */
  async function masker(containerId: string): Promise<(text: string) => string> {
    const secrets = sensitiveValues(await driver.environment(containerId));
    return (text) => redact(text, secrets).replace(PLATFORM_CREDENTIAL, "$1***");
  }

  return {
    masker,

    /** `served`: the log as the sandbox's daemon served it, masked the same way; the engine's log otherwise. */
    async logs(
      containerId: string,
      options: { follow: boolean; tail?: number; signal: AbortSignal },
      served?: AsyncIterable<SandboxLogLine>,
    ): Promise<AsyncIterable<SandboxLogLine>> {
      const mask = await masker(containerId);
      const lines = served ?? (await driver.logs(containerId, options));
      return (async function* () {
        for await (const { stream, line } of lines) yield { stream, line: mask(line) };
      })();
    },

    /**
     * The engine's exec, for sandboxes the API reaches directly. One reached over its link may run where this
     * engine cannot exec (a Swarm task on another node): the session service has its daemon run the command then.
     */
    async exec(containerId: string, request: ExecRequest): Promise<SandboxExec> {
      const session = await sessionEnv(containerId);
      return driver.exec(containerId, {
        // The engine's exec only adds variables: one unset since the container was made is taken off by `env -u`.
        cmd: session.unset.length
          ? ["env", ...session.unset.flatMap((name) => ["-u", name]), ...request.cmd]
          : request.cmd,
        tty: request.tty,
        stdin: request.stdin,
        cols: request.cols,
        rows: request.rows,
        workingDir: SANDBOX_WORKSPACE,
        env: [...session.set, ...(request.tty ? [`TERM=${request.term ?? "xterm"}`] : [])],
      });
    },
  };
}

export type SandboxAccess = ReturnType<typeof createSandboxAccess>;
