import { describe, expect, it } from "vitest";
import { parseDotenv, parsePair } from "./dotenv.ts";

describe("parseDotenv, as the dotenv package parses", () => {
  it("reads KEY=VALUE lines, trimming around the key and the value", () => {
    expect(parseDotenv("A=1\nB = spaced \n  C=3\nEMPTY=\n")).toEqual({ A: "1", B: "spaced", C: "3", EMPTY: "" });
  });

  it("accepts the export prefix", () => {
    expect(parseDotenv("export A=1\n  export   B=2")).toEqual({ A: "1", B: "2" });
  });

  it("drops comment lines and trailing comments, but keeps # inside quotes", () => {
    expect(parseDotenv("# a comment\nA=1 # trailing\n  # indented comment\nB=2")).toEqual({ A: "1", B: "2" });
    expect(parseDotenv("S='1 # kept'\nD=\"2 # kept\"\nT=`3 # kept`")).toEqual({
      S: "1 # kept",
      D: "2 # kept",
      T: "3 # kept",
    });
  });

  it("strips single, double and backtick quotes, and only a matching pair", () => {
    expect(parseDotenv("S='single'\nD=\"double\"\nT=`tick`\nP=  'padded'  ")).toEqual({
      S: "single",
      D: "double",
      T: "tick",
      P: "padded",
    });
    expect(parseDotenv("INNER=x'y'\nTRAILING=\"x\"y")).toEqual({ INNER: "x'y'", TRAILING: '"x"y' });
  });

  it("keeps multi-line values inside any quotes", () => {
    expect(parseDotenv("D=\"line1\nline2\"\nS='l1\nl2'\nT=`t1\nt2`\nAFTER=1")).toEqual({
      D: "line1\nline2",
      S: "l1\nl2",
      T: "t1\nt2",
      AFTER: "1",
    });
  });

  it("expands \\n and \\r only inside double quotes", () => {
    expect(parseDotenv('D="a\\nb\\rc"')).toEqual({ D: "a\nb\rc" });
    expect(parseDotenv("S='a\\nb'\nT=`a\\nb`\nU=a\\nb")).toEqual({ S: "a\\nb", T: "a\\nb", U: "a\\nb" });
  });

  it("lets the last duplicate win", () => {
    expect(parseDotenv("A=1\nB=x\nA=2")).toEqual({ A: "2", B: "x" });
  });

  it("reads CRLF files", () => {
    expect(parseDotenv('A=1\r\nB="x\r\ny"\r\n')).toEqual({ A: "1", B: "x\ny" });
  });

  it("skips malformed lines and keeps an unterminated quote as text", () => {
    expect(parseDotenv("JUST_A_NAME\nTWO WORDS=x\n=no-key\nA=1")).toEqual({ A: "1" });
    expect(parseDotenv('OPEN="unterminated\nB=2')).toEqual({ OPEN: '"unterminated', B: "2" });
  });
});

describe("parsePair", () => {
  it("splits at the first '=' and keeps the value as given", () => {
    expect(parsePair("A=b=c # not a comment", 1)).toEqual(["A", "b=c # not a comment"]);
    expect(parsePair("EMPTY=", 1)).toEqual(["EMPTY", ""]);
  });

  it("refuses an argument without a name or '=', never echoing it", () => {
    expect(() => parsePair("hunter2", 2)).toThrow(/^argument 2 is not NAME=VALUE$/);
    expect(() => parsePair("=x", 1, "KEY=VALUE")).toThrow(/^argument 1 is not KEY=VALUE$/);
  });
});
