import { spawn } from "node:child_process";

/** A git command's trimmed stdout in `dir`; undefined when it fails (an object that does not exist, say). */
export async function gitOut(dir: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn("git", ["-C", dir, ...args], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
    });
    child.on("close", (code) => resolve(code === 0 ? out.trim() : undefined));
  });
}

/** A tree (or `commit:path`) as a tar stream: the build context of an image built from the repository. */
export function gitArchive(dir: string, tree: string): NodeJS.ReadableStream {
  return spawn("git", ["-C", dir, "archive", "--format=tar", tree], { stdio: ["ignore", "pipe", "ignore"] }).stdout;
}
