import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { Command } from "commander";
import { z } from "zod";
import { SecretList } from "../../protocol/secret.ts";
import { DOTENV_FILE, parseDotenv, parsePair } from "../dotenv.ts";
import { CliError, usageError } from "../errors.ts";
import { info, printJson, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { readStdin } from "../prompt.ts";
import { printTable } from "../table.ts";

const SetResult = z.object({ names: z.array(z.string()), revision: z.number() });
const UnsetResult = z.object({ removed: z.array(z.string()), revision: z.number() });

/** The manifest in force is the default branch's: a broken one still lists its last good `[env]`, with why. */
function warnManifestError(list: SecretList): void {
  if (list.manifest_error) warn(`${list.manifest_error.message} (listing the last good manifest's [env])`);
}

export function secretsCommands(): Command[] {
  const secrets = new Command("secrets").description("project secrets, injected into every sandbox as env vars");
  const withProject = (c: Command) => c.addOption(projectOption()).option("--json", "output JSON");

  withProject(secrets.command("ls").description("secret names and the default branch manifest's [env] spec")).action(
    async (_o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "secrets");
      const list = await ctx.client.request("GET", path(), SecretList);
      const spec = list.env;
      warnManifestError(list);
      const names = new Set([...list.secrets.map((s) => s.name), ...Object.keys(spec)]);
      const rows = [...names].sort().map((name) => {
        const stored = list.secrets.find((s) => s.name === name);
        return {
          name,
          set: Boolean(stored),
          required: Boolean(spec[name]?.required),
          updated_at: stored?.updated_at ?? null,
        };
      });
      if (opts.json)
        return printJson({
          secrets: rows,
          revision: list.revision,
          manifest_commit: list.manifest_commit,
          manifest_error: list.manifest_error,
        });
      if (rows.length === 0) return info("no secrets");
      printTable(
        rows.map((r) => [r.name, r.set ? "set" : r.required ? "MISSING (required)" : "not set", r.updated_at ?? ""]),
        { header: ["NAME", "STATE", "UPDATED"] },
      );
    },
  );

  withProject(
    secrets
      .command("set")
      .description("upsert NAME=VALUE pairs; NAME=- reads the value from stdin")
      .argument("<pairs...>"),
  ).action(async (pairs: string[], _o, cmd: Command) => {
    const values: Record<string, string> = {};
    let stdinUsed = false;
    for (const [i, pair] of pairs.entries()) {
      const [name, value] = parsePair(pair, i + 1);
      if (value === "-") {
        if (stdinUsed) throw usageError("only one NAME=- can read stdin");
        stdinUsed = true;
      }
      values[name] = value === "-" ? await readStdin() : value;
    }
    const { opts, ctx, path } = projectCommand(cmd, "secrets");
    const result = await ctx.client.request("PUT", path(), SetResult, { body: { secrets: values } });
    if (opts.json) return printJson(result);
    info(`✓ set ${result.names.join(", ")} (revision ${result.revision})`);
  });

  withProject(secrets.command("unset").description("remove secrets").argument("<names...>")).action(
    async (names: string[], _o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "secrets");
      const result = await ctx.client.request("DELETE", path(), UnsetResult, { body: { names } });
      if (opts.json) return printJson(result);
      info(result.removed.length ? `✓ removed ${result.removed.join(", ")}` : "nothing to remove");
    },
  );

  const env = new Command("env").description("dotenv files and project secrets");
  withProject(
    env
      .command("pull")
      .description("write a dotenv skeleton with the names only (values never leave the server)")
      .option("--out <path>", "file to write", DOTENV_FILE)
      .option("--force", "overwrite an existing file"),
  ).action(async (_o, cmd: Command) => {
    const { opts: o, ctx, path } = projectCommand<{ out: string; force?: boolean }>(cmd, "secrets");
    if (existsSync(o.out) && !o.force) throw new CliError(`${o.out} exists; pass --force to overwrite it`);
    const list = await ctx.client.request("GET", path(), SecretList);
    warnManifestError(list);
    const names = [...new Set([...list.secrets.map((s) => s.name), ...Object.keys(list.env)])].sort();
    writeFileSync(o.out, names.map((n) => `${n}=\n`).join(""), { mode: 0o600 });
    if (o.json) return printJson({ out: o.out, names });
    info(`✓ wrote ${names.length} names to ${o.out}`);
  });
  withProject(
    env
      .command("push")
      .description(`upload every NAME=VALUE of a dotenv file as a secret (default: ${DOTENV_FILE} here)`)
      .option("--from <path>", `dotenv file (default: ${DOTENV_FILE} in the current directory)`),
  ).action(async (_o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand<{ from?: string }>(cmd, "secrets");
    const from = opts.from ?? DOTENV_FILE;
    if (!existsSync(from)) {
      if (opts.from) throw new CliError(`${from} not found`);
      throw usageError(`no ${DOTENV_FILE} in ${process.cwd()}: name the dotenv file with --from <path>`);
    }
    if (!opts.from) info(`reading ${DOTENV_FILE} (pass --from <path> for another file)`);
    const values = parseDotenv(readFileSync(from, "utf8"));
    if (Object.keys(values).length === 0) throw new CliError(`${from} has no NAME=VALUE lines`);
    // An empty line of a skeleton `env pull` wrote never wipes the secret it stands for.
    const stored = new Set((await ctx.client.request("GET", path(), SecretList)).secrets.map((s) => s.name));
    const kept = Object.keys(values).filter((name) => values[name] === "" && stored.has(name));
    for (const name of kept) delete values[name];
    if (kept.length > 0)
      warn(
        `kept ${kept.join(", ")}: empty in ${from} but set on the project ('svc secrets set NAME=' stores an empty value)`,
      );
    if (Object.keys(values).length === 0) {
      if (opts.json) return printJson({ names: [], kept, revision: null });
      return info(`nothing to push: every name in ${from} is empty and already set`);
    }
    const result = await ctx.client.request("PUT", path(), SetResult, { body: { secrets: values } });
    if (opts.json) return printJson(kept.length > 0 ? { ...result, kept } : result);
    info(`✓ pushed ${result.names.length} secrets from ${from} (revision ${result.revision})`);
  });
  return [secrets, env];
}
