import { randomBytes } from "node:crypto";
import { mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { CliError } from "../../errors.ts";
import type { Progress } from "./compose-images.ts";
import { sleep } from "./health.ts";
import { runWithFiles } from "./run-to-end.ts";
import type { SelfHostPaths, SelfHostState } from "./state.ts";
import { writeState } from "./state.ts";
import { dockerCli, stackName, swarmVolumes } from "./swarm.ts";
import { swarmImages } from "./swarm-mode.ts";

const POSTGRES_TIMEOUT_MS = 120_000;
/** Where the API keeps its data in the stack (compose/stack.yaml: the data volume's mount). */
const API_HOME = "/var/lib/svc";

const tail = (text: string) => text.trim().split("\n").slice(-20).join("\n");

/** The running container of the stack's postgres task on this node: pg_dump runs in it. */
async function postgresContainer(stack: string): Promise<string> {
  const service = `${stack}_postgres`;
  const listed = await dockerCli([
    "ps",
    "-q",
    "--filter",
    `label=com.docker.swarm.service.name=${service}`,
    "--filter",
    "status=running",
  ]);
  const id = listed.output.trim().split("\n")[0];
  if (listed.code !== 0 || !id) {
    throw new CliError(
      `no running container of ${service} on this node: take the backup on the node that runs it ('docker service ps ${service}')`,
    );
  }
  return id;
}

/** Swarm mode: PostgreSQL's own dump, taken by pg_dump inside the postgres task's container (one snapshot). */
export async function swarmPgDump(paths: SelfHostPaths, file: string): Promise<number> {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const id = await postgresContainer(stackName(paths));
  const dump = await runWithFiles(
    "docker",
    ["exec", id, "pg_dump", "-U", "svc", "-d", "svc", "--no-owner", "--no-privileges"],
    process.env,
    { output: file },
  );
  if (dump.code !== 0) throw new CliError(`pg_dump failed in the postgres task's container: ${dump.stderr.trim()}`);
  return statSync(file).size;
}

/**
 * Swarm mode: the stack's two volumes filled as its first deploy finds them. The dump goes into a new PostgreSQL on
 * the stack's database volume (a plain container of the stack's postgres image, with a password of its own, gone
 * after), and `fill` gets a container that mounts the data volume as the API does (from the API's image, so the
 * volume starts as the API's own), stopped: the plan and bundles go in there. Nothing is deployed.
 */
export async function restoreSwarmVolumes(
  paths: SelfHostPaths,
  state: SelfHostState,
  dumpFile: string,
  fill: (container: string, apiHome: string) => Promise<void>,
  progress: Progress,
): Promise<void> {
  const stack = stackName(paths);
  const volumes = swarmVolumes(stack);
  const images = await swarmImages(paths, state, progress);
  const postgresImage = images.SVC_POSTGRES_IMAGE;
  if (!postgresImage || !images.SVC_API_TAG) throw new CliError("the stack's images are not known");
  state.postgres_password = randomBytes(24).toString("base64url");
  writeState(paths, state);
  const fail = (what: string, output: string) => new CliError(`${what} failed:\n${tail(output)}`);

  const pg = `${stack}-restore-postgres`;
  progress("starting postgres alone on the stack's volume to load the dump…");
  // The password from the environment, never in docker's argv.
  const env = { ...process.env, POSTGRES_PASSWORD: state.postgres_password };
  const run = await dockerCli(
    [
      "run",
      "-d",
      "--name",
      pg,
      "-v",
      `${volumes.pgdata}:/var/lib/postgresql/data`,
      "-e",
      "POSTGRES_USER=svc",
      "-e",
      "POSTGRES_DB=svc",
      "-e",
      "POSTGRES_PASSWORD",
      postgresImage,
    ],
    env,
  );
  if (run.code !== 0) throw fail("starting postgres", run.output);
  try {
    // TCP, as the stack's health check: the image's first start serves its socket alone while it initialises.
    const deadline = Date.now() + POSTGRES_TIMEOUT_MS;
    while ((await dockerCli(["exec", pg, "pg_isready", "-h", "127.0.0.1", "-U", "svc", "-d", "svc"])).code !== 0) {
      if (Date.now() > deadline)
        throw new CliError(`postgres did not become ready within ${POSTGRES_TIMEOUT_MS / 1000}s`);
      await sleep(500);
    }
    const load = await runWithFiles(
      "docker",
      ["exec", "-i", pg, "psql", "-q", "-v", "ON_ERROR_STOP=1", "-U", "svc", "-d", "svc"],
      process.env,
      { input: dumpFile },
    );
    if (load.code !== 0) throw fail("loading the dump with psql", load.stderr);
  } finally {
    await dockerCli(["rm", "-f", pg]);
  }

  const holder = `${stack}-restore-data`;
  const created = await dockerCli([
    "create",
    "--name",
    holder,
    "-v",
    `${volumes.data}:${API_HOME}`,
    `svc-api:${images.SVC_API_TAG}`,
  ]);
  if (created.code !== 0) throw fail("creating a container on the data volume", created.output);
  try {
    await fill(holder, API_HOME);
  } finally {
    await dockerCli(["rm", "-f", holder]);
  }
}
