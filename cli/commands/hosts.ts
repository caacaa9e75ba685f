import { Command } from "commander";
import { HostName, readConfig, updateConfig } from "../config-file.ts";
import { CliError, usageError } from "../errors.ts";
import { BUILTIN_HOSTS, listHosts, normalizeHostUrl } from "../hosts.ts";
import { info, printJson, printLine } from "../output.ts";
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

export function hostsCommand(): Command {
  const hosts = new Command("hosts").description("API endpoints the CLI talks to; one is active");

  hosts
    .command("ls")
    .description("list hosts, marking the active one")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => {
      const list = listHosts(readConfig());
      if (opts.json) return printJson(list);
      printTable(list.map((h) => [h.active ? "*" : " ", h.name, h.url, h.logged_in ? "logged in" : ""]));
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
    .description("switch the active host")
    .argument("[name]")
    .option("--json", "output JSON")
    .action((name: string | undefined, opts: { json?: boolean }) => {
      if (!name) throw usageError("give the host name (interactive picking needs a terminal): svc hosts use <name>");
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
    .description("remove a host")
    .argument("<name>")
    .option("--yes", "do not ask for confirmation")
    .option("--json", "output JSON")
    .action((name: string, opts: { yes?: boolean; json?: boolean }) => {
      updateConfig((c) => {
        if (!c.hosts[name] && !(name in BUILTIN_HOSTS)) throw new CliError(`unknown host '${name}'`);
        const last = Object.keys(c.hosts).length === 1 && name in c.hosts;
        if (last && !opts.yes) throw usageError(`'${name}' is the last stored host; confirm with --yes`);
        delete c.hosts[name];
        if (c.active_host === name) c.active_host = Object.keys(c.hosts)[0] ?? "selfhost";
      });
      if (opts.json) return printJson({ removed: name, active_host: readConfig().active_host });
      info(`✓ removed host ${name}`);
    });

  return hosts;
}
