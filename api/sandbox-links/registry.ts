import { type ClientHttp2Session, connect } from "node:http2";
import type { Socket } from "node:net";
import type { WebSocket } from "ws";
import type { SandboxLinkPort } from "../../orchestrator/ports.ts";
import { hashSecret } from "../../protocol/credential.ts";
import { LINK_H2, linkStream } from "../../protocol/link-transport.ts";
import { apiError } from "../errors.ts";
import { type Bridge, openBridge } from "./bridge.ts";
import { createSpares, type Spares } from "./spares.ts";

/** How often the API pings each link; one ping unanswered by the next is a dead link (TCP may never say so). */
const PING_MS = 15_000;
/** How often a wait for a link asks the sandbox's row whether the link came up in another API replica. */
const ROW_POLL_MS = 250;
/** A link down this long belongs to a sandbox that is gone (a live daemon dials again within 10 s). */
const GONE_MS = 10 * 60_000;
const SWEEP_MS = 60_000;
/**
 * A preview connection that finds no spare idle waits this long for the one its daemon is dialing, rather than
 * going over a stream of the link for its whole life (a third slower): a dial on the sandbox's network takes
 * milliseconds, even on a busy host.
 */
const SPARE_WAIT_MS = 100;

export type SandboxLinksDeps = {
  /** The live sandbox (provisioning or active row) whose service key has this hash. */
  sandboxByKey(serviceKeyHash: string): Promise<string | undefined>;
  /**
   * The URL a live row of the sandbox holds: its link's endpoint in whichever API replica the link reached (that
   * replica's `onLinked` wrote it). Asked only while a wait for the link runs.
   */
  linkedUrl?(sandboxId: string): Promise<string | undefined>;
  /**
   * The address bridges listen on (SVC_LINK_BRIDGE_HOST, resolved): loopback for an API alone, else this replica's
   * address on the stack's network, which then also names it in its sandboxes' link URLs.
   */
  bridgeHost?: string;
  /** Told each time a sandbox's link comes up, with its endpoint: a sandbox adopted after a restart moves there. */
  onLinked?(sandboxId: string, url: string): void;
  /** A sandbox's link went down (not replaced by a newer one): its sandbox may have died. */
  onUnlinked?(sandboxId: string): void;
  log: (msg: string, extra?: Record<string, unknown>) => void;
  pingMs?: number;
  rowPollMs?: number;
};

type Waiter = (url: string | undefined) => void;
type Entry = {
  bridge: Bridge;
  /** Set once the daemon's HTTP/2 settings arrived: the link answers. */
  link: { ws: WebSocket; session: ClientHttp2Session } | undefined;
  /** The daemon's idle spare connections: each the bridge's, or a preview tunnel's, in place of a stream. */
  spares: Spares;
  /** Links opened whose HTTP/2 session is not yet up: their daemon may dial spares already. */
  attaching: number;
  waiters: Set<Waiter>;
  downSince: number;
};

const ignore = () => {};
/** An entry whose link is up, or coming up, takes its daemon's spares (which the daemon dials as the link opens). */
const takesSpares = (entry: Entry) => entry.link !== undefined || entry.attaching > 0;

/**
 * The sandboxes linked to this API process: each daemon's link (a WebSocket carrying an HTTP/2 session whose
 * client is this process) and the bridge (bridge.ts) that is the sandbox's endpoint here. A daemon is
 * known by its service key: one a sandbox's row holds, or one registered ahead (`expect`) by whoever creates the
 * sandbox, for a warm-pool member has no row yet. A newer link of a sandbox replaces the older one.
 *
 * With several API replicas a link may reach another replica than the one waiting for it (no hint, or a hint the
 * edge could not follow): that one serves it when a live row holds the key and records its bridge's URL in the row,
 * which the waiting replica reads (`waitFor`) and reaches the sandbox through.
 */
export function createSandboxLinks(deps: SandboxLinksDeps) {
  const pingMs = deps.pingMs ?? PING_MS;
  const rowPollMs = deps.rowPollMs ?? ROW_POLL_MS;
  const bridgeHost = deps.bridgeHost ?? "127.0.0.1";
  const expected = new Map<string, string>();
  const entries = new Map<string, Entry>();
  const opening = new Map<string, Promise<Entry>>();
  /** Entries by their bridge's URL: what a sandbox's row, and so a preview's route, names it by. */
  const byUrl = new Map<string, Entry>();
  /** The sandbox each admitted service key (by its hash) belongs to: a spare is told apart without the database. */
  const admitted = new Map<string, string>();

  /** The sandbox's entry, its bridge listening; one bridge per sandbox however many ask at once. */
  function ensure(sandboxId: string): Promise<Entry> {
    const known = entries.get(sandboxId);
    if (known) return Promise.resolve(known);
    let pending = opening.get(sandboxId);
    if (!pending) {
      const spares = createSpares();
      pending = openBridge(bridgeHost, () => spares.take()).then((bridge) => {
        const entry: Entry = {
          bridge,
          link: undefined,
          spares,
          attaching: 0,
          waiters: new Set(),
          downSince: Date.now(),
        };
        entries.set(sandboxId, entry);
        byUrl.set(bridge.url, entry);
        return entry;
      });
      opening.set(sandboxId, pending);
      const done = () => opening.delete(sandboxId);
      pending.then(done, done);
    }
    return pending;
  }

  function forget(sandboxId: string): void {
    for (const [hash, id] of expected) if (id === sandboxId) expected.delete(hash);
    for (const [hash, id] of admitted) if (id === sandboxId) admitted.delete(hash);
    const entry = entries.get(sandboxId);
    if (!entry) return;
    entries.delete(sandboxId);
    byUrl.delete(entry.bridge.url);
    entry.spares.close();
    entry.bridge.close();
    entry.link?.session.destroy();
    entry.link?.ws.terminate();
    for (const wake of entry.waiters) wake(undefined);
  }

  // Bridges of sandboxes long gone: a sandbox torn down without `forget` (another process removed it) frees its port.
  const sweeper = setInterval(() => {
    for (const [sandboxId, entry] of entries) {
      if (!entry.link && entry.waiters.size === 0 && Date.now() - entry.downSince > GONE_MS) forget(sandboxId);
    }
  }, SWEEP_MS);
  sweeper.unref();

  /** Serves the sandbox's new link; `ws` just opened, so nothing it carries has been missed yet. */
  function attach(sandboxId: string, ws: WebSocket): void {
    const entry = entries.get(sandboxId);
    if (!entry) return void ws.close(1008, "sandbox forgotten");
    const duplex = linkStream(ws);
    const session = connect("http://sandbox-link", {
      createConnection: () => duplex,
      settings: LINK_H2.settings,
      maxSessionMemory: LINK_H2.maxSessionMemory,
    });
    session.on("error", ignore);
    entry.attaching += 1;
    let attaching = true;
    const settled = () => {
      if (attaching) entry.attaching -= 1;
      attaching = false;
    };
    let answered = true;
    ws.on("pong", () => {
      answered = true;
    });
    const pinger = setInterval(() => {
      if (!answered) return void ws.terminate();
      answered = false;
      ws.ping();
    }, pingMs);
    session.once("remoteSettings", () => {
      settled();
      if (entries.get(sandboxId) !== entry) return void ws.terminate();
      session.setLocalWindowSize(LINK_H2.sessionWindow);
      const previous = entry.link;
      // The replaced daemon's spares (a frozen one's would take requests and never answer) go with its link.
      if (previous) entry.spares.close();
      entry.link = { ws, session };
      entry.bridge.use(session);
      previous?.ws.terminate();
      for (const wake of entry.waiters) wake(entry.bridge.url);
      deps.onLinked?.(sandboxId, entry.bridge.url);
    });
    // The bridge lets go of the session before its streams close, so it can tell them cut off rather than ended.
    const down = () => {
      clearInterval(pinger);
      settled();
      // Replaced by a newer link, or forgotten: nothing of this sandbox went down.
      if (entries.get(sandboxId) === entry && entry.link?.session === session) {
        entry.link = undefined;
        entry.downSince = Date.now();
        entry.bridge.use(undefined);
        entry.spares.close();
        deps.log("sandbox link down", { sandbox: sandboxId });
        deps.onUnlinked?.(sandboxId);
      }
      ws.terminate();
      session.destroy();
    };
    ws.once("close", down);
    session.once("close", down);
  }

  /**
   * The URL the sandbox's row shows it linked at in another replica, asked every `rowPollMs` until `stop` is called;
   * `found` hears it once. A row read that fails is asked again at the next turn.
   */
  function watchRow(sandboxId: string, own: string, found: (url: string) => void): () => void {
    const linkedUrl = deps.linkedUrl;
    if (!linkedUrl) return () => {};
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const ask = async () => {
      const url = await linkedUrl(sandboxId).catch(() => undefined);
      if (stopped) return;
      if (url && url !== own) return found(url);
      timer = setTimeout(ask, rowPollMs);
    };
    timer = setTimeout(ask, rowPollMs);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  return {
    /**
     * This replica's address as its sandboxes' link URLs name it (the edge's hint); undefined for an API alone, its
     * bridges on the default loopback address, which needs none.
     */
    replica: bridgeHost === "127.0.0.1" || bridgeHost === "::1" ? undefined : bridgeHost,

    /** Accepts a link presenting this service key (by its hash) as `sandboxId`'s, before its sandbox starts. */
    expect(serviceKeyHash: string, sandboxId: string): void {
      expected.set(serviceKeyHash, sandboxId);
    },

    forget,

    /** The sandbox a daemon presenting `serviceKey` is, its bridge ready; undefined: an unknown key. */
    async admit(serviceKey: string): Promise<string | undefined> {
      const hash = hashSecret(serviceKey);
      const sandboxId = expected.get(hash) ?? (await deps.sandboxByKey(hash));
      if (sandboxId) {
        await ensure(sandboxId);
        admitted.set(hash, sandboxId);
      }
      return sandboxId;
    },

    /**
     * The sandbox whose link, up or coming up here, was admitted with `serviceKey`: a spare's, known without the
     * database; undefined for any other key, which `admit` then tells apart.
     */
    linkedBy(serviceKey: string): string | undefined {
      const sandboxId = admitted.get(hashSecret(serviceKey));
      const entry = sandboxId === undefined ? undefined : entries.get(sandboxId);
      return entry && takesSpares(entry) ? sandboxId : undefined;
    },

    attach,

    /**
     * Holds a spare connection of `sandboxId`'s daemon (its upgrade answered here); false when its link is not up
     * in this process (a spare that reached another replica is of no use there) or it holds enough.
     */
    park(sandboxId: string, socket: Socket): boolean {
      const entry = entries.get(sandboxId);
      return entry && takesSpares(entry) ? entry.spares.park(socket) : false;
    },

    /** A spare connection to the daemon whose endpoint here is `url`, if one is idle: a socket as a dial gives. */
    spareFor(url: string): Socket | undefined {
      const entry = byUrl.get(url);
      return entry?.link ? entry.spares.take() : undefined;
    },

    /**
     * A spare connection to the daemon whose endpoint here is `url`: an idle one, else the next to come within
     * SPARE_WAIT_MS (undefined after that, or at once when the daemon is not linked here or sends no spares).
     */
    spareSoon(url: string): Socket | undefined | Promise<Socket | undefined> {
      const entry = byUrl.get(url);
      if (!entry?.link) return undefined;
      return entry.spares.take() ?? entry.spares.next(SPARE_WAIT_MS);
    },

    /** Sandboxes with an endpoint here, linked now or waiting for their daemon to dial (again). */
    known: (): string[] => [...entries.keys()],

    /** The sandbox's endpoint while its link is up. */
    endpoint: (sandboxId: string): string | undefined => {
      const entry = entries.get(sandboxId);
      return entry?.link ? entry.bridge.url : undefined;
    },

    /**
     * The sandbox's endpoint once its link is up, here or (its row says so) in another replica; SANDBOX_UNREACHABLE
     * after `timeoutMs` or when it is forgotten. The row of a sandbox being made holds no URL until its link is up
     * somewhere: one that is not this process's bridge is another replica's.
     */
    async waitFor(sandboxId: string, timeoutMs: number): Promise<string> {
      const entry = await ensure(sandboxId);
      if (entry.link) return entry.bridge.url;
      const url = await new Promise<string | undefined>((resolve) => {
        const wake: Waiter = (found) => {
          clearTimeout(timer);
          stopWatching();
          entry.waiters.delete(wake);
          resolve(found);
        };
        const timer = setTimeout(() => wake(undefined), Math.max(0, timeoutMs));
        const stopWatching = watchRow(sandboxId, entry.bridge.url, wake);
        entry.waiters.add(wake);
      });
      if (!url)
        throw apiError(
          "SANDBOX_UNREACHABLE",
          `the sandbox's daemon did not link to the API within ${Math.round(timeoutMs / 1000)} s`,
        );
      return url;
    },

    close(): void {
      clearInterval(sweeper);
      for (const sandboxId of [...entries.keys()]) forget(sandboxId);
    },
  } satisfies SandboxLinkPort & Record<string, unknown>;
}

export type SandboxLinks = ReturnType<typeof createSandboxLinks>;
