import { Command } from "commander";
import { type CliConfig, HostName, readConfig, updateConfig } from "../config-file.ts";
import { CliError, usageError } from "../errors.ts";
import { BUILTIN_HOSTS, listHosts, normalizeHostUrl } from "../hosts.ts";
import { info, printJson, printLine } from "../output.ts";
import { confirm, notInteractive, pick } from "../picker.ts";
import { interactive } from "../prompt.ts";
import { printTable } from "../table.ts";
import { loginTo } from "./auth.ts";

function checkName(name: string): string {
  const parsed = HostName.safeParse(name);
  if (!parsed.success) throw usageError(`host name '${name}': ${parsed.error.issues[0]?.message}`);
  return name;
}

function checkUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!["http:", "https:"].includes(parsed.protocol)) throw new Error();
  } catch {
    throw usageError(`'${url}' is not an http(s) URL`);
  }
  return normalizeHostUrl(url);
}

/** The only host the config stores (added, or logged in to): removing it leaves the built-in hosts alone. */
function isLastHost(config: CliConfig, name: string): boolean {
  const stored = Object.keys(config.hosts);
  return stored.length === 1 && stored[0] === name;
}

/** `svc hosts use` without a name: a person at a terminal picks from the list, the active host as the default. */
async function pickHost(): Promise<string> {
  if (!interactive()) throw notInteractive("argument <name>", "svc hosts use <name>; 'svc hosts ls' lists them");
  const list = listHosts(readConfig());
  const choices = list.map((h) => ({
    key: h.name,
    detail: `${h.url}${h.logged_in ? "  (logged in)" : ""}`,
    value: h.name,
  }));
  const active = list.findIndex((h) => h.active);
  return pick("Which host?", choices, active >= 0 ? active : undefined);
}

export function hostsCommand(): Command {
  const hosts = new Command("hosts").description("API endpoints the CLI talks to; one is active");

  hosts
    .command("ls")
    .description("list hosts, marking the active one")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => {
      const list = listHosts(readConfig());
      if (opts.json) return printJson(list);
      printTable(
        list.map((h) => [h.active ? "*" : " ", h.name, h.url, h.logged_in ? "logged in" : ""]),
        { header: ["", "NAME", "URL", "STATUS"] },
      );
    });

  hosts
    .command("current")
    .description("print the active host's name")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => {
      const config = readConfig();
      if (opts.json) return printJson(listHosts(config).find((h) => h.active) ?? { name: config.active_host });
      printLine(config.active_host);
    });

  hosts
    .command("info")
    .description("one host")
    .argument("[name]")
    .option("--json", "output JSON")
    .action((name: string | undefined, opts: { json?: boolean }) => {
      const config = readConfig();
      const host = listHosts(config).find((h) => h.name === (name ?? config.active_host));
      if (!host) throw new CliError(`unknown host '${name}'`);
      if (opts.json) return printJson(host);
      printLine(`${host.name}\nurl:       ${host.url}\nactive:    ${host.active}\nlogged in: ${host.logged_in}`);
    });

  hosts
    .command("use")
    .description("switch the active host (no name: pick one from a list, at a terminal)")
    .argument("[name]")
    .option("--json", "output JSON")
    .action(async (given: string | undefined, opts: { json?: boolean }) => {
      const name = given ?? (await pickHost());
      updateConfig((c) => {
        if (!listHosts(c).some((h) => h.name === name))
          throw new CliError(`unknown host '${name}'; see 'svc hosts ls'`);
        c.active_host = name;
      });
      if (opts.json) return printJson(listHosts(readConfig()).find((h) => h.name === name));
      info(`✓ active host: ${name}`);
    });

  hosts
    .command("add")
    .description("register a host")
    .argument("<name>")
    .requiredOption("--url <url>", "the host's API URL")
    .option("--login", "log in right away")
    .option("--json", "output JSON")
    .action(async (name: string, opts: { url: string; login?: boolean; json?: boolean }) => {
      const url = checkUrl(opts.url);
      updateConfig((c) => {
        c.hosts[checkName(name)] = { ...c.hosts[name], url };
      });
      if (!opts.json) info(`✓ added host ${name} (${url})`);
      if (opts.login) await loginTo(name, url, undefined, { quiet: opts.json });
      if (opts.json) printJson(listHosts(readConfig()).find((h) => h.name === name));
    });

  hosts
    .command("rm")
    .description("remove a host (the last one you added: asks first, or needs --yes off a terminal)")
    .argument("<name>")
    .option("--yes", "do not ask for confirmation")
    .option("--json", "output JSON")
    .action(async (name: string, opts: { yes?: boolean; json?: boolean }) => {
      if (isLastHost(readConfig(), name) && !opts.yes) {
        const why = `'${name}' is the last host you added or logged in to`;
        if (!interactive()) throw notInteractive("--yes", `svc hosts rm ${name} --yes`, why);
        if (!(await confirm(`${why}. Remove it and its stored token?`))) throw new CliError(`kept host '${name}'`);
      }
      updateConfig((c) => {
        if (!c.hosts[name] && !(name in BUILTIN_HOSTS)) throw new CliError(`unknown host '${name}'`);
        delete c.hosts[name];
        if (c.active_host === name) c.active_host = Object.keys(c.hosts)[0] ?? "selfhost";
      });
      if (opts.json) return printJson({ removed: name, active_host: readConfig().active_host });
      info(`✓ removed host ${name}`);
    });

  return hosts;
}
