import { describe, expect, it } from 'vitest';
import type { DeviceSummary, RunInfo, StepInfo, SummaryResponse } from '../api';
import { chooseDevice, chooseRun, chooseStep, latestStep } from './defaults';

const step = (tag: string, n: number | null, wall: number | null = null, devices: string[] = []): StepInfo => ({
  tag,
  step: n,
  wall_time: wall,
  devices,
});
const run = (name: string, steps: StepInfo[]): RunInfo => ({ run: name, has_graph: true, steps });

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

describe('latestStep', () => {
  it('uses step numbers, not tag order (step_10 after step_9)', () => {
    expect(latestStep([step('step_10', 10), step('step_9', 9)])!.tag).toBe('step_10');
  });
  it('breaks ties by wall time, then by position', () => {
    expect(latestStep([step('b', 3, 200), step('a', 3, 100)])!.tag).toBe('b');
    expect(latestStep([step('a', null), step('b', null)])!.tag).toBe('b');
  });
  it('returns null for no steps', () => {
    expect(latestStep([])).toBeNull();
  });
  it('passes over a later record that holds no step stats (a Keras batch_N graph)', () => {
    const profiled = [step('profile/s/step_2', 2, 10, ['/device:GPU:0']), step('profile/s/step_3', 3, 11, ['/device:GPU:0'])];
    expect(latestStep([step('batch_4', 4, 12), ...profiled])!.tag).toBe('profile/s/step_3');
    expect(latestStep([step('batch_4', 4, 12)])!.tag).toBe('batch_4'); // nothing else: still shown, with why
  });
  it("opens a profile's marked step before its unmarked function run (an epoch-end iterator set-up)", () => {
    const cpu = ['/device:CPU:0'];
    const steps = [step('profile/s/run_3', 3, 30, cpu), step('profile/s/step_2', 2, 10, cpu), step('profile/s/step_3', 3, 20, cpu)];
    expect(latestStep(steps)!.tag).toBe('profile/s/step_3');
    expect(latestStep([step('profile/s/run_1', 1, 1, cpu), step('profile/s/run_2', 2, 2, cpu)])!.tag).toBe('profile/s/run_2');
    expect(latestStep([step('run_3', 3, 30, cpu), step('step_2', 2, 10, cpu)])!.tag).toBe('run_3'); // a TF1 tag is a tag
  });
  it("opens a profile's last step to run, not its highest number (a fit across an epoch's end)", () => {
    const cpu = ['/device:CPU:0'];
    const profiled = (tag: string, n: number, wall: number): StepInfo => ({ ...step(tag, n, wall, cpu), source: 'xplane' });
    const across = [profiled('profile/s/step_3', 3, 10), profiled('profile/s/step_4', 4, 20), profiled('profile/s/step_1', 1, 40)];
    expect(latestStep(across)!.tag).toBe('profile/s/step_1');
    // A run's own records (TF1) by number, whatever their wall times.
    expect(latestStep([step('step_9', 9, 10, cpu), step('step_2', 2, 50, cpu)])!.tag).toBe('step_9');
  });
  it('chooseStep keeps a preferred tag that exists', () => {
    const r = run('r', [step('step_1', 1), step('step_2', 2)]);
    expect(chooseStep(r, 'step_1')!.tag).toBe('step_1');
    expect(chooseStep(r, 'nope')!.tag).toBe('step_2');
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
