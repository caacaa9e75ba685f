import { describe, expect, it } from "vitest";
import { demux, linesOf } from "./docker-streams.ts";

/** One frame of the engine's stream: stream 1 (stdout) or 2 (stderr), three zeros, the length, the bytes. */
function frame(stream: 1 | 2, text: string | Buffer): Buffer {
  const data = Buffer.isBuffer(text) ? text : Buffer.from(text);
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(data.length, 4);
  return Buffer.concat([head, data]);
}

async function lines(chunks: Buffer[]) {
  const out: { stream: string; line: string }[] = [];
  for await (const line of linesOf(demux(chunks))) out.push(line);
  return out;
}

describe("the engine's framed container output", () => {
  it("splits frames of either stream into lines, whatever the chunks cut", async () => {
    const bytes = Buffer.concat([frame(1, "listening on :7700\nready"), frame(2, "warn: slow\n"), frame(1, " now\n")]);
    const expected = [
      { stream: "stdout", line: "listening on :7700" },
      { stream: "stderr", line: "warn: slow" },
      { stream: "stdout", line: "ready now" },
    ];
    expect(await lines([bytes])).toEqual(expected);
    // Cut one byte at a time: inside headers, inside lengths, inside the text.
    expect(await lines([...bytes].map((b) => Buffer.from([b])))).toEqual(expected);
  });

  it("keeps a character cut between frames whole, and gives a last line without its newline", async () => {
    const euro = Buffer.from("€");
    expect(
      await lines([frame(1, Buffer.concat([Buffer.from("price 3"), euro.subarray(0, 1)])), frame(1, euro.subarray(1))]),
    ).toEqual([{ stream: "stdout", line: "price 3€" }]);
  });

  it("waits for a frame's whole length: a stream cut inside one yields nothing of it", async () => {
    expect(await lines([frame(1, "whole\n"), frame(1, "cut short\n").subarray(0, 12)])).toEqual([
      { stream: "stdout", line: "whole" },
    ]);
  });
});
