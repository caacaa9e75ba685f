import { createHash, randomUUID } from "node:crypto";

/** The database the API processes share (the API's handle fits it): locks live on one reserved connection. */
type LockConnection = { query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]> };
export type ClusterDatabase = LockConnection & {
  readonly kind: "pglite" | "postgres";
  reserve(): Promise<LockConnection & { release(): Promise<void> }>;
};

/** Advisory lock keys (two int4s): the leader lock, and one lock per live API process. */
const LEADER_CLASS = 0x737663;
const INSTANCE_CLASS = 0x737664;

const instanceKey = (instanceId: string) =>
  createHash("sha256").update(instanceId).digest().readUInt32BE(0) & 0x7fffffff;

export type Cluster = {
  instanceId: string;
  /** Leads now, taking the lead if nobody holds it; only the leader reconciles and sweeps. */
  lead(): Promise<boolean>;
  /** Whether the API process with this instance id still runs (holds its instance lock). */
  isAlive(instanceId: string | null): Promise<boolean>;
  leave(): Promise<void>;
};

/**
 * The API processes sharing one database. Each holds an advisory lock on its instance id on a connection of its
 * own for as long as it lives, so the others can tell that it (and the sessions it provisions) are alive; a
 * process killed outright loses its connection and with it every lock at once. One process at a time also holds
 * the leader lock. PGlite belongs to one process, which therefore always leads and is the only one alive.
 */
export async function joinCluster(
  sql: ClusterDatabase,
  options: { instanceId?: string; log?: (msg: string, extra?: Record<string, unknown>) => void } = {},
): Promise<Cluster> {
  const instanceId = options.instanceId ?? randomUUID();
  if (sql.kind === "pglite") {
    return { instanceId, lead: async () => true, isAlive: async (id) => id === instanceId, leave: async () => {} };
  }
  let conn: Awaited<ReturnType<ClusterDatabase["reserve"]>> | undefined;
  let leading = false;
  const connect = async () => {
    if (conn) return conn;
    const fresh = await sql.reserve();
    await fresh.query("select pg_advisory_lock($1, $2)", [INSTANCE_CLASS, instanceKey(instanceId)]);
    conn = fresh;
    leading = false;
    return fresh;
  };
  await connect();
  return {
    instanceId,
    async lead() {
      try {
        const c = await connect();
        if (leading) {
          // Still ours? A dropped connection takes the lock with it.
          await c.query("select 1");
          return true;
        }
        const [row] = await c.query<{ ok: boolean }>("select pg_try_advisory_lock($1, 0) as ok", [LEADER_CLASS]);
        leading = row!.ok;
        if (leading) options.log?.("this API process now leads the orchestrator", { instance: instanceId });
        return leading;
      } catch (err) {
        options.log?.("lost the database connection that holds the cluster locks", { error: (err as Error).message });
        await conn?.release().catch(() => {});
        conn = undefined;
        leading = false;
        return false;
      }
    },
    async isAlive(id) {
      if (!id) return false;
      if (id === instanceId) return true;
      const [row] = await sql.query<{ alive: boolean }>(
        `select exists (select 1 from pg_locks where locktype = 'advisory' and granted
           and classid::bigint = $1 and objid::bigint = $2 and objsubid = 2) as alive`,
        [INSTANCE_CLASS, instanceKey(id)],
      );
      return row!.alive;
    },
    async leave() {
      await conn?.query("select pg_advisory_unlock_all()").catch(() => {});
      await conn?.release().catch(() => {});
      conn = undefined;
      leading = false;
    },
  };
}

/**
 * The one place background work asks "do I lead?": each call of the returned check asks `lead()` (a failure counts
 * as not leading) and runs the step for what changed since the previous call: `start` on gaining the lead (`tick`
 * without one), `tick` while holding it, `stop` on losing it. A step that fails is logged as `<name> failed`; the
 * next check carries on. One follower per run of the work: a fresh one starts from not leading.
 */
export function whileLeading(work: {
  lead: () => Promise<boolean>;
  name: string;
  log: (msg: string, extra?: Record<string, unknown>) => void;
  start?: () => Promise<void>;
  tick: () => Promise<unknown>;
  stop?: () => void;
}): () => Promise<void> {
  let leading = false;
  return async () => {
    const leads = await work.lead().catch(() => false);
    const was = leading;
    leading = leads;
    try {
      if (leads) await (was ? work.tick() : (work.start ?? work.tick)());
      else if (was) work.stop?.();
    } catch (err) {
      work.log(`${work.name} failed`, { error: (err as Error).message });
    }
  };
}
