/** When the sandbox was last used: the idle sweeper reads it through /svc/health. */
export function createActivity(now = () => Date.now()) {
  let last = now();
  return {
    touch(): void {
      last = now();
    },
    lastAt(): string {
      return new Date(last).toISOString();
    },
  };
}

export type Activity = ReturnType<typeof createActivity>;
