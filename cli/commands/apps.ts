import { Command } from "commander";
import { type App, AppDeploy, AppDeployList, AppDetail, AppLink, AppList } from "../../protocol/app.ts";
import { openBrowser } from "../browser.ts";
import type { Context } from "../context.ts";
import { CliError } from "../errors.ts";
import { parsePositiveInt } from "../flag-parsers.ts";
import { printLogLines } from "../log-lines.ts";
import { info, printJson, printLine, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { printTable } from "../table.ts";

const WAIT_POLL_MS = 500;
const short = (sha: string | null) => (sha ? sha.slice(0, 7) : "-");

function printDeploys(deploys: AppDeploy[]): void {
  printTable(
    deploys.map((d) => [
      d.id,
      d.status,
      short(d.revision),
      d.trigger,
      d.started_at,
      d.finished_at ?? "-",
      d.error?.split("\n")[0] ?? "-",
    ]),
    { header: ["DEPLOY", "STATUS", "REVISION", "TRIGGER", "STARTED", "FINISHED", "ERROR"] },
  );
}

function printApp(a: AppDetail): void {
  printLine(
    [
      `app ${a.name}`,
      `status:   ${a.status}`,
      `url:      ${a.url ?? "(no preview domain on this server)"}`,
      `revision: ${a.live_revision ?? "-"}`,
      ...(a.spec
        ? [
            `build:    ${a.spec.build} (context ${a.spec.context})`,
            `command:  ${a.spec.command ?? "(the image's own)"}`,
            `port:     ${a.spec.port}`,
            `health:   ${a.spec.health_path}`,
            `env:      ${a.spec.env.join(", ") || "-"}`,
          ]
        : ["(no longer in svc.toml)"]),
      "",
    ].join("\n"),
  );
  if (a.deploys.length > 0) printDeploys(a.deploys);
  // The table shows each error's first line; the newest failure's whole reason (a build's log, the app's last
  // output) is what the person needs to fix it.
  const failed = a.deploys[0]?.status === "failed" ? a.deploys[0] : undefined;
  if (failed?.error) printLine(`\ndeploy ${failed.id} failed:\n${failed.error}`);
}

/** Polls the app's history until `deploy` finishes; a failed deploy is the command's failure. */
async function waitFor(ctx: Context, path: (s?: string) => string, name: string, deploy: AppDeploy) {
  const app = `/${encodeURIComponent(name)}`;
  for (;;) {
    const { deploys } = await ctx.client.request("GET", path(`${app}/deploys`), AppDeployList);
    const d = deploys.find((x) => x.id === deploy.id) ?? deploy;
    if (d.status !== "building" && d.status !== "starting") {
      if (d.status === "failed") throw new CliError(`deploy ${d.id} of ${name} failed: ${d.error ?? "unknown error"}`);
      return d;
    }
    await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
  }
}

/** `svc apps`: the manifest's `[[apps]]` on the default branch, their deploys, logs, redeploys and rollbacks. */
export function appsCommand(): Command {
  const apps = new Command("apps").description("long-running apps from [[apps]] in svc.toml");
  const withProject = (c: Command) => c.addOption(projectOption()).option("--json", "output JSON");
  const appPath = (name: string, suffix = "") => `/${encodeURIComponent(name)}${suffix}`;

  withProject(apps.command("ls", { isDefault: true }).description("apps with their status and URL")).action(
    async (_o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "apps");
      const list = await ctx.client.request("GET", path(), AppList);
      if (list.manifest_error) {
        const e = list.manifest_error;
        warn(`svc.toml on the default branch is invalid${e.line ? ` (line ${e.line})` : ""}: ${e.message}`);
      }
      if (opts.json) return printJson(list.apps);
      if (list.apps.length === 0) return info("no apps: add [[apps]] to svc.toml and merge it");
      printTable(
        list.apps.map((a: App) => [a.name, a.status, short(a.live_revision), a.url ?? "-"]),
        { header: ["APP", "STATUS", "REVISION", "URL"] },
      );
    },
  );

  withProject(apps.command("info").description("one app and its deploy history").argument("<name>")).action(
    async (name: string, _o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "apps");
      const a = await ctx.client.request("GET", path(appPath(name)), AppDetail);
      if (opts.json) return printJson(a);
      printApp(a);
    },
  );

  withProject(
    apps
      .command("logs")
      .description("the live deploy's output")
      .argument("<name>")
      .option("-f, --follow", "keep printing new lines until the app stops or Ctrl-C")
      .option("-n, --tail <n>", "only the last n lines so far", parsePositiveInt),
  ).action(async (name: string, _o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand<{ follow?: boolean; tail?: number }>(cmd, "apps");
    await printLogLines(ctx, path(appPath(name, "/logs")), opts);
  });

  withProject(
    apps
      .command("open")
      .description("print a link that opens the app in a browser (and open it, at a terminal)")
      .argument("<name>"),
  ).action(async (name: string, _o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand(cmd, "apps");
    const link = await ctx.client.request("POST", path(appPath(name, "/link")), AppLink, { body: {} });
    if (opts.json) return printJson(link);
    printLine(link.url);
    if (process.stdout.isTTY && openBrowser(link.url))
      info(`opened it in your browser; the link works until ${link.expires_at}`);
  });

  for (const [verb, what] of [
    ["redeploy", "deploy the default branch's tip again now"],
    ["rollback", "deploy the revision that was live before the current one"],
  ] as const) {
    withProject(
      apps
        .command(verb)
        .description(`${what} (prints the deploy id)`)
        .argument("<name>")
        .option("--wait", "wait for the deploy to finish; exit 1 if it failed"),
    ).action(async (name: string, _o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand<{ wait?: boolean }>(cmd, "apps");
      let d = await ctx.client.request("POST", path(appPath(name, `/${verb}`)), AppDeploy, { body: {} });
      info(`${verb} of ${name} started: deploy ${d.id} of ${short(d.revision)}`);
      if (opts.wait) {
        d = await waitFor(ctx, path, name, d);
        info(`${name} is live at ${short(d.revision)}`);
      }
      if (opts.json) return printJson(d);
      printLine(d.id);
    });
  }
  return apps;
}
