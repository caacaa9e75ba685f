import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readInstallRecord } from "./installation.ts";

const record = (value: object) => {
  const home = mkdtempSync(join(tmpdir(), "svc-record-"));
  writeFileSync(join(home, "install.json"), JSON.stringify(value));
  return home;
};

describe("install records", () => {
  it("reads a record written before installs had a kind as a checkout's", () => {
    const old = {
      checkout: "/src/svc",
      script: "/src/svc/scripts/install.sh",
      shim: "/b/svc",
      node: "/n",
      installed_at: "x",
    };
    expect(readInstallRecord(record(old))).toEqual({ kind: "checkout", ...old });
  });

  it("refuses a served record without its checksum, naming the file", () => {
    const home = record({ kind: "served", origin: "http://h", script: "http://h/install.sh", prefix: "/p" });
    expect(() => readInstallRecord(home)).toThrow(`${join(home, "install.json")} is damaged`);
  });
});
