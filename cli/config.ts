import { CliEnv } from "../protocol/env.ts";

export type CliSettings = ReturnType<typeof readCliEnv>;

/**
 * The CLI's only reader of its settings in the environment (SPEC "Read by the CLI", and svc's own switches). All are
 * free text or flags, so there is no schema to hold them to (and zod stays off the start-up path). Empty is unset:
 * `SVC_PROJECT_ID= svc …` drops a setting for one command.
 */
export function readCliEnv(env: NodeJS.ProcessEnv = process.env) {
  const get = (name: string) => env[name] || undefined;
  return {
    cliToken: get(CliEnv.cliToken),
    executorToken: get(CliEnv.executorToken),
    apiUrl: get(CliEnv.apiUrl),
    projectId: get(CliEnv.projectId),
    configFile: get(CliEnv.configFile),
    xdgConfigHome: get("XDG_CONFIG_HOME"),
    dashboardUrl: get(CliEnv.dashboardUrl),
    /** The self-host stack's home (default ~/.svc). */
    home: get(CliEnv.home),
    /** The directory the install script puts the `svc` shim in. */
    binDir: get(CliEnv.binDir),
    /** Inside a sandbox: its session's branch and id, the defaults of `svc cr create`. */
    branchName: get(CliEnv.branchName),
    headRef: get(CliEnv.headRef),
    sessionId: get(CliEnv.sessionId),
    /** Print the stack of an unexpected failure. */
    debug: Boolean(get("SVC_DEBUG")),
    /** Run the API from its TypeScript source even when a bundle is built. */
    fromSource: get("SVC_FROM_SOURCE") === "1",
    /** No person to answer the first start's questions. */
    noWizard: get("SVC_NO_WIZARD") === "1" || get("CI") === "true",
  };
}
