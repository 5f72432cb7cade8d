// Keyboard moves between the items of one Tab stop (a roving tabindex): the treemap's tiles, the
// graph's boxes. Arrow keys step through them in their drawn order (largest first), Home and End go
// to either end.

/** Keys that move the focus between items, and by how many (Home and End: to either end). */
export const ARROW_STEP: Readonly<Record<string, number>> = {
  ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1, Home: -Infinity, End: Infinity,
};

/** The index `step` items on from `at` among `count` (clamped to the ends; ±Infinity: an end). */
export function steppedIndex(at: number, count: number, step: number): number {
  if (count === 0) return -1;
  if (step === -Infinity) return 0;
  if (step === Infinity) return count - 1;
  return Math.min(count - 1, Math.max(0, at + step));
}
