import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";

/**
 * The test tiers (vitest.config.ts makes one Vitest project of each), named file by file so that a new test lands
 * in a tier on purpose: a file under test/ in no list, or in two, fails the configuration, and so does a listed
 * file that is gone.
 *
 * - unit: the tests beside the code (api/, cli/, daemon/, orchestrator/, protocol/) that need no Docker, no
 *   database (PGlite included) and no network, loopback included: pure modules, the orchestrator against in-memory
 *   drivers and ports. Every such file is unit unless API_TIER lists it.
 * - api: real HTTP on loopback, the API on PGlite and on the PostgreSQL server, the real svc binary, the daemon as
 *   a local process; no Docker, no Chromium.
 * - docker: real containers (sandboxes, the agent runtime, compose mode), a `svc self-host start` whose API talks
 *   to the Docker engine, and Chromium.
 */
export const TIERS = ["unit", "api", "docker"] as const;
export type Tier = (typeof TIERS)[number];

/** Where unit tests live: beside the code they test. */
export const UNIT_DIRS = ["api", "cli", "daemon", "orchestrator", "protocol"];

export const API_TIER = [
  // Beside the code, but not unit: a database or a server on loopback.
  "api/admin/restore.test.ts", // PGlite
  "api/db/sql.test.ts", // PGlite
  "api/edge/server.test.ts", // the edge and a refusing replica on loopback
  "api/egress/proxy.test.ts", // the proxy and its targets on loopback
  "protocol/http-tunnel.test.ts", // the tunnel and its upstreams on loopback
  "daemon/server.test.ts", // the daemon's HTTP surface on loopback
  "daemon/warm-up-model.test.ts", // a model endpoint on loopback
  "test/accounts.test.ts", // two accounts, one person in both, the real svc binary
  "test/api-auth.test.ts",
  "test/audit.test.ts", // the API process's own log at trace level; the real svc binary
  "test/api-validation.test.ts",
  "test/change-requests.test.ts",
  "test/cli-chat.test.ts",
  "test/cli-newcomer.test.ts", // the API with a session service over a driver that runs no sandbox
  "test/cli-output.test.ts",
  "test/cli-terminal.test.ts",
  "test/cli-workflow.test.ts",
  "test/cr-approvals.test.ts", // the real CLI, the CR page's form over plain HTTP
  "test/cr-checks-cli.test.ts", // the API with no check scheduler, its runs seeded through its store; the real CLI
  "test/cr-closed-refresh.test.ts",
  "test/cr-comments.test.ts", // the API with a session service over a driver that runs no sandbox, the real CLI
  "test/roles.test.ts", // real git pushes by role, the CR page's Merge over plain HTTP
  "test/route-roles.test.ts", // every line of ROUTE_ROLES for each role; a session service over a driver that runs no sandbox
  "test/daemon-proxy.test.ts",
  "test/daemon-workspace.test.ts",
  "test/daemon-exec.test.ts", // the daemon as a local process running commands, directly and over its link to the API
  "test/daemon.test.ts",
  "test/external-repos.test.ts",
  "test/git-children.test.ts",
  "test/sandbox-clone.test.ts",
  "test/sandbox-link.test.ts", // the daemon as a local process dialing the API's link; a ws echo server on loopback
  "test/link-spares.test.ts", // a daemon's spare connections against a stand-in API on loopback
  "test/sandbox-link-replicas.test.ts", // two APIs on one PostgreSQL database behind the real edge, daemons dialing it
  "test/git-http.test.ts",
  "test/github-app.test.ts",
  "test/manifest.test.ts",
  "test/merge-crash.test.ts", // API processes SIGKILLed mid-merge, on the PostgreSQL server
  "test/merge-repair.test.ts", // interrupted merges settled, on the PostgreSQL server
  "test/model-stall.test.ts", // the daemon with the real opencode as local processes, a stalling gateway on loopback
  "test/plans.test.ts", // a driver that starts no sandbox: started sessions hold their slot
  "test/people.test.ts",
  "test/pglite-template.test.ts", // the API process from dist/ in new homes, on its embedded PGlite
  "test/people-cli.test.ts", // the API as a process (its whole log read), the real CLI, a pseudo-terminal
  "test/secrets.test.ts",
  "test/security/bad-input.test.ts",
  "test/security/external-relay.test.ts",
  "test/security/push-rules.test.ts",
  "test/security/push-size.test.ts",
  "test/security/repo-urls.test.ts",
  "test/security/tokens.test.ts",
  "test/served-install.test.ts", // the API process with SVC_ORCHESTRATOR=off
  "test/self-host-wizard.test.ts", // its stacks start with SVC_ORCHESTRATOR=off
  "test/session-cap.test.ts", // two APIs on one database, a driver that records calls and starts no sandbox
  "test/session-ids.test.ts", // the API with a session service over a driver that runs no sandbox
  "test/session-wait.test.ts", // the API with a session service over a driver that runs no sandbox
  "test/storage.test.ts",
  "test/transcript.test.ts",
  "test/trigger-refusals.test.ts",
  "test/triggers-external.test.ts",
  "test/usage.test.ts",
];

export const DOCKER_TIER = [
  "test/agent-runtime.test.ts",
  "test/apps.test.ts",
  "test/backup-restore.test.ts", // two self-host stacks on the Docker engine: the original and its restored copy
  "test/channels.test.ts",
  "test/cli-model.test.ts",
  "test/cli-no-model.test.ts",
  "test/cli-self-host.test.ts", // svc self-host start: an API on the Docker engine
  "test/cluster.test.ts",
  "test/cr-review-loop.test.ts", // one sandbox stack, the real opencode with a scripted model, Chromium
  "test/dashboard-cr-checks.test.ts", // Chromium
  "test/dashboard-people.test.ts", // Chromium
  "test/dashboard-session.test.ts",
  "test/dashboard.test.ts", // Chromium
  "test/install.test.ts", // README's first command: setup, npm ci, a stack on the Docker engine
  "test/previews.test.ts",
  "test/sandbox-access.test.ts",
  "test/sandbox-link-exec.test.ts", // svc sessions exec in SVC_SANDBOX_LINK=dial-out: through the daemon, over its link
  "test/security/file-permissions.test.ts", // svc self-host start
  "test/security/host-egress.test.ts",
  "test/security/hostile-preview.test.ts",
  "test/security/provisioning-errors.test.ts",
  "test/security/sandbox-disk.test.ts",
  "test/security/sandbox-isolation.test.ts",
  "test/security/sandbox-writes.test.ts",
  "test/security/token-scope.test.ts",
  "test/self-host-compose.test.ts",
  "test/self-host-doctor.test.ts",
  "test/self-host-sessions.test.ts",
  "test/self-host-stop.test.ts",
  "test/session-images.test.ts",
  "test/sessions.test.ts",
  "test/sandbox-direct.test.ts", // SVC_SANDBOX_LINK=direct: a real sandbox reached at its address
  "test/sso.test.ts", // Chromium, a real OpenID provider (oidc-provider) on loopback
  "test/session-transcript.test.ts",
  "test/session-checkpoints.test.ts",
  "test/cr-checks.test.ts",
  "test/swarm-driver.test.ts", // a Docker Swarm on the machine's engine (test/support/swarm.ts), a second engine joined to it (scripts/swarm-node2.sh), a registry
  "test/swarm-sessions.test.ts", // sessions as Swarm services over dial-out links: prompt to CR, a preview, a killed task
  "test/self-host-swarm.test.ts", // svc self-host start --mode swarm: the whole stack on a one-node Swarm (test/support/swarm.ts)
  "test/triggers-cluster.test.ts",
  "test/triggers.test.ts",
  "test/uninstall-cleanup.test.ts", // svc uninstall and self-host stop against the Docker engine
  "test/warm-pool.test.ts",
];

/** What no unit test may use: a database, Docker, a server of its own. A file that does is listed in another tier. */
const NOT_UNIT =
  /@electric-sql\/pglite|\bfreshDatabase\b|\bstartApi\b|\brequireDocker\b|\bdockerode\b|\bcreateServer\b|\.listen\(/;

function testFilesUnder(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".test.ts") && !e.parentPath.split(sep).includes("node_modules"))
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join("/"))
    .sort();
}

/** Each tier's files, relative to `root`; throws when a test file is in no tier or in two, or a listed one is gone. */
export function tierFiles(root: string): Record<Tier, string[]> {
  const found = [...UNIT_DIRS, "test"].flatMap((dir) => testFilesUnder(root, dir));
  const listed = [...API_TIER, ...DOCKER_TIER];
  const problems: string[] = [];
  for (const file of new Set(listed)) {
    if (listed.indexOf(file) !== listed.lastIndexOf(file)) problems.push(`${file} is listed twice`);
    if (!found.includes(file)) problems.push(`${file} is listed but does not exist`);
  }
  const unit = found.filter((f) => !f.startsWith("test/") && !listed.includes(f));
  for (const file of found)
    if (file.startsWith("test/") && !listed.includes(file)) problems.push(`${file} is in no tier`);
  for (const file of unit) {
    const use = NOT_UNIT.exec(readFileSync(join(root, file), "utf8"));
    if (use) problems.push(`${file} uses ${use[0]}, which a unit test may not`);
  }
  if (problems.length > 0)
    throw new Error(
      `test tiers (test/support/tiers.ts): ${problems.join("; ")}. List each test file under test/ in API_TIER ` +
        "(no Docker, no Chromium) or DOCKER_TIER; a test beside the code that needs a database, a server of its " +
        "own or Docker is listed there too.",
    );
  return { unit, api: [...API_TIER], docker: [...DOCKER_TIER] };
}
