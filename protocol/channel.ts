import { z } from "zod";

export const ChannelProvider = z.enum(["slack"]);
export type ChannelProvider = z.infer<typeof ChannelProvider>;

/** A Slack channel id (`C…` public, `G…` private); the same rule on the CLI and the API. */
export const SlackChannelId = z.string().regex(/^[CG][A-Z0-9]{2,30}$/, "must be a Slack channel id such as C0123ABCD");
/** A Slack workspace id (`T…`). */
export const SlackTeamId = z.string().regex(/^T[A-Z0-9]{2,30}$/, "must be a Slack workspace id such as T0123ABCD");

/** A chat channel connected to a project: its mentions start sessions there (GET /v1/projects/{id}/channels). */
export const Channel = z.object({
  id: z.uuid(),
  project_id: z.uuid(),
  provider: ChannelProvider,
  /** null: the channel of that id in whichever workspace the bot token serves. */
  team_id: z.string().nullable(),
  channel_id: z.string(),
  connected_by: z.uuid(),
  created_at: z.string(),
});
export type Channel = z.infer<typeof Channel>;

export const ChannelList = z.object({ channels: z.array(Channel) });
export type ChannelList = z.infer<typeof ChannelList>;

/** POST /v1/projects/{id}/channels. */
export const ConnectChannelBody = z
  .object({
    provider: ChannelProvider.default("slack"),
    team_id: SlackTeamId.optional(),
    channel_id: SlackChannelId,
  })
  .strict();
export type ConnectChannelBody = z.infer<typeof ConnectChannelBody>;

/** DELETE /v1/projects/{id}/channels/{ref}: the connection's uuid or the Slack channel id. */
export const ChannelParams = z.object({ projectId: z.string(), channelRef: z.string().min(1).max(100) });

/** The fields of a Slack message or app_mention event that svc reads; the rest is ignored. */
export const SlackMessageEvent = z.looseObject({
  type: z.string(),
  channel: z.string().optional(),
  user: z.string().optional(),
  text: z.string().optional(),
  ts: z.string().optional(),
  thread_ts: z.string().optional(),
  bot_id: z.string().optional(),
  subtype: z.string().optional(),
});
export type SlackMessageEvent = z.infer<typeof SlackMessageEvent>;

/** The Events API envelopes svc accepts (https://api.slack.com/apis/events-api); other types are acknowledged. */
export const SlackEnvelope = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("url_verification"), challenge: z.string().max(1000) }),
  z.looseObject({
    type: z.literal("event_callback"),
    team_id: z.string(),
    event_id: z.string().min(1).max(200),
    event: SlackMessageEvent,
    /** Who the app is in this workspace: its own mention in a `message` event is the `app_mention`'s to handle. */
    authorizations: z.array(z.looseObject({ user_id: z.string().optional() })).optional(),
    authed_users: z.array(z.string()).optional(),
  }),
]);
export type SlackEnvelope = z.infer<typeof SlackEnvelope>;
