// Default picks: first run with traces, its latest step, its accelerator if any.

import type { DeviceSummary, RunInfo, StepInfo, SummaryResponse } from '../api';
import { memoryKind } from './memory-kind';

/** The preferred run when it still has traced steps, else the first run that has any. */
export function chooseRun(runs: readonly RunInfo[], preferred: string | null): RunInfo | null {
  const traced = runs.filter((r) => r.steps.length > 0);
  return traced.find((r) => r.run === preferred) ?? traced[0] ?? null;
}

/**
 * The preferred step if the run has it, else the run's latest: the `runs` route names it
 * (`latest_tag`, by store.latest_step, the rule the CLI and `default_step` use too).
 */
export function chooseStep(run: RunInfo, preferredTag: string | null): StepInfo | null {
  const steps = run.steps;
  return (
    steps.find((s) => s.tag === preferredTag) ??
    steps.find((s) => s.tag === run.latest_tag) ??
    steps[steps.length - 1] ??
    null
  );
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
