import { describe, expect, it } from "vitest";
import { createFrameReader, encodeFrame, Frame, MAX_FRAME } from "./sandbox-access.ts";

describe("exec frames", () => {
  it("reads frames back whatever the chunking, splitting large payloads at MAX_FRAME", () => {
    const big = Buffer.alloc(MAX_FRAME * 2 + 10, 7);
    const wire = Buffer.concat([
      encodeFrame(Frame.STDOUT, "out"),
      encodeFrame(Frame.STDIN, big),
      encodeFrame(Frame.STDIN_EOF),
      encodeFrame(Frame.EXIT, '{"code":7}'),
    ]);
    const read = createFrameReader();
    const frames = [];
    for (let at = 0; at < wire.length; at += 1000) frames.push(...read(wire.subarray(at, at + 1000)));
    expect(frames.map((f) => [f.kind, f.payload.length])).toEqual([
      [Frame.STDOUT, 3],
      [Frame.STDIN, MAX_FRAME],
      [Frame.STDIN, MAX_FRAME],
      [Frame.STDIN, 10],
      [Frame.STDIN_EOF, 0],
      [Frame.EXIT, 10],
    ]);
    expect(Buffer.concat(frames.filter((f) => f.kind === Frame.STDIN).map((f) => f.payload))).toEqual(big);
  });

  it("refuses a frame longer than MAX_FRAME", () => {
    const header = Buffer.from([Frame.STDIN, 0, 0, 0, 0]);
    header.writeUInt32BE(MAX_FRAME + 1, 1);
    expect(() => createFrameReader()(header)).toThrow(/exceeds/);
  });
});
