/**
 * The orchestrator's own failures, whatever the sandbox backend. The API maps each code to an HTTP answer in its
 * one error handler; provisioning records them on the session instead.
 */
export type OrchestratorErrorCode =
  /** A sandbox image did not build: `log` holds the failing step's output, `hint` what the user can do. */
  | "IMAGE_BUILD_FAILED"
  /** The sandbox backend (the container engine) refused or failed a call. */
  | "SANDBOX_BACKEND_FAILED";

export class OrchestratorError extends Error {
  constructor(
    readonly code: OrchestratorErrorCode,
    message: string,
    readonly log = "",
    readonly hint = "",
  ) {
    super(message);
  }
}
