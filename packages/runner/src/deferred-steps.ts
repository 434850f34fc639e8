import type { Boundary, CompletedStep, PendingProgress } from '@mtg/tasks';

/** A finished step not yet journaled, and its journal write (journalStep). */
export interface DeferredStep {
  step: CompletedStep;
  /** Journals the step on its own, with the progress report waiting (if any). */
  write(progress: PendingProgress | undefined): Promise<Boundary>;
}

/** The steps of one run waiting to be journaled (RunBoundary.deferStep). */
export interface DeferredSteps {
  /** Adds a finished step; it is written in the event loop's next turn unless taken first. */
  defer(step: DeferredStep): void;
  /**
   * The one step waiting, handed to the caller to write (the completion carries it); none
   * waits after. Undefined when none or several wait (a flush writes several) or a write of
   * them is in flight.
   */
  take(): DeferredStep | undefined;
  /** Writes every step waiting, in the order they finished, and waits for a write in flight. */
  flush(): Promise<void>;
  close(): void;
}

/**
 * Steps finish in the order their tools' code awaited them (several may run at once), and
 * are journaled in that order, one statement each, by `write` (the run's: it records the
 * boundary each returns). A write that nobody waited for (the event loop's turn started it)
 * and failed is reported by the next flush.
 */
export function deferredSteps(write: (d: DeferredStep) => Promise<void>): DeferredSteps {
  const waiting: DeferredStep[] = [];
  let turn: NodeJS.Immediate | undefined;
  let inFlight: Promise<void> | undefined;
  let awaited = false;
  let failed: { error: unknown } | undefined;

  const schedule = () => {
    clearImmediate(turn);
    turn = waiting.length > 0 ? setImmediate(() => void start(false)) : undefined;
  };
  const start = (byFlush: boolean): Promise<void> | undefined => {
    if (inFlight || waiting.length === 0) return inFlight;
    const batch = waiting.splice(0);
    clearImmediate(turn);
    const writing = (async () => {
      for (const d of batch) await write(d);
    })();
    inFlight = writing;
    awaited = byFlush;
    writing.then(
      () => {
        inFlight = undefined;
        // Steps that finished meanwhile: the next turn writes them, as for any other.
        schedule();
      },
      (error: unknown) => {
        inFlight = undefined;
        if (!awaited) failed = { error };
      },
    );
    return writing;
  };

  return {
    defer(d) {
      waiting.push(d);
      if (!inFlight) schedule();
    },
    take() {
      if (inFlight || waiting.length !== 1) return undefined;
      clearImmediate(turn);
      return waiting.pop();
    },
    async flush() {
      for (;;) {
        if (failed) {
          const { error } = failed;
          failed = undefined;
          throw error;
        }
        if (inFlight) {
          awaited = true;
          await inFlight;
          continue;
        }
        if (waiting.length === 0) return;
        await start(true);
      }
    },
    close() {
      clearImmediate(turn);
    },
  };
}
