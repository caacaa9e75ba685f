import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChangeRequest } from "../../protocol/change-request.ts";
import type { TriggerSpec } from "../../protocol/manifest.ts";
import type { Project } from "../../protocol/project.ts";
import type { Trigger, TriggerList } from "../../protocol/trigger.ts";
import type { ChangeRequestService } from "../change-requests/service.ts";
import { ApiError, apiError } from "../errors.ts";
import { MERGE_IDENTITY } from "../git/merge.ts";
import type { Repositories } from "../git/repositories.ts";
import { git } from "../git/run.ts";
import type { ManifestRead } from "../manifest/reader.ts";
import type { SessionService } from "../sessions/service.ts";
import type { SessionRecord } from "../sessions/store.ts";
import { setTriggerEnabled } from "./manifest-edit.ts";
import type { TriggerState, TriggerStore } from "./store.ts";

export const MANIFEST_PATH = "svc.toml";

export type TriggerServiceDeps = {
  store: TriggerStore;
  manifests: { read(project: Project): Promise<ManifestRead> };
  repos: Repositories;
  changeRequests: ChangeRequestService;
  /** Undefined on a server without a sandbox driver: firing then answers 503. */
  sessions: SessionService | undefined;
  /** This API process: recorded on the firings it claims. */
  instanceId: string;
};

const IDENTITY_ENV = {
  GIT_AUTHOR_NAME: MERGE_IDENTITY.name,
  GIT_AUTHOR_EMAIL: MERGE_IDENTITY.email,
  GIT_COMMITTER_NAME: MERGE_IDENTITY.name,
  GIT_COMMITTER_EMAIL: MERGE_IDENTITY.email,
};
const BRANCH_ATTEMPTS = 50;

function present(t: TriggerSpec, state: TriggerState | undefined): Trigger {
  return {
    slug: t.slug,
    schedule: t.schedule,
    timezone: t.timezone ?? null,
    prompt: t.prompt,
    enabled: t.enabled,
    base_ref: t.base_ref ?? null,
    agent: t.agent ?? null,
    last_fired_at: state?.last_fired_at ?? null,
    last_session_id: state?.last_session_id ?? null,
    last_error: state?.last_error ?? null,
    last_refused_at: state?.last_refused_at ?? null,
    last_refusal: state?.last_refusal ?? null,
  };
}

/**
 * Triggers as the default branch's manifest defines them, with their runtime state; firing them (claim, then a
 * session like `sessions new --prompt`, then the outcome recorded); and enabling or disabling one through a CR.
 */
export function createTriggerService(deps: TriggerServiceDeps) {
  const { store } = deps;

  async function definition(project: Project, slug: string): Promise<TriggerSpec> {
    const { manifest } = await deps.manifests.read(project);
    const trigger = manifest.triggers.find((t) => t.slug === slug);
    if (!trigger)
      throw apiError("TRIGGER_NOT_FOUND", `trigger '${slug}' is not in ${MANIFEST_PATH} on the default branch`);
    return trigger;
  }

  /** Creates the session of an instant already claimed; a refusal is recorded on the trigger, never retried. */
  async function startClaimed(
    project: Project,
    trigger: TriggerSpec,
    at: Date,
  ): Promise<{ session: SessionRecord } | { error: ApiError }> {
    try {
      const { sessions } = deps;
      if (!sessions)
        throw apiError("NOT_CONFIGURED", "sessions are unavailable: this server runs without a sandbox driver");
      const userId = await store.actingUser(project.id);
      if (!userId) throw apiError("NOT_FOUND", "the project's account has no member to start sessions as");
      const session = await sessions.create(
        project,
        { prompt: trigger.prompt, agent: trigger.agent, base_ref: trigger.base_ref },
        userId,
        { trigger: trigger.slug },
      );
      await store.recordFiring(project.id, trigger.slug, at, { sessionId: session.session_id });
      return { session };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      await store.recordFiring(project.id, trigger.slug, at, { error: message });
      if (err instanceof ApiError) return { error: err };
      throw err;
    }
  }

  /** Commits `text` as svc.toml on top of `commit` (system identity, a temporary index); returns the commit. */
  async function commitManifest(dir: string, commit: string, text: string, message: string): Promise<string> {
    const blob = (await git(["hash-object", "-w", "--stdin"], { dir, input: text })).stdout.trim();
    const entry = (await git(["ls-tree", commit, "--", MANIFEST_PATH], { dir })).stdout;
    const mode = /^(\d+) /.exec(entry)?.[1] ?? "100644";
    const tmp = mkdtempSync(join(tmpdir(), "svc-index-"));
    try {
      const env = { ...IDENTITY_ENV, GIT_INDEX_FILE: join(tmp, "index") };
      await git(["read-tree", commit], { dir, env });
      await git(["update-index", "--add", "--cacheinfo", `${mode},${blob},${MANIFEST_PATH}`], { dir, env });
      const tree = (await git(["write-tree"], { dir, env })).stdout.trim();
      return (
        await git(["commit-tree", tree, "-p", commit, "-F", "-"], { dir, env, input: `${message}\n` })
      ).stdout.trim();
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }

  return {
    async list(project: Project): Promise<TriggerList> {
      const [read, states] = await Promise.all([deps.manifests.read(project), store.states(project.id)]);
      return {
        triggers: read.manifest.triggers.map((t) => present(t, states.get(t.slug))),
        manifest_error: read.error,
      };
    },

    async get(project: Project, slug: string): Promise<Trigger> {
      const trigger = await definition(project, slug);
      return present(trigger, (await store.states(project.id)).get(slug));
    },

    /** Fires now, whether or not the trigger is enabled (its definition is what counts). */
    async fireNow(project: Project, slug: string): Promise<SessionRecord> {
      const trigger = await definition(project, slug);
      if (!deps.sessions)
        throw apiError("NOT_CONFIGURED", "sessions are unavailable: this server runs without a sandbox driver");
      const at = new Date();
      if (!(await store.claim(project.id, slug, at, deps.instanceId, true)))
        throw apiError("CONFLICT", `trigger '${slug}' fired at this very instant already`);
      const out = await startClaimed(project, trigger, at);
      if ("error" in out) throw out.error;
      return out.session;
    },

    /** The scheduler's part (TriggerPort): claims and sessions of scheduled instants. */
    claim: (projectId: string, slug: string, at: Date) => store.claim(projectId, slug, at, deps.instanceId),
    startClaimed,

    /**
     * Commits the one-line edit of `enabled` on a new branch `svc/trigger-<slug>-<enabled|disabled>-<n>` and opens
     * a CR for it; the default branch is never written, so the schedule changes when (if) that CR merges.
     */
    async setEnabled(project: Project, slug: string, enabled: boolean, userId: string): Promise<ChangeRequest> {
      await definition(project, slug);
      const dir = await deps.repos.open(project, 0);
      const tip = await git(["rev-parse", "--verify", "--quiet", `refs/heads/${project.default_branch}^{commit}`], {
        dir,
        okCodes: [1, 128],
      });
      if (tip.exitCode !== 0) throw apiError("BRANCH_NOT_FOUND", `branch '${project.default_branch}' does not exist`);
      const commit = tip.stdout.trim();
      const text = (await git(["show", `${commit}:${MANIFEST_PATH}`], { dir })).stdout;
      const edited = setTriggerEnabled(text, slug, enabled);
      if (edited === undefined)
        throw apiError("TRIGGER_NOT_FOUND", `no [[triggers]] table with slug '${slug}' in ${MANIFEST_PATH}`);
      const word = enabled ? "enabled" : "disabled";
      if (edited === text)
        throw apiError("TRIGGER_UNCHANGED", `trigger '${slug}' is already ${word} on the default branch`);
      const verb = enabled ? "Enable" : "Disable";
      const sha = await commitManifest(dir, commit, edited, `${verb} trigger ${slug}`);
      const safe = slug.replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "") || "trigger";
      const tips = await deps.repos.tips(project, 0);
      for (let n = 1; n <= BRANCH_ATTEMPTS; n++) {
        const branch = `svc/trigger-${safe}-${word}-${n}`;
        if (tips?.has(branch)) continue;
        if (!(await deps.repos.createBranch(project, branch, sha))) continue;
        return deps.changeRequests.create(
          project,
          {
            title: `${verb} trigger ${slug}`,
            description: `Sets \`enabled = ${enabled}\` for the \`${slug}\` trigger in ${MANIFEST_PATH}. The schedule changes when this CR merges.`,
            head_ref: branch,
          },
          userId,
        );
      }
      throw apiError("CONFLICT", `could not create a branch for trigger '${slug}': ${BRANCH_ATTEMPTS} exist already`);
    },
  };
}

export type TriggerService = ReturnType<typeof createTriggerService>;
