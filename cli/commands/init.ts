import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { Command } from "commander";
import { CliError } from "../errors.ts";
import { info, printJson } from "../output.ts";
import { AGENT_CONFIG, CR_SKILL, DEFAULT_AGENT, DOCKERFILE, manifest, SVC_GITIGNORE } from "../scaffold/templates.ts";

export type InitOptions = { force?: boolean };

/** Coding agents on the developer's machine that read skills from these folders get the svc skill too. */
const LOCAL_AGENT_SKILL_DIRS = [".claude/skills", ".opencode/skill", ".agents/skills"];

function writeFile(root: string, path: string, content: string, force: boolean, written: string[]): void {
  const full = join(root, path);
  if (existsSync(full) && !force) {
    info(`  kept ${path} (exists; --force overwrites)`);
    return;
  }
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, content);
  written.push(path);
}

/** Scaffolds svc.toml, .svc/Dockerfile and the agent config dir; never writes .svc/link.json. */
export function scaffold(dir: string, options: InitOptions): string[] {
  const root = resolve(dir);
  const force = options.force ?? false;
  const written: string[] = [];
  writeFile(root, "svc.toml", manifest(basename(root)), force, written);
  writeFile(root, ".svc/Dockerfile", DOCKERFILE, force, written);
  writeFile(root, ".svc/.gitignore", SVC_GITIGNORE, force, written);
  writeFile(root, ".svc/agent/opencode.json", AGENT_CONFIG, force, written);
  writeFile(root, ".svc/agent/agent/build.md", DEFAULT_AGENT, force, written);
  writeFile(root, ".svc/agent/skill/svc-change-requests/SKILL.md", CR_SKILL, force, written);
  for (const skills of LOCAL_AGENT_SKILL_DIRS) {
    if (existsSync(join(root, dirname(skills)))) {
      writeFile(root, `${skills}/svc-change-requests/SKILL.md`, CR_SKILL, force, written);
    }
  }
  return written;
}

export function initCommand(): Command {
  return new Command("init")
    .description("scaffold svc.toml, .svc/Dockerfile and the agent config in this directory")
    .option("--force", "overwrite existing files")
    .option("--json", "output JSON: the files written")
    .action((options: InitOptions & { json?: boolean }) => {
      const written = scaffold(process.cwd(), options);
      if (options.json) return printJson({ written });
      for (const path of written) info(`  wrote ${path}`);
      info(
        written.length
          ? "✓ svc project scaffolded; commit it, then 'svc ship'"
          : "nothing to write: already scaffolded",
      );
    });
}

/** `svc <project-name>`: the same scaffold in a new directory next to the current one. */
export function createProjectDirectory(name: string, options: InitOptions): void {
  if (!/^[A-Za-z0-9][\w.-]*$/.test(name)) throw new CliError(`'${name}' is not a usable directory name`);
  const dir = resolve(name);
  if (existsSync(dir)) throw new CliError(`${dir} already exists; run 'svc init' inside it instead`);
  mkdirSync(dir);
  execFileSync("git", ["init", "-q", dir]);
  const written = scaffold(dir, options);
  for (const path of written) info(`  wrote ${name}/${path}`);
  info(`✓ created ${name}/; next: cd ${name} && git add -A && git commit -m init && svc ship`);
}
