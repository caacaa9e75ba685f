import { describe, expect, it } from "vitest";
import { plainText } from "./terminal-text.ts";

describe("plainText", () => {
  it("drops colours, cursor moves, titles and stray controls; keeps tabs and lines", () => {
    const docker = "\u001b[91mmake: *** No rule\u001b[0m\r\n\u001b]0;title\u0007\tdone\u001b[2K\rnext\u0000\u009b1m";
    expect(plainText(docker)).toBe("make: *** No rule\n\tdone\nnext");
  });

  it("leaves plain text alone", () => {
    expect(plainText("Step 3/5 : RUN make\nok [1/2] ü")).toBe("Step 3/5 : RUN make\nok [1/2] ü");
  });
});
