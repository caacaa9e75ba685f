import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Project } from "../../protocol/project.ts";
import { type BranchTips, createTipsCache } from "./refs.ts";
import { pinnedAddresses, type RemoteAddressCheck } from "./remote-address.ts";
import { configEnv, git } from "./run.ts";

/**
 * Transports git may use against an external remote: never `ext::` (runs commands), `fd::` or other helpers, and
 * never `file` (a file URL or a local path): the API's disk holds every project's repository, and a push there
 * would pass no hook. The URL rule (protocol/project.ts) refuses such URLs; this holds for rows stored before it.
 */
const REMOTE_PROTOCOLS = "git:http:https:ssh";
const ZERO_SHA = "0000000000000000000000000000000000000000";
// A mirror clone refuses refspecs on push; our pushes name exactly one ref, never forced.
const PUSH = ["-c", "remote.origin.mirror=false", "push", "--quiet"];

export class RepoUnavailableError extends Error {}

/** Where a project's git dir is; a remote's credential and reach also depend on its URL and account. */
type RepoLocation = Pick<Project, "id" | "repo_kind">;
type RepoRef = RepoLocation & Pick<Project, "account_id" | "repo_url">;

export type RepositoriesOptions = {
  /** Where bare repositories (managed) and mirrors (external) live. */
  dataDir: string;
  /** Branch tips are re-read at most this often unless a write through this module invalidated them. */
  tipsTtlMs?: number;
  /** External mirrors are re-fetched for reads at most this often; merges always fetch first. */
  mirrorMaxAgeMs?: number;
  /** The self-host repository-access token (a fixed one, or a GitHub App's), sent only under `repoAccessUrl`. */
  repoAccessToken?: () => Promise<string>;
  repoAccessUrl?: string;
  /** Whether the self-host token serves this account's projects (SVC_REPO_ACCESS_ACCOUNTS); without it, none. */
  repoAccessServes?: (accountId: string) => Promise<boolean>;
  /** Where a remote may be (SVC_REPO_ALLOWED_HOSTS): asked before every clone, fetch and push. */
  checkRemote: RemoteAddressCheck;
  /** A project's own token for its external repository (its `GIT_ACCESS_TOKEN` secret). */
  projectAccessToken?: (projectId: string) => Promise<string | undefined>;
  /** Called after an external mirror was fetched (its default branch may have moved). */
  onFetched?: (projectId: string) => void;
};

/**
 * The project's repository backend. Managed projects: a bare repository that this service owns. External
 * projects: a bare mirror cache of the origin, fetched before CR work and written back by non-forced pushes.
 * Both end up as a local git dir on which merge-tree, diff and commit-tree run.
 */
export function createRepositories(options: RepositoriesOptions) {
  const tipsCache = createTipsCache({ ttlMs: options.tipsTtlMs ?? 1000 });
  /**
   * Credentials for a remote, passed through the environment (never argv, never the mirror's config) and each
   * scoped by URL prefix: the project's own `GIT_ACCESS_TOKEN` secret for its repository, the self-host token
   * for its host and the accounts it serves. Neither is ever sent anywhere else, nor along a redirect.
   * Throws RepoUnavailableError when the remote's host now resolves where no repository may be (DNS changes).
   */
  async function remoteEnv(p: RepoRef, config: [string, string][] = []): Promise<Record<string, string>> {
    const verdict = await options.checkRemote(p.repo_url ?? "");
    if (!verdict.ok) throw new RepoUnavailableError(verdict.reason);
    const headers: [string, string][] = [];
    const own = p.repo_url && /^https?:\/\//.test(p.repo_url) ? await options.projectAccessToken?.(p.id) : undefined;
    if (own) headers.push([p.repo_url!, own]);
    const accessUrl = options.repoAccessUrl ?? "https://github.com/";
    // Asked only for a remote it would be sent to: a GitHub App's token costs a request to mint.
    if (
      options.repoAccessToken &&
      p.repo_url?.startsWith(accessUrl) &&
      (await options.repoAccessServes?.(p.account_id)) === true
    )
      headers.push([accessUrl, await options.repoAccessToken()]);
    // GIT_ALLOW_PROTOCOL overrides any `protocol.*.allow`; `protocol.file.allow=never` says the same to a git
    // that would read config first.
    return {
      GIT_ALLOW_PROTOCOL: REMOTE_PROTOCOLS,
      ...configEnv([
        ...config,
        ["protocol.file.allow", "never"],
        // git's default (`initial`) follows a redirect of the first request to any host and then sends every later
        // request, extraHeader included, there: a remote that moved answers as unreachable instead.
        ["http.followRedirects", "false"],
        ...pinnedAddresses(verdict),
        ...headers.map(([url, token]): [string, string] => [
          `http.${url}.extraHeader`,
          `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`,
        ]),
      ]),
    };
  }
  const mirrorMaxAge = options.mirrorMaxAgeMs ?? 2000;
  const fetchedAt = new Map<string, number>();
  const fetching = new Map<string, Promise<void>>();

  const managedDir = (projectId: string) => join(options.dataDir, "repos", `${projectId}.git`);
  const mirrorDir = (projectId: string) => join(options.dataDir, "mirrors", `${projectId}.git`);
  const dirOf = (p: RepoLocation) => (p.repo_kind === "managed" ? managedDir(p.id) : mirrorDir(p.id));

  async function fetchMirror(p: RepoRef): Promise<void> {
    const dir = mirrorDir(p.id);
    try {
      if (!fetchedAt.has(p.id)) {
        // First use in this process: reuse a mirror left by an earlier run, else clone one.
        const exists = await git(["rev-parse", "--is-bare-repository"], { dir, okCodes: [128] });
        if (exists.exitCode !== 0 || exists.stdout.trim() !== "true") {
          rmSync(dir, { recursive: true, force: true });
          mkdirSync(join(options.dataDir, "mirrors"), { recursive: true, mode: 0o700 });
          await git(["clone", "--mirror", "--quiet", "--", p.repo_url!, dir], {
            env: await remoteEnv(p),
            timeoutMs: 600_000,
          });
          return;
        }
      }
      await git(["fetch", "--prune", "--quiet", "origin"], { dir, env: await remoteEnv(p), timeoutMs: 600_000 });
    } catch (err) {
      throw new RepoUnavailableError(err instanceof Error ? err.message : String(err));
    }
  }

  /** A local git dir with the project's current refs; external mirrors are fetched when older than `maxAgeMs`. */
  async function open(p: RepoRef, maxAgeMs = mirrorMaxAge): Promise<string> {
    if (p.repo_kind === "managed") return managedDir(p.id);
    const last = fetchedAt.get(p.id);
    if (last !== undefined && Date.now() - last <= maxAgeMs) return mirrorDir(p.id);
    let pending = fetching.get(p.id);
    if (!pending) {
      pending = fetchMirror(p)
        .then(() => {
          fetchedAt.set(p.id, Date.now());
          tipsCache.invalidate(mirrorDir(p.id));
          options.onFetched?.(p.id);
        })
        .finally(() => fetching.delete(p.id));
      fetching.set(p.id, pending);
    }
    await pending;
    return mirrorDir(p.id);
  }

  /** The one way a branch is written: compare-and-swap locally, a non-forced (or leased) push remotely. */
  async function writeBranch(
    p: RepoRef,
    branch: string,
    sha: string,
    guard: { expected: string; pushArgs: string[]; ticket?: string },
  ): Promise<boolean> {
    const dir = dirOf(p);
    const ref = `refs/heads/${branch}`;
    try {
      const { exitCode } =
        p.repo_kind === "managed"
          ? guard.ticket
            ? // One transaction: the branch moves only while the ticket is there, and takes it away as it moves.
              await git(["update-ref", "--stdin"], {
                dir,
                input: `update ${ref} ${sha} ${guard.expected}\ndelete ${guard.ticket} ${sha}\n`,
                okCodes: [1, 128],
              })
            : await git(["update-ref", ref, sha, guard.expected], { dir, okCodes: [1, 128] })
          : await git([...PUSH, ...guard.pushArgs, "origin", `${sha}:refs/heads/${branch}`], {
              dir,
              env: await remoteEnv(p),
              okCodes: [1],
              timeoutMs: 600_000,
            });
      return exitCode === 0;
    } finally {
      invalidate(p);
    }
  }

  function invalidate(p: RepoLocation): void {
    tipsCache.invalidate(dirOf(p));
    fetchedAt.delete(p.id);
  }

  return {
    managedDir,
    /** The local git dir of a project: its managed repository or its external remote's mirror. */
    dirOf,
    open,
    invalidate,
    /**
     * The environment for git to talk to the project's external remote with the project's credential, plus
     * `config`: what the git endpoint's hook relays a sandbox's push with. The credential stays in this process's
     * children; it never reaches a sandbox.
     */
    remoteEnv,

    async initManaged(projectId: string, defaultBranch: string): Promise<void> {
      const dir = managedDir(projectId);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      await git(["init", "--bare", "--quiet", `--initial-branch=${defaultBranch}`, dir]);
    },

    async removeManaged(projectId: string): Promise<void> {
      rmSync(managedDir(projectId), { recursive: true, force: true });
    },

    /**
     * Branch tips, or undefined when the repository cannot be reached (callers then serve stored data). `maxAgeMs` 0:
     * as they are now, a push another replica took a moment ago included (an external mirror fetched first).
     */
    async tips(p: RepoRef, maxAgeMs?: number): Promise<BranchTips | undefined> {
      try {
        return await tipsCache.get(await open(p, maxAgeMs), maxAgeMs === 0 ? 0 : undefined);
      } catch {
        return undefined;
      }
    },

    /**
     * Moves `branch` from `oldSha` to `newSha` and nothing else: update-ref with the old value for managed
     * repositories, a non-forced push for external ones. False when the branch had moved meanwhile.
     */
    updateBranch: (p: RepoRef, branch: string, newSha: string, oldSha: string, options: { ticket?: string } = {}) =>
      writeBranch(p, branch, newSha, { expected: oldSha, pushArgs: [], ticket: options.ticket }),

    /**
     * A merge's ticket (managed repositories): a ref under refs/svc/ at the merge's commit, which `updateBranch` with
     * `ticket` needs and deletes in the same transaction. Voiding it is how the repair makes sure that a merge whose
     * process it believes gone (a git of it may still be running, or the process only lost the database) can no
     * longer move the branch. An external remote's push cannot be tied to a local ref: there, both are no-ops.
     */
    async issueTicket(p: RepoRef, ticket: string, sha: string): Promise<void> {
      if (p.repo_kind === "managed") await git(["update-ref", ticket, sha, ZERO_SHA], { dir: dirOf(p) });
    },
    /** False when git could not delete it now (a merge holding it is committing): ask again later. */
    async voidTicket(p: RepoRef, ticket: string): Promise<boolean> {
      if (p.repo_kind !== "managed") return true;
      return (await git(["update-ref", "-d", ticket], { dir: dirOf(p), okCodes: [1, 128] })).exitCode === 0;
    },

    /** Removes a branch svc made for its own use (a check's); an external remote's copy is deleted by a push. */
    async deleteBranch(p: RepoRef, branch: string): Promise<void> {
      const dir = dirOf(p);
      try {
        if (p.repo_kind === "managed") await git(["update-ref", "-d", `refs/heads/${branch}`], { dir, okCodes: [1] });
        else
          await git([...PUSH, "origin", `:refs/heads/${branch}`], {
            dir,
            env: await remoteEnv(p),
            okCodes: [1],
            timeoutMs: 60_000,
          });
      } finally {
        invalidate(p);
      }
    },

    /** Creates `branch` at `fromSha`; false when it already exists. Generic backends push the new ref. */
    createBranch: (p: RepoRef, branch: string, fromSha: string) =>
      // An empty lease means "must not exist yet": create-only, never moving an existing branch.
      writeBranch(p, branch, fromSha, { expected: ZERO_SHA, pushArgs: [`--force-with-lease=refs/heads/${branch}:`] }),
  };
}

export type Repositories = ReturnType<typeof createRepositories>;
