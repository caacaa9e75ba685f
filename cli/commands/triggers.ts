import { Command } from "commander";
import { Session } from "../../protocol/session.ts";
import { Trigger, TriggerList, TriggerToggleResult } from "../../protocol/trigger.ts";
import { info, printJson, printLine, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { printTable } from "../table.ts";

function printTrigger(t: Trigger): void {
  printLine(
    [
      `trigger ${t.slug}`,
      `enabled:  ${t.enabled}`,
      `schedule: ${t.schedule}${t.timezone ? ` (${t.timezone})` : ""}`,
      `base:     ${t.base_ref ?? "(default branch)"}`,
      `agent:    ${t.agent ?? "(default)"}`,
      `fired:    ${t.last_fired_at ?? "never"}${t.last_session_id ? ` (session ${t.last_session_id})` : ""}`,
      `refused:  ${t.last_refused_at ? `${t.last_refused_at}: ${t.last_refusal}` : "never"}`,
      "",
      t.prompt,
    ].join("\n"),
  );
}

/** `svc triggers`: the manifest's `[[triggers]]` on the default branch, with their runtime state. */
export function triggersCommand(): Command {
  const triggers = new Command("triggers").description("scheduled sessions from [[triggers]] in svc.toml");
  const withProject = (c: Command) => c.addOption(projectOption()).option("--json", "output JSON");
  const slugPath = (slug: string, suffix = "") => `/${encodeURIComponent(slug)}${suffix}`;

  withProject(triggers.command("ls").description("triggers with their last firing")).action(
    async (_o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "triggers");
      const list = await ctx.client.request("GET", path(), TriggerList);
      if (list.manifest_error) {
        const e = list.manifest_error;
        warn(
          `svc.toml on the default branch is invalid${e.line ? ` (line ${e.line})` : ""}: ${e.message}; the last good one is listed`,
        );
      }
      if (opts.json) return printJson(list.triggers);
      if (list.triggers.length === 0) return info("no triggers: add [[triggers]] to svc.toml and merge it");
      printTable(
        list.triggers.map((t) => [
          t.slug,
          t.enabled ? "yes" : "no",
          t.schedule,
          t.last_fired_at ?? "-",
          t.last_error ?? "-",
        ]),
        { header: ["SLUG", "ENABLED", "SCHEDULE", "LAST FIRED", "LAST ERROR"] },
      );
    },
  );

  withProject(triggers.command("info").description("one trigger in full").argument("<slug>")).action(
    async (slug: string, _o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "triggers");
      const t = await ctx.client.request("GET", path(slugPath(slug)), Trigger);
      if (opts.json) return printJson(t);
      printTrigger(t);
    },
  );

  withProject(
    triggers.command("fire").description("fire now: spawns a session (prints its id)").argument("<slug>"),
  ).action(async (slug: string, _o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand(cmd, "triggers");
    const s = await ctx.client.request("POST", path(slugPath(slug, "/fire")), Session, { body: {} });
    if (opts.json) return printJson(s);
    printLine(s.session_id);
    info(`trigger ${slug} started session ${s.session_id}`);
  });

  for (const [verb, enabled] of [
    ["enable", true],
    ["disable", false],
  ] as const) {
    withProject(
      triggers
        .command(verb)
        .description(`set enabled = ${enabled} through a change request (prints its number)`)
        .argument("<slug>"),
    ).action(async (slug: string, _o, cmd: Command) => {
      const { opts, ctx, path } = projectCommand(cmd, "triggers");
      const { change_request: cr } = await ctx.client.request(
        "POST",
        path(slugPath(slug, `/${verb}`)),
        TriggerToggleResult,
        {
          body: {},
        },
      );
      if (opts.json) return printJson({ change_request: cr });
      printLine(String(cr.number));
      info(
        `opened CR #${cr.number} on ${cr.head_ref}: the schedule changes when it merges ('svc cr merge ${cr.number}')`,
      );
    });
  }
  return triggers;
}
