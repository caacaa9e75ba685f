import { OrchestratorError } from "../errors.ts";

/**
 * Every verb of a driver rejects with the orchestrator's own error: nothing above a driver knows the engine's error
 * types; `engine` names the backend in the message.
 */
export function withOrchestratorErrors<T extends object>(driver: T, engine: string): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, call] of Object.entries(driver) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await call(...args);
      } catch (err) {
        if (err instanceof OrchestratorError) throw err;
        throw new OrchestratorError("SANDBOX_BACKEND_FAILED", `${engine} failed to ${name}: ${(err as Error).message}`);
      }
    };
  }
  return wrapped as T;
}
