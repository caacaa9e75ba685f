import { describe, expect, it } from "vitest";
import { type Choice, choicePrompt, isYes, notInteractive, parseChoice, renderChoices } from "./picker.ts";

const hosts: Choice<string>[] = [
  { key: "cloud", detail: "https://api.svc.dev", value: "cloud" },
  { key: "local-dev", detail: "http://127.0.0.1:3000", value: "local-dev" },
  { key: "mine", value: "mine" },
];

describe("the picker's answers", () => {
  it("takes a listed number (1-based, blanks around it ignored) and nothing outside the list", () => {
    expect(parseChoice("1", hosts)).toBe(0);
    expect(parseChoice(" 3 ", hosts)).toBe(2);
    expect(parseChoice("0", hosts)).toBeUndefined();
    expect(parseChoice("4", hosts)).toBeUndefined();
    expect(parseChoice("-1", hosts)).toBeUndefined();
    expect(parseChoice("1.5", hosts)).toBeUndefined();
    expect(parseChoice("2x", hosts)).toBeUndefined();
  });

  it("takes a choice's name exactly, and Enter alone as the default when there is one", () => {
    expect(parseChoice("local-dev", hosts)).toBe(1);
    expect(parseChoice("local", hosts)).toBeUndefined();
    expect(parseChoice("Mine", hosts)).toBeUndefined();
    expect(parseChoice("", hosts, 2)).toBe(2);
    expect(parseChoice("  ", hosts, 0)).toBe(0);
    expect(parseChoice("", hosts)).toBeUndefined();
  });

  it("shows the choices numbered and aligned, the default marked, and says what Enter does", () => {
    expect(renderChoices("Which host?", hosts, 2)).toBe(
      [
        "Which host?",
        "  1. cloud      https://api.svc.dev",
        "  2. local-dev  http://127.0.0.1:3000",
        "> 3. mine",
        "",
      ].join("\n"),
    );
    const many = Array.from({ length: 10 }, (_, i) => ({ key: `h${i}`, value: i }));
    expect(renderChoices("Pick", many).split("\n").slice(1, 3)).toEqual(["   1. h0", "   2. h1"]);
    expect(renderChoices("Pick", many).split("\n")[10]).toBe("  10. h9");
    expect(choicePrompt(hosts, 2)).toBe("Number (1-3) [3]: ");
    expect(choicePrompt(hosts)).toBe("Number (1-3): ");
    expect(choicePrompt([hosts[0]!])).toBe("Number (1): ");
  });

  it("confirms only on y or yes: anything else, Enter included, is no", () => {
    for (const yes of ["y", "Y", "yes", "YES", " y "]) expect(isYes(yes), yes).toBe(true);
    for (const no of ["", "n", "no", "yep", "sure", "y es"]) expect(isYes(no), no).toBe(false);
  });

  it("off a terminal, a usage error (exit 2) that names what to give instead", () => {
    const err = notInteractive("argument <name>", "svc hosts use <name>");
    expect(err.exitCode).toBe(2);
    expect(err.message).toBe("argument <name> is required when not interactive (svc hosts use <name>)");
    expect(notInteractive("--yes", "svc hosts rm x --yes", "'x' is the last host").message).toBe(
      "'x' is the last host: --yes is required when not interactive (svc hosts rm x --yes)",
    );
  });
});
