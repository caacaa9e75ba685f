import { SANDBOX_WORKSPACE } from "../../protocol/env.ts";
import { redact } from "../../protocol/redact.ts";
import { CLONE_CREDENTIAL_PREFIX, SERVICE_KEY_PREFIX, TOKEN_PREFIX } from "../../protocol/token.ts";
import { sensitiveValues } from "../provisioning/sandbox-env.ts";
import type { SandboxDriver, SandboxExec, SandboxLogLine } from "./driver.ts";

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
export function createSandboxAccess(driver: SandboxDriver) {
  return {
    async logs(
      containerId: string,
      options: { follow: boolean; tail?: number; signal: AbortSignal },
    ): Promise<AsyncIterable<SandboxLogLine>> {
      const secrets = sensitiveValues(await driver.environment(containerId));
      const lines = await driver.logs(containerId, options);
      return (async function* () {
        for await (const { stream, line } of lines) {
          yield { stream, line: redact(line, secrets).replace(PLATFORM_CREDENTIAL, "$1***") };
        }
      })();
    },

    exec(containerId: string, request: ExecRequest): Promise<SandboxExec> {
      return driver.exec(containerId, {
        cmd: request.cmd,
        tty: request.tty,
        stdin: request.stdin,
        cols: request.cols,
        rows: request.rows,
        workingDir: SANDBOX_WORKSPACE,
        env: request.tty ? [`TERM=${request.term ?? "xterm"}`] : [],
      });
    },
  };
}

export type SandboxAccess = ReturnType<typeof createSandboxAccess>;
