import { afterEach, describe, expect, it } from "vitest";
import { startWarmUpModel } from "./warm-up-model.ts";

let model: Awaited<ReturnType<typeof startWarmUpModel>> | undefined;
afterEach(() => model?.close());

const chat = async (body: unknown) => {
  const res = await fetch(`${model!.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const events = (await res.text())
    .split("\n\n")
    .filter((e) => e.startsWith("data: ") && e !== "data: [DONE]")
    .map((e) => JSON.parse(e.slice(6)).choices[0]);
  return { status: res.status, events };
};

describe("the warm-up model", () => {
  it("answers a first turn with a bash `true` call, the turn after the tool result with text, and only on loopback", async () => {
    model = await startWarmUpModel();
    expect(new URL(model.baseUrl).hostname).toBe("127.0.0.1");
    const tools = [{ type: "function", function: { name: "bash" } }];

    const first = await chat({ tools, messages: [{ role: "user", content: "warm-up" }] });
    expect(first.status).toBe(200);
    const call = first.events[0].delta.tool_calls[0].function;
    expect(call.name).toBe("bash");
    expect(JSON.parse(call.arguments)).toMatchObject({ command: "true" });
    expect(first.events.at(-1).finish_reason).toBe("tool_calls");

    const second = await chat({
      tools,
      messages: [
        { role: "user", content: "warm-up" },
        { role: "assistant", content: null },
        { role: "tool", content: "" },
      ],
    });
    expect(second.events[0].delta.content).toBe("ready");
    expect(second.events.at(-1).finish_reason).toBe("stop");
  });

  it("answers a body that is not JSON with text, and anything but chat completions with 404; closed, it is gone", async () => {
    model = await startWarmUpModel();
    expect((await chat("{not json")).events[0].delta.content).toBe("ready");
    expect((await fetch(`${model.baseUrl}/models`)).status).toBe(404);
    model.close();
    await expect(fetch(`${model.baseUrl}/chat/completions`, { method: "POST", body: "{}" })).rejects.toThrow();
    model = undefined;
  });
});
