import { createHash } from "node:crypto";
import type { AppSpec } from "../../protocol/manifest.ts";
import { gitOut } from "../images/git-out.ts";

/** A commit never changes: its keys are kept, and only age out. */
const CACHE_SIZE = 1000;

/** JSON with keys in order, so the same entry always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

/** `commit:path` as git names it; the repository's root is the commit's tree. */
export const treeAt = (revision: string, path: string) =>
  path === "." || path === "" ? `${revision}^{tree}` : `${revision}:${path.replace(/\/+$/, "")}`;

/**
 * What an app's deploy depends on, as one hash: its manifest entry (defaults applied), the git tree of its build
 * context and the blob of its Dockerfile at the revision, and the platform image. Same key, same deploy.
 */
export function createBuildKeys() {
  const cache = new Map<string, string>();
  return async function buildKey(gitDir: string, revision: string, spec: AppSpec, platformImage: string) {
    const entry = canonical(spec);
    const id = `${revision}\0${entry}\0${platformImage}`;
    const hit = cache.get(id);
    if (hit) return hit;
    const [context, dockerfile] = await Promise.all([
      gitOut(gitDir, ["rev-parse", "--verify", "-q", treeAt(revision, spec.context)]),
      gitOut(gitDir, ["rev-parse", "--verify", "-q", `${revision}:${spec.build}`]),
    ]);
    const key = createHash("sha256")
      .update([entry, context ?? "-", dockerfile ?? "-", platformImage].join("\0"))
      .digest("hex");
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
    cache.set(id, key);
    return key;
  };
}
