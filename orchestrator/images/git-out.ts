import { spawn } from "node:child_process";
import { spawnBuffered } from "../process-spawner.ts";

/** A git command's trimmed stdout in `dir`; undefined when it fails (an object that does not exist, say). */
export async function gitOut(dir: string, args: string[]): Promise<string | undefined> {
  const result = await spawnBuffered({ file: "git", args: ["-C", dir, ...args] });
  return result.exitCode === 0 ? result.stdout.trim() : undefined;
}

/**
 * A tree (or `commit:path`) as a tar stream: the build context of an image built from the repository. `addFiles`:
 * files of this machine added at the archive's top (git archive --add-file).
 */
export function gitArchive(dir: string, tree: string, addFiles: string[] = []): NodeJS.ReadableStream {
  const add = addFiles.map((file) => `--add-file=${file}`);
  return spawn("git", ["-C", dir, "archive", "--format=tar", ...add, tree], { stdio: ["ignore", "pipe", "ignore"] })
    .stdout;
}
