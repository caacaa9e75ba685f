import type { Socket } from "node:net";
import { SANDBOX_SPARE_UPGRADE } from "../../protocol/sandbox-link.ts";

/**
 * At most this many idle spares of one sandbox are held: a daemon keeps fewer (daemon/link-spares.ts MOST_SPARES),
 * so more is a daemon misbehaving.
 */
export const MAX_SPARES = 32;

const SWITCHED = `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${SANDBOX_SPARE_UPGRADE}\r\n\r\n`;

export type Spares = {
  /** Answers the spare's upgrade and holds it; false (nothing answered) when it holds as many as it may. */
  park(socket: Socket): boolean;
  /** An idle spare, paused and with none of its holder's listeners: the caller's connection to the daemon. */
  take(): Socket | undefined;
  /**
   * The next spare to come, for a caller that found none idle: handed to it as it parks (the daemon dials one for
   * each taken), or undefined after `ms`. Undefined at once while this sandbox's daemon has sent none, since one
   * that sends none (spares refused in a row, a daemon before spares) would hold each caller for nothing.
   */
  next(ms: number): Promise<Socket | undefined> | undefined;
  /**
   * The link they came with went down, was replaced, or the sandbox is forgotten: every spare is closed, and those
   * taken are cut off with an error (a frozen daemon's would never answer; the one taking it tells its own caller).
   */
  close(): void;
};

/**
 * One sandbox's idle spare connections (daemon/link-spares.ts): TCP connections its daemon dialed that the API
 * takes in place of opening one to the daemon, one each. An idle spare says nothing until taken, so one that sends
 * a byte, ends or fails is dropped; and spares go with the link they came with, whose pings tell a live daemon.
 */
export function createSpares(max = MAX_SPARES): Spares {
  const idle = new Map<Socket, () => void>();
  const taken = new Set<Socket>();
  const waiting: ((socket: Socket | undefined) => void)[] = [];
  let parked = false;

  function hand(socket: Socket): Socket {
    taken.add(socket);
    socket.once("close", () => taken.delete(socket));
    return socket;
  }

  return {
    park(socket) {
      if (idle.size >= max) return false;
      parked = true;
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 30_000);
      const waiter = waiting.shift();
      if (waiter) {
        socket.write(SWITCHED);
        socket.pause();
        waiter(hand(socket));
        return true;
      }
      const drop = () => {
        idle.delete(socket);
        socket.destroy();
      };
      const forget = () => idle.delete(socket);
      socket.on("data", drop);
      socket.on("end", drop);
      socket.on("error", drop);
      socket.on("close", forget);
      idle.set(socket, () => {
        socket.pause();
        socket.off("data", drop);
        socket.off("end", drop);
        socket.off("error", drop);
        socket.off("close", forget);
      });
      socket.write(SWITCHED);
      return true;
    },
    take() {
      for (const [socket, release] of idle) {
        idle.delete(socket);
        if (socket.destroyed || !socket.writable) continue;
        release();
        return hand(socket);
      }
      return undefined;
    },
    next(ms) {
      if (!parked) return undefined;
      return new Promise((resolve) => {
        const waiter = (socket: Socket | undefined) => {
          clearTimeout(timer);
          resolve(socket);
        };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1);
          resolve(undefined);
        }, ms);
        waiting.push(waiter);
      });
    },
    close() {
      for (const waiter of waiting.splice(0)) waiter(undefined);
      for (const socket of idle.keys()) socket.destroy();
      idle.clear();
      for (const socket of taken) socket.destroy(new Error("the sandbox's link went down"));
      taken.clear();
    },
  };
}
