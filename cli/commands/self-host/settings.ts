import { STACK_SETTINGS, type StackSetting } from "../../../protocol/stack-settings.ts";
import { editDistance } from "../../edit-distance.ts";

/** The value as `self-host env` and the wizard show it: a secret keeps a hint of its start when long enough. */
export function maskSetting(setting: StackSetting | undefined, key: string, value: string): string {
  const secret = setting ? setting.secret : /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE/i.test(key);
  if (!secret || value === "") return value;
  return value.length <= 12 ? "********" : `${value.slice(0, 3)}…*****`;
}

/** The known key nearest a misspelt one, when it is near enough to be a slip. */
export function nearestSetting(key: string): string | undefined {
  let best: { key: string; d: number } | undefined;
  for (const s of STACK_SETTINGS) {
    const d = editDistance(key.toUpperCase(), s.key);
    if (!best || d < best.d) best = { key: s.key, d };
  }
  return best && best.d <= Math.max(2, Math.floor(best.key.length / 4)) ? best.key : undefined;
}
