/**
 * One queue per key: `run(key, fn)` starts `fn` once the key's previous work is done, and resolves when it is; a
 * failure goes to `onError` and never blocks what follows.
 */
export function createSerialQueues(onError: (key: string, err: Error) => void) {
  const queues = new Map<string, Promise<void>>();
  return function run(key: string, fn: () => Promise<void>): Promise<void> {
    const next = (queues.get(key) ?? Promise.resolve()).then(fn).catch((err) => onError(key, err as Error));
    queues.set(key, next);
    void next.finally(() => {
      if (queues.get(key) === next) queues.delete(key);
    });
    return next;
  };
}
