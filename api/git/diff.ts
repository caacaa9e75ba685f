import type { Diff, DiffFile, DiffFileStatus } from "../../protocol/change-request.ts";
import { git } from "./run.ts";

const STATUS: Record<string, DiffFileStatus> = {
  A: "added",
  D: "deleted",
  M: "modified",
  T: "modified",
  R: "modified",
  C: "added",
};

/**
 * Parses `git diff --raw --numstat -z -M`: raw records (`:<modes> <shas> <status>\0<path>\0[<new path>\0]`) then
 * numstat records (`<adds>\t<dels>\t<path>\0` or, for a rename, `<adds>\t<dels>\t\0<old>\0<new>\0`).
 * Renames are `modified` under the new path with `old_path` set; copies are `added`; binary files count 0/0.
 */
export function parseRawNumstat(output: string): DiffFile[] {
  const tokens = output.split("\0");
  const files: DiffFile[] = [];
  const byPath = new Map<string, DiffFile>();
  let i = 0;
  while (i < tokens.length && tokens[i]!.startsWith(":")) {
    const letter = tokens[i]!.split(" ").at(-1)![0]!;
    const renamed = letter === "R" || letter === "C";
    const oldPath = renamed ? tokens[i + 1]! : null;
    const path = renamed ? tokens[i + 2]! : tokens[i + 1]!;
    i += renamed ? 3 : 2;
    const file: DiffFile = {
      path,
      old_path: oldPath,
      status: STATUS[letter] ?? "modified",
      additions: 0,
      deletions: 0,
      binary: false,
    };
    files.push(file);
    byPath.set(path, file);
  }
  while (i < tokens.length && tokens[i] !== "") {
    // Only the first two tabs separate fields: a path may contain tabs itself.
    const [adds, dels, ...pathParts] = tokens[i]!.split("\t");
    let path = pathParts.join("\t");
    i += 1;
    if (path === "") {
      path = tokens[i + 1]!;
      i += 2;
    }
    const file = byPath.get(path);
    if (!file) continue;
    file.binary = adds === "-";
    file.additions = file.binary ? 0 : Number(adds);
    file.deletions = file.binary ? 0 : Number(dels);
  }
  return files;
}

/**
 * The CR diff between two commits: three-dot (changes on head since the merge base) when they share history,
 * the plain two-commit diff when they do not.
 */
export async function computeDiff(dir: string, baseSha: string, headSha: string, hasMergeBase: boolean): Promise<Diff> {
  const range = hasMergeBase ? [`${baseSha}...${headSha}`] : [baseSha, headSha];
  const common = ["diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv"];
  const [stat, patch] = await Promise.all([
    git([...common, "--raw", "--numstat", "-z", ...range, "--"], { dir }),
    git([...common, ...range, "--"], { dir }),
  ]);
  return { base_sha: baseSha, head_sha: headSha, patch: patch.stdout, files: parseRawNumstat(stat.stdout) };
}
