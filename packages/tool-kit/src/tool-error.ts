const BRAND = Symbol.for('mtg.tool-kit.ToolError');

/**
 * An expected failure of a tool's own work (a record that does not exist, a refused write):
 * it reaches the caller as the tool's error (`isError`) on every wire, with its `code`.
 * `retryable: true` says the work may succeed later: a long tool's attempt is then retried
 * from its journal (bounded by the task's deadline and attempts) instead of ending the task.
 */
export class ToolError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  constructor(
    code: string,
    message: string,
    options: { retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    if (!TOOL_ERROR_CODE.test(code)) {
      throw new TypeError(
        `ToolError code must match ${TOOL_ERROR_CODE}, got ${JSON.stringify(code)}`,
      );
    }
    this.name = 'ToolError';
    this.code = code;
    this.retryable = options.retryable === true;
  }
}
Object.defineProperty(ToolError.prototype, BRAND, { value: true });

/** Stable, machine-readable: lowercase, digits, `_ . -`. */
export const TOOL_ERROR_CODE = /^[a-z][a-z0-9_.-]{0,63}$/;

/** True for a ToolError, by brand rather than instanceof: a pack may resolve its own copy. */
export function isToolError(error: unknown): error is ToolError {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[BRAND] === true &&
    typeof (error as { code?: unknown }).code === 'string'
  );
}
