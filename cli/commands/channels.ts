import { Command } from "commander";
import { Channel, ChannelList, SlackChannelId, SlackTeamId } from "../../protocol/channel.ts";
import { usageError } from "../errors.ts";
import { info, printJson, printLine } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { printTable } from "../table.ts";

/** A flag or argument checked with the protocol's own rule: a bad one is a usage error (exit 2). */
function checked(value: string, what: string, rule: typeof SlackChannelId): string {
  const result = rule.safeParse(value);
  if (!result.success) throw usageError(`${what} ${result.error.issues[0]?.message ?? "is invalid"}`);
  return result.data;
}

async function list(cmd: Command): Promise<void> {
  const { opts, ctx, path } = projectCommand(cmd, "channels");
  const { channels } = await ctx.client.request("GET", path(), ChannelList);
  if (opts.json) return printJson(channels);
  if (channels.length === 0) return info("no channels connected: svc channels connect <slack-channel-id>");
  printTable(
    channels.map((c) => [c.channel_id, c.provider, c.team_id ?? "-", c.id, c.created_at]),
    { header: ["CHANNEL", "PROVIDER", "WORKSPACE", "ID", "CONNECTED"] },
  );
}

/**
 * `svc channels`: Slack channels connected to the project. A mention of the app in one starts a session; replies in
 * its thread go to the same session, and the agent's answer and CRs come back to the thread.
 */
export function channelsCommand(): Command {
  const withProject = (c: Command) => c.addOption(projectOption()).option("--json", "output JSON");
  const channels = withProject(
    new Command("channels").description("chat channels whose mentions start sessions (lists them)"),
  ).action((_o, cmd: Command) => list(cmd));

  withProject(channels.command("ls").description("the project's connected channels")).action((_o, cmd: Command) =>
    list(cmd),
  );

  withProject(
    channels
      .command("connect")
      .description("connect a Slack channel: mentions of the app there start sessions (prints the connection id)")
      .argument("<slack-channel-id>", "the channel's id, e.g. C0123ABCD (channel details in Slack)")
      .option("--team <id>", "the Slack workspace id (T…); default: the workspace of the server's bot token"),
  ).action(async (channelId: string, _o, cmd: Command) => {
    const { team } = cmd.opts<{ team?: string }>();
    const body = {
      provider: "slack",
      channel_id: checked(channelId, "channel id", SlackChannelId),
      ...(team !== undefined ? { team_id: checked(team, "--team", SlackTeamId) } : {}),
    };
    const { opts, ctx, path } = projectCommand(cmd, "channels");
    const channel = await ctx.client.request("POST", path(), Channel, { body });
    if (opts.json) return printJson(channel);
    printLine(channel.id);
    info(`✓ connected Slack channel ${channel.channel_id}: mention the app there to start a session`);
  });

  withProject(
    channels
      .command("disconnect")
      .description("disconnect a channel (its threads stop reaching their sessions)")
      .argument("<id-or-channel-id>", "the connection id or the Slack channel id"),
  ).action(async (ref: string, _o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand(cmd, "channels");
    const channel = await ctx.client.request("DELETE", path(`/${encodeURIComponent(ref)}`), Channel);
    if (opts.json) return printJson(channel);
    info(`✓ disconnected Slack channel ${channel.channel_id}`);
  });
  return channels;
}
