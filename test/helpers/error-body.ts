// Assertions on the standard error body (src/errors.ts, mapped once in src/http/error-handler.ts), for
// the tests that refuse many inputs the same way.
import { expect } from "vitest";

/**
 * A 400 whose body is exactly the standard INVALID_PARAMETER error naming `field`, with this
 * message. `label` (the input tried, in a loop) is named by a failing assertion.
 */
export function expectInvalidParameter(
  res: { status: number; body: unknown },
  { field, message }: { field: string; message: string },
  label?: string,
): void {
  expect(res.status, label).toBe(400);
  expect(res.body, label).toEqual({
    error: "BadRequest",
    code: "INVALID_PARAMETER",
    status: 400,
    field,
    message,
  });
}
