import { describe, expect, it } from "vitest";
import { renderTable } from "./table.ts";

const rows = [
  ["*", "mine", "http://127.0.0.1:7700", "logged in"],
  [" ", "cloud", "https://api.svc.dev", ""],
];
const header = ["", "name", "URL", "STATUS"];

describe("tables", () => {
  it("on a terminal: an uppercase header row over aligned columns, no trailing blanks", () => {
    expect(renderTable(rows, { header, tty: true })).toBe(
      [
        "   NAME   URL                    STATUS",
        "*  mine   http://127.0.0.1:7700  logged in",
        "   cloud  https://api.svc.dev",
        "",
      ].join("\n"),
    );
  });

  it("in a pipe: tab-separated rows only, no header, so scripts keep parsing", () => {
    expect(renderTable(rows, { header, tty: false })).toBe(
      "*\tmine\thttp://127.0.0.1:7700\tlogged in\n \tcloud\thttps://api.svc.dev\t\n",
    );
  });

  it("an empty list prints nothing, not a header over no rows", () => {
    expect(renderTable([], { header, tty: true })).toBe("");
    expect(renderTable([], { header, tty: false })).toBe("");
  });

  it("a header wider than its column widens the column", () => {
    expect(renderTable([["1", "x"]], { header: ["number", "v"], tty: true })).toBe("NUMBER  V\n1       x\n");
  });
});
