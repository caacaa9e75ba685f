import type Docker from "dockerode";
import type { SandboxSettings } from "../../api/app-options.ts";
import { joinCluster } from "../../orchestrator/cluster.ts";
import type { SandboxDriver } from "../../orchestrator/sandbox/driver.ts";
import { call, seedUser, startApi, type TestApi } from "./api-server.ts";
import { type CliEnv, cliHome, freePort } from "./cli.ts";
import { freshDatabase, type TestDatabase } from "./databases.ts";
import { orchestratorFor, removeProjectContainers, requireDocker } from "./docker.ts";
import { authedUrl, workRepo } from "./git-fixture.ts";

export type SandboxedProject = {
  docker: Docker;
  db: TestDatabase;
  api: TestApi;
  user: Awaited<ReturnType<typeof seedUser>>;
  project: { id: string; repo_url: string };
  /** The CLI's environment for this user and project, in a home of its own. */
  cliEnv: CliEnv;
  /** A call under /v1/projects/{id}/sessions with the user's token. */
  sessions(suffix?: string, method?: string, body?: unknown): ReturnType<typeof call>;
  close(): Promise<void>;
};

/**
 * The API with the Docker orchestrator on every interface (sandboxes reach it over the bridge), a user, and a
 * managed project whose main holds one commit: where every sandbox suite starts.
 */
export async function startSandboxedProject(
  name: string,
  settings: Partial<SandboxSettings> = {},
  stack: Pick<NonNullable<Parameters<typeof startApi>[1]>, "slack" | "apps"> & {
    /** The background work a server runs (api/main.ts): reconciler, idle sweep, transcript recorder, triggers. */
    background?: boolean;
    /** Another sandbox driver than the Docker one (the Swarm driver). */
    driver?: SandboxDriver;
  } = {},
): Promise<SandboxedProject> {
  const { background, driver, ...app } = stack;
  const docker = await requireDocker();
  const db = await freshDatabase("pglite");
  const port = await freePort();
  const orchestrator = { ...orchestratorFor(port, settings), ...(driver && { driver }) };
  const api = await startApi(db.sql, { host: "0.0.0.0", port, orchestrator, ...app });
  const stopBackground = background
    ? api.services.startBackgroundWork({
        cluster: await joinCluster(db.sql, { instanceId: api.services.instanceId }),
        idleMs: 3_600_000,
      })
    : () => {};
  const user = await seedUser(api.services);
  const project = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name } })).body;
  const repo = await workRepo(authedUrl(project.repo_url, user.token));
  await repo.commit("initial", { "README.md": "hi\n" });
  await repo.pushed("main");
  return {
    docker,
    db,
    api,
    user,
    project,
    cliEnv: {
      ...cliHome().env,
      SVC_API_URL: `${api.url}/v1`,
      SVC_CLI_TOKEN: user.token,
      SVC_PROJECT_ID: project.id,
    },
    sessions: (suffix = "", method = "GET", body) =>
      call(api.url, method, `/v1/projects/${project.id}/sessions${suffix}`, { token: user.token, body }),
    async close() {
      stopBackground();
      await removeProjectContainers(docker, project.id, api.services.installationId);
      await api.close();
      await db.drop();
    },
  };
}
