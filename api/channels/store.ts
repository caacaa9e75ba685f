import type { Channel, ChannelProvider } from "../../protocol/channel.ts";
import { iso, isUniqueViolation } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";

type ChannelRow = Omit<Channel, "created_at"> & { created_at: Date | string };

const COLUMNS = "id, project_id, provider, team_id, channel_id, connected_by, created_at";
const toChannel = (row: ChannelRow): Channel => ({ ...row, created_at: iso(row.created_at) });

/** channels, channel_events and channel_threads (migration 0014). */
/** Seen event ids older than an hour are deleted at most this often (per process). */
const EVENT_PRUNE_EVERY_MS = 10 * 60_000;
/** Advisory lock class of connects (orchestrator/cluster.ts holds 0x737663 and 0x737664). */
const CONNECT_LOCK_CLASS = 0x737665;

export function createChannelStore(sql: Sql) {
  let lastPrune = 0;
  return {
    async list(projectId: string): Promise<Channel[]> {
      const rows = await sql.query<ChannelRow>(
        `select ${COLUMNS} from channels where project_id = $1 order by created_at, channel_id`,
        [projectId],
      );
      return rows.map(toChannel);
    },

    /**
     * Connects a channel unless it is connected anywhere already (a connection without a workspace matches every
     * workspace): undefined then.
     */
    async connect(input: {
      projectId: string;
      provider: ChannelProvider;
      teamId: string | null;
      channelId: string;
      userId: string;
    }): Promise<Channel | undefined> {
      try {
        return await sql.transaction(async (tx) => {
          // One connect of a channel id at a time: one naming a workspace and one naming none would pass each
          // other's `not exists` when run at once, and no unique index can tell that they collide.
          await tx.query("select pg_advisory_xact_lock($1, hashtext($2))", [
            CONNECT_LOCK_CLASS,
            `${input.provider}:${input.channelId}`,
          ]);
          const [row] = await tx.query<ChannelRow>(
            `insert into channels (project_id, provider, team_id, channel_id, connected_by)
             select $1, $2, $3, $4, $5
             where not exists (select 1 from channels where provider = $2 and channel_id = $4
               and (team_id is null or $3::text is null or team_id = $3))
             returning ${COLUMNS}`,
            [input.projectId, input.provider, input.teamId, input.channelId, input.userId],
          );
          return row && toChannel(row);
        });
      } catch (err) {
        if (isUniqueViolation(err)) return undefined;
        throw err;
      }
    },

    /** The project's connection by its uuid or by the provider's channel id. */
    async find(projectId: string, ref: string): Promise<Channel | undefined> {
      const [row] = await sql.query<ChannelRow>(
        `select ${COLUMNS} from channels where project_id = $1 and (id::text = $2 or channel_id = $2)`,
        [projectId, ref],
      );
      return row && toChannel(row);
    },

    async remove(id: string): Promise<void> {
      await sql.query("delete from channels where id = $1", [id]);
    },

    /** The connection an event of this workspace and channel belongs to. */
    async byProviderChannel(
      provider: ChannelProvider,
      teamId: string,
      channelId: string,
    ): Promise<Channel | undefined> {
      const [row] = await sql.query<ChannelRow>(
        `select ${COLUMNS} from channels where provider = $1 and channel_id = $3 and (team_id is null or team_id = $2)`,
        [provider, teamId, channelId],
      );
      return row && toChannel(row);
    },

    /** Records an event id: true for the one caller that saw it first. */
    async claimEvent(provider: ChannelProvider, eventId: string): Promise<boolean> {
      // A signature older than five minutes is refused before this, so an id needs keeping only that long.
      if (Date.now() - lastPrune > EVENT_PRUNE_EVERY_MS) {
        lastPrune = Date.now();
        await sql.query("delete from channel_events where received_at < now() - interval '1 hour'");
      }
      const rows = await sql.query(
        "insert into channel_events (provider, event_id) values ($1, $2) on conflict do nothing returning event_id",
        [provider, eventId],
      );
      return rows.length > 0;
    },

    async threadSession(channelUuid: string, threadTs: string): Promise<string | undefined> {
      const [row] = await sql.query<{ session_id: string }>(
        "select session_id from channel_threads where channel_uuid = $1 and thread_ts = $2",
        [channelUuid, threadTs],
      );
      return row?.session_id;
    },

    async recordThread(channelUuid: string, threadTs: string, sessionId: string): Promise<void> {
      await sql.query(
        "insert into channel_threads (channel_uuid, thread_ts, session_id) values ($1, $2, $3) on conflict do nothing",
        [channelUuid, threadTs, sessionId],
      );
    },

    /** The threads a session talks in, with where to post in each. */
    async threadsOf(
      sessionId: string,
    ): Promise<{ provider: ChannelProvider; channel_id: string; thread_ts: string }[]> {
      return sql.query(
        `select c.provider, c.channel_id, t.thread_ts from channel_threads t join channels c on c.id = t.channel_uuid
         where t.session_id = $1`,
        [sessionId],
      );
    },
  };
}

export type ChannelStore = ReturnType<typeof createChannelStore>;
