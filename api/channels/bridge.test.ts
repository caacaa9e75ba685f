import { describe, expect, it } from "vitest";
import { promptOf } from "./bridge.ts";

describe("the prompt of a mention", () => {
  it("drops the leading mentions of the app and Slack's escaping", () => {
    expect(promptOf("<@U0APPBOT1> add a &lt;footer&gt; &amp; a header")).toBe("add a <footer> & a header");
    expect(promptOf("<@U0APPBOT1|svc> <@U0OTHER01>  fix it")).toBe("fix it");
    expect(promptOf("please ask <@U0PERSON1> later")).toBe("please ask <@U0PERSON1> later");
    expect(promptOf("<@U0APPBOT1>   ")).toBe("");
  });
});
