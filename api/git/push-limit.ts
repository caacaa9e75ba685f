import type { ServerResponse } from "node:http";
import { type Readable, Transform } from "node:stream";
import type { CgiAnswer } from "./http-backend.ts";

const MB = 1024 * 1024;
/** How much of a push's start is kept to read its command list: far more than any real one needs. */
const COMMANDS_MAX_BYTES = 64 * 1024;
const FLUSH = Buffer.from("0000");

/** A push's command list (what precedes its pack): the refs it updates and the capabilities its client asked for. */
type PushCommands = { refs: string[]; capabilities: string[] };

export const maxPushBytes = (limitMb: number) => limitMb * MB;

/** Why a push was refused: short beside each ref, and a sentence saying what to do. */
function tooLarge(limitMb: number) {
  return {
    reason: `push exceeds SVC_GIT_MAX_PUSH_MB (${limitMb} MB)`,
    sentence:
      `this push is larger than ${limitMb} MB, the most this server accepts (SVC_GIT_MAX_PUSH_MB): push fewer ` +
      "commits at a time, or have the server's administrator raise that setting",
  };
}

/** The command list at the start of a receive-pack request body; "incomplete" until its flush arrives. */
function readCommands(head: Buffer): PushCommands | "incomplete" | undefined {
  const commands: PushCommands = { refs: [], capabilities: [] };
  for (let at = 0; ; ) {
    if (at + 4 > head.length) return "incomplete";
    const size = head.subarray(at, at + 4).toString("latin1");
    if (!/^[0-9a-f]{4}$/.test(size)) return undefined;
    const length = Number.parseInt(size, 16);
    if (length === 0) return commands;
    if (length < 5) return undefined;
    if (at + length > head.length) return "incomplete";
    const [command, capabilities] = head
      .subarray(at + 4, at + length)
      .toString("utf8")
      .split("\0");
    if (capabilities !== undefined) commands.capabilities = capabilities.trim().split(" ");
    const fields = command!.trim().split(" ");
    // `shallow <sha>` lines may precede the commands; anything else (a signed push's certificate) is not read here.
    if (fields.length === 3) commands.refs.push(fields[2]!);
    else if (fields[0] !== "shallow") return undefined;
    at += length;
  }
}

const pktLine = (payload: Buffer) =>
  Buffer.concat([Buffer.from((payload.length + 4).toString(16).padStart(4, "0")), payload]);

/** `data` on a side-band channel, in packets of at most `max` bytes. */
function sideBand(channel: 1 | 2, data: Buffer, max: number): Buffer[] {
  const packets: Buffer[] = [];
  for (let at = 0; at < data.length; at += max - 5) {
    packets.push(pktLine(Buffer.concat([Buffer.from([channel]), data.subarray(at, at + max - 5)])));
  }
  return packets;
}

/**
 * The refusal of a push past `limitMb`: for git, receive-pack's own report refusing every ref (a 413's body is never
 * shown by git), so `git push` prints the reason beside each ref and the sentence as a `remote:` line; for any other
 * client, or a command list that could not be read, a plain 413.
 */
function pushRefusal(commands: PushCommands | undefined, limitMb: number): CgiAnswer {
  const { reason, sentence } = tooLarge(limitMb);
  const caps = new Set(commands?.capabilities);
  if (!commands || (!caps.has("report-status") && !caps.has("report-status-v2"))) {
    return { status: 413, contentType: "text/plain; charset=utf-8", body: Buffer.from(`${sentence}\n`) };
  }
  const report = Buffer.concat([
    pktLine(Buffer.from(`unpack ${reason}\n`)),
    ...commands.refs.map((ref) => pktLine(Buffer.from(`ng ${ref} ${reason}\n`))),
    FLUSH,
  ]);
  const max = caps.has("side-band-64k") ? 65520 : caps.has("side-band") ? 1000 : 0;
  const body = max
    ? Buffer.concat([...sideBand(2, Buffer.from(`error: ${sentence}\n`), max), ...sideBand(1, report, max), FLUSH])
    : report;
  return { status: 200, contentType: "application/x-git-receive-pack-result", body };
}

/** Reads a body only as far as its command list (the rest is left unread). */
function readCommandsFrom(body: Readable): Promise<PushCommands | undefined> {
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    const finish = (commands: PushCommands | undefined) => {
      body.off("data", onData).off("end", onEnd).off("error", onEnd).pause();
      resolve(commands);
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const commands = readCommands(head);
      if (commands !== "incomplete") finish(commands);
      else if (head.length >= COMMANDS_MAX_BYTES) finish(undefined);
    };
    const onEnd = () => finish(undefined);
    body.on("data", onData).on("end", onEnd).on("error", onEnd);
  });
}

/**
 * Counts a push's body on its way to git. Past `maxBytes` nothing more goes through (the rest is read and dropped, so
 * the client finishes sending and reads the answer) and `onOver` is told once, with the push's command list.
 */
function meterPush(maxBytes: number, onOver: (commands: PushCommands | undefined) => void): Transform {
  let seen = 0;
  let head = Buffer.alloc(0);
  let over = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (over) return done();
      seen += chunk.length;
      if (head.length < COMMANDS_MAX_BYTES) {
        head = Buffer.concat([head, chunk.subarray(0, COMMANDS_MAX_BYTES - head.length)]);
      }
      if (seen <= maxBytes) return done(null, chunk);
      over = true;
      const commands = readCommands(head);
      onOver(typeof commands === "object" ? commands : undefined);
      done();
    },
  });
}

/**
 * A push whose declared length is past the limit, refused before git runs: its command list is read for the answer,
 * the rest of the body is read and dropped, so a client still sending finishes and reads that answer.
 */
export async function refuseOversizedPush(res: ServerResponse, body: Readable, limitMb: number): Promise<void> {
  const answer = pushRefusal(await readCommandsFrom(body), limitMb);
  res.writeHead(answer.status, { "content-type": answer.contentType }).end(answer.body);
  body.resume();
}

/** The body as git gets it, cut off past the limit (a chunked push declares no length), and the answer git's yields to. */
export function meteredPush(body: Readable, limitMb: number): { body: Readable; refusal: Promise<CgiAnswer> } {
  let refuse: (answer: CgiAnswer) => void = () => {};
  const refusal = new Promise<CgiAnswer>((resolve) => {
    refuse = resolve;
  });
  const meter = meterPush(maxPushBytes(limitMb), (commands) => refuse(pushRefusal(commands, limitMb)));
  return { body: body.pipe(meter), refusal };
}
