import { describe, expect, it } from 'vitest';
import type { DeviceSummary, RunInfo, StepInfo, SummaryResponse } from '../api';
import { chooseDevice, chooseRun, chooseStep } from './defaults';

const step = (tag: string, n: number | null, wall: number | null = null, devices: string[] = []): StepInfo => ({
  tag,
  step: n,
  wall_time: wall,
  devices,
});
const run = (name: string, steps: StepInfo[], latest: string | null = steps.at(-1)?.tag ?? null): RunInfo => ({
  run: name,
  has_graph: true,
  latest_tag: latest,
  steps,
});

describe('chooseRun', () => {
  const runs = [run('empty', []), run('a', [step('s', 1)]), run('b', [step('s', 1)])];
  it('picks the first run with traced steps', () => {
    expect(chooseRun(runs, null)!.run).toBe('a');
  });
  it('keeps the preferred run when it has traces', () => {
    expect(chooseRun(runs, 'b')!.run).toBe('b');
  });
  it('ignores a preferred run without traces or gone', () => {
    expect(chooseRun(runs, 'empty')!.run).toBe('a');
    expect(chooseRun(runs, 'gone')!.run).toBe('a');
  });
  it('returns null when no run has traces', () => {
    expect(chooseRun([run('x', [])], null)).toBeNull();
  });
});

describe('chooseStep', () => {
  const r = run('r', [step('step_1', 1), step('step_9', 9), step('batch_4', 4)], 'step_9');
  it('keeps a preferred tag that exists', () => {
    expect(chooseStep(r, 'step_1')!.tag).toBe('step_1');
  });
  it("else opens the step the server names the run's latest (not the last listed)", () => {
    expect(chooseStep(r, 'nope')!.tag).toBe('step_9');
    expect(chooseStep(r, null)!.tag).toBe('step_9');
  });
  it('falls back to the last step where the latest is not listed, and to null without steps', () => {
    expect(chooseStep(run('r', [step('a', 1), step('b', 2)], 'gone'), null)!.tag).toBe('b');
    expect(chooseStep(run('r', [], null), null)).toBeNull();
  });
});

function device(id: string, type: string): DeviceSummary {
  return { id, device_type: type, allocator: id.slice(id.indexOf('/') + 1) } as DeviceSummary;
}
function summary(devices: DeviceSummary[], defaultDevice: string | null): SummaryResponse {
  return {
    run: 'r',
    tag: 't',
    step: 1,
    status: 'ok',
    message: null,
    duration_us: 1,
    default_device: defaultDevice,
    devices,
  };
}

describe('chooseDevice', () => {
  const cpu = device('CPU:0/mklcpu', 'CPU');
  const gpu = device('GPU:0/GPU_0_bfc', 'GPU');
  it('prefers an accelerator over the default CPU', () => {
    expect(chooseDevice(summary([cpu, gpu], 'CPU:0/mklcpu'), null)).toBe('GPU:0/GPU_0_bfc');
  });
  it('falls back to the default device without accelerators', () => {
    const cpu1 = device('CPU:0/cpu', 'CPU');
    expect(chooseDevice(summary([cpu1, cpu], 'CPU:0/mklcpu'), null)).toBe('CPU:0/mklcpu');
  });
  it('keeps the preferred device when the step has it', () => {
    expect(chooseDevice(summary([cpu, gpu], 'CPU:0/mklcpu'), 'CPU:0/mklcpu')).toBe('CPU:0/mklcpu');
    expect(chooseDevice(summary([cpu, gpu], 'CPU:0/mklcpu'), 'TPU:9/x')).toBe('GPU:0/GPU_0_bfc');
  });
  it('prefers the GPU’s own memory over host memory pinned for it', () => {
    const host = device('GPU:0/cuda_host_bfc', 'GPU');
    expect(chooseDevice(summary([cpu, host, gpu], 'CPU:0/mklcpu'), null)).toBe('GPU:0/GPU_0_bfc');
    expect(chooseDevice(summary([cpu, host], 'CPU:0/mklcpu'), null)).toBe('CPU:0/mklcpu');
  });
  it('handles a step with no devices', () => {
    expect(chooseDevice(summary([], null), null)).toBeNull();
  });
});
