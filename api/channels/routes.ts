import type { FastifyInstance } from "fastify";
import { ChannelParams, ConnectChannelBody, SlackEnvelope } from "../../protocol/channel.ts";
import { actingUserId } from "../auth/authenticate.ts";
import { apiError } from "../errors.ts";
import { parseInput } from "../http/validate.ts";
import type { ChannelBridge } from "./bridge.ts";
import type { SlackSettings } from "./slack-client.ts";
import { slackSignatureValid } from "./slack-signature.ts";
import type { ChannelStore } from "./store.ts";

export type ChannelRouteDeps = {
  channelStore: ChannelStore;
  channels: ChannelBridge;
  slack: SlackSettings;
};

const BASE = "/v1/projects/:projectId/channels";

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/**
 * Slack's Events API: no bearer token (Slack cannot send one), only its signature over the raw body, so this scope
 * keeps JSON bodies as bytes. Every accepted event is answered at once (Slack wants 200 within 3 s and retries
 * otherwise) and handled after; an event id seen before is answered and dropped.
 */
function slackEventRoutes(deps: ChannelRouteDeps) {
  return async (app: FastifyInstance) => {
    app.removeContentTypeParser("application/json");
    app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

    app.post("/v1/channels/slack/events", { config: { auth: "public" } }, async (req, reply) => {
      const { signingSecret } = deps.slack;
      if (!signingSecret) {
        throw apiError("NOT_CONFIGURED", "Slack is not configured on this server (SVC_SLACK_SIGNING_SECRET)");
      }
      const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const signed = slackSignatureValid({
        signingSecret,
        timestamp: header(req.headers["x-slack-request-timestamp"]),
        signature: header(req.headers["x-slack-signature"]),
        rawBody,
      });
      if (!signed) throw apiError("SIGNATURE_INVALID", "missing, invalid or expired Slack request signature");
      let json: unknown;
      try {
        json = JSON.parse(rawBody.toString("utf8"));
      } catch {
        throw apiError("VALIDATION_FAILED", "request body is not JSON");
      }
      const envelope = SlackEnvelope.safeParse(json);
      // Event types svc does not use are acknowledged, so Slack does not retry them.
      if (!envelope.success) return { ok: true };
      if (envelope.data.type === "url_verification") return { challenge: envelope.data.challenge };
      if (await deps.channelStore.claimEvent("slack", envelope.data.event_id)) {
        const event = envelope.data;
        reply.raw.once("finish", () => deps.channels.handleSlackEvent(event));
      }
      return { ok: true };
    });
  };
}

/** `svc channels`: the project's connected channels. */
export function channelRoutes(deps: ChannelRouteDeps) {
  return async (app: FastifyInstance) => {
    await app.register(slackEventRoutes(deps));

    app.get(BASE, async (req) => ({ channels: await deps.channelStore.list(req.project!.id) }));

    app.post(BASE, async (req, reply) => {
      const body = parseInput(ConnectChannelBody, req.body, "body");
      const channel = await deps.channelStore.connect({
        projectId: req.project!.id,
        provider: body.provider,
        teamId: body.team_id ?? null,
        channelId: body.channel_id,
        userId: actingUserId(req.principal!),
      });
      if (!channel) {
        throw apiError("CHANNEL_TAKEN", `channel ${body.channel_id} is already connected to a project`, {
          field: "channel_id",
        });
      }
      return reply.code(201).send(channel);
    });

    app.delete(`${BASE}/:channelRef`, async (req) => {
      const { channelRef } = parseInput(ChannelParams, req.params, "params");
      const channel = await deps.channelStore.find(req.project!.id, channelRef);
      if (!channel) throw apiError("CHANNEL_NOT_FOUND", `channel ${channelRef} is not connected to this project`);
      await deps.channelStore.remove(channel.id);
      return channel;
    });
  };
}
