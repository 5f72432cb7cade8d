// Default picks: first run with traces, its latest step, its accelerator if any.

import type { DeviceSummary, RunInfo, StepInfo, SummaryResponse } from '../api';
import { memoryKind } from './memory-kind';

/** The preferred run when it still has traced steps, else the first run that has any. */
export function chooseRun(runs: readonly RunInfo[], preferred: string | null): RunInfo | null {
  const traced = runs.filter((r) => r.steps.length > 0);
  return traced.find((r) => r.run === preferred) ?? traced[0] ?? null;
}

/** A profile's unmarked function run (`profile/<session>/run_3`): a marked step of it comes first. */
const FUNCTION_RUN = /^profile\/.+\/run_\d+(?:_\d+)?$/; // as store.is_function_run reads the tags it names

/**
 * The latest step: first among the steps that hold step stats (any device), then a marked step
 * before a profile's unmarked function run (a fit's epoch-end iterator set-up, `run_3`, beside its
 * batches' `step_3`), then a profile's step before a record of the run's own; of profile steps the
 * last to run (a fit numbers batches within each epoch), of the others the highest step number;
 * then latest wall time, then last in list order. The Keras callback's `batch_N` graph record holds
 * none (TensorFlow strips them) and comes after the profiled steps. As store.latest_step.
 */
export function latestStep(steps: readonly StepInfo[]): StepInfo | null {
  let best: StepInfo | null = null;
  let bestIndex = -1;
  steps.forEach((s, index) => {
    if (best === null || compareSteps(s, index, best, bestIndex) > 0) {
      best = s;
      bestIndex = index;
    }
  });
  return best;
}

function compareSteps(a: StepInfo, ai: number, b: StepInfo, bi: number): number {
  const held = Number(a.devices.length > 0) - Number(b.devices.length > 0);
  if (held !== 0) return held;
  const marked = Number(!FUNCTION_RUN.test(a.tag)) - Number(!FUNCTION_RUN.test(b.tag));
  if (marked !== 0) return marked;
  const profiled = Number(isProfiled(a)) - Number(isProfiled(b));
  if (profiled !== 0) return profiled;
  const as = a.step ?? Number.NEGATIVE_INFINITY;
  const bs = b.step ?? Number.NEGATIVE_INFINITY;
  const aw = a.wall_time ?? Number.NEGATIVE_INFINITY;
  const bw = b.wall_time ?? Number.NEGATIVE_INFINITY;
  const [first, second] = isProfiled(a) ? [order(aw, bw), order(as, bs)] : [order(as, bs), order(aw, bw)];
  if (first !== 0) return first;
  if (second !== 0) return second;
  return ai - bi;
}

/** -1, 0 or 1 as a is below, at or above b (-Infinity for a missing value equals another). */
function order(a: number, b: number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A step read from a profile (`.xplane.pb`), not a run's own record. */
function isProfiled(s: StepInfo): boolean {
  return s.source === 'xplane';
}

export function chooseStep(run: RunInfo, preferredTag: string | null): StepInfo | null {
  return run.steps.find((s) => s.tag === preferredTag) ?? latestStep(run.steps);
}

/** An accelerator's own memory (pinned host memory on a GPU device is not). */
export function isAccelerator(device: Pick<DeviceSummary, 'device_type' | 'allocator' | 'memory_kind'>): boolean {
  const t = device.device_type.toUpperCase();
  return (t === 'GPU' || t === 'TPU') && memoryKind(device) === 'device';
}

/** The preferred device if the step has it, else an accelerator's memory, else the summary's default. */
export function chooseDevice(summary: SummaryResponse, preferred: string | null): string | null {
  const devices = summary.devices;
  if (preferred !== null && devices.some((d) => d.id === preferred)) return preferred;
  const accelerator = devices.find(isAccelerator);
  if (accelerator) return accelerator.id;
  if (summary.default_device !== null && devices.some((d) => d.id === summary.default_device)) {
    return summary.default_device;
  }
  return devices[0]?.id ?? summary.default_device ?? null;
}
