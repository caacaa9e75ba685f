import { git } from "../../api/git/run.ts";
import { GIT_ENV } from "./git-fixture.ts";

/** Git in a project's bare repository, as its server: the API's endpoint refuses pushes to the default branch. */
export function gitIn(dir: string) {
  return async (args: string[], input?: string) => (await git(args, { dir, input, env: GIT_ENV })).stdout.trim();
}

/** Writes branches of one commit each (a file of their own) on the given parents; returns name -> commit. */
export async function writeBranches(
  dir: string,
  specs: { name: string; from: string }[],
): Promise<Map<string, string>> {
  const g = gitIn(dir);
  let stream = "";
  for (const { name, from } of specs) {
    const content = `${name}\n`;
    stream +=
      `commit refs/heads/${name}\ncommitter T <t@example.test> 1700000000 +0000\ndata ${name.length}\n${name}\n` +
      `from ${from}\nM 100644 inline files/${name}.txt\ndata ${content.length}\n${content}\n`;
  }
  await g(["fast-import", "--quiet"], stream);
  const tips = new Map<string, string>();
  const refs = specs.map((s) => `refs/heads/${s.name}`);
  for (const line of (await g(["for-each-ref", "--format=%(refname:short) %(objectname)", ...refs])).split("\n")) {
    const [name, sha] = line.split(" ");
    tips.set(name!, sha!);
  }
  return tips;
}

/** A first commit on `branch` of an empty repository. */
export async function rootCommit(dir: string, branch = "main"): Promise<string> {
  const g = gitIn(dir);
  const root = await g(["commit-tree", await g(["mktree"], ""), "-m", "root"]);
  await g(["update-ref", `refs/heads/${branch}`, root]);
  return root;
}
