// Run, traced step, device and grouping pickers: native <select>s bound to the selection.

import type { DeviceSummary, Group, RunInfo } from '../api';
import { el, clear } from '../dom';
import { formatBytes } from '../format';
import { isPinnedHost } from '../lib/memory-kind';
import type { AgainstStep, Selection, SelectionState } from '../selection';

function option(value: string, label: string, selected: boolean, disabled = false): HTMLOptionElement {
  // The title holds the whole label: a long run or step name is cut by the select's width.
  const o = el('option', { value, title: label }, label);
  o.selected = selected;
  o.disabled = disabled;
  return o;
}

/** The select's title: its chosen option's whole label, which the closed select may cut. */
function titleFromChoice(select: HTMLSelectElement): void {
  select.title = select.selectedOptions[0]?.title ?? '';
}

export class PickersView {
  /** Asked for a new grouping, where set (the controller keeps the scope shown where the grouping has it);
   * else the grouping is set and the scope shown goes back to the top. */
  onGroupChange: ((group: Group) => void) | null = null;
  readonly element: HTMLElement;
  private readonly runSelect = el('select', { 'data-testid': 'run-picker', id: 'mem-run', 'aria-label': 'Run' });
  private readonly stepSelect = el('select', { 'data-testid': 'step-picker', id: 'mem-step', 'aria-label': 'Traced step' });
  private readonly deviceSelect = el('select', {
    'data-testid': 'device-picker',
    id: 'mem-device',
    'aria-label': 'Device and allocator',
  });
  private readonly groupSelect = el('select', { 'data-testid': 'group-picker', id: 'mem-group', 'aria-label': 'Group by' });
  /** Compare mode's baseline: any traced step of any run, or none (the single-step view). */
  private readonly compareSelect = el('select', { 'data-testid': 'compare-picker', id: 'mem-compare', 'aria-label': 'Compare with' });
  private runs: readonly RunInfo[] = [];
  private devices: readonly DeviceSummary[] = [];

  constructor(private readonly selection: Selection) {
    // Short labels keep the header one row at 1280 px; the title says what each grouping does.
    this.groupSelect.append(option('layer', 'layer', true), option('scope', 'name scope', false));
    this.groupSelect.title = 'layer: gradients and optimizer updates folded into their layer\nname scope: names as the graph has them';
    this.element = el(
      'div',
      { class: 'pickers', style: 'display:contents' },
      el('span', { class: 'picker' }, el('label', { for: 'mem-run' }, 'Run'), this.runSelect),
      el('span', { class: 'picker' }, el('label', { for: 'mem-step' }, 'Step'), this.stepSelect),
      el('span', { class: 'picker' }, el('label', { for: 'mem-device' }, 'Device'), this.deviceSelect),
      el('span', { class: 'picker' }, el('label', { for: 'mem-group' }, 'Group'), this.groupSelect),
      el('span', { class: 'picker' }, el('label', { for: 'mem-compare', title: 'Compare this step (A) with another traced step (B)' }, 'Compare'), this.compareSelect),
    );
    this.runSelect.addEventListener('change', () => this.selection.set({ run: this.runSelect.value }));
    this.stepSelect.addEventListener('change', () => this.selection.set({ tag: this.stepSelect.value }));
    this.deviceSelect.addEventListener('change', () => this.selection.set({ device: this.deviceSelect.value }));
    this.groupSelect.addEventListener('change', () => {
      const group = this.groupSelect.value as Group;
      if (this.onGroupChange) this.onGroupChange(group);
      else this.selection.set({ group });
    });
    this.compareSelect.addEventListener('change', () => this.selection.set({ against: againstOf(this.compareSelect.value) }));
    selection.subscribe((state, changed) => {
      if (changed.has('run') || changed.has('tag')) this.renderRunsAndSteps(state);
      if (changed.has('device')) this.renderDevices(state);
      if (changed.has('group')) this.groupSelect.value = state.group;
      if (changed.has('against') || changed.has('run') || changed.has('tag')) this.renderCompare(state);
    });
  }

  setRuns(runs: readonly RunInfo[]): void {
    this.runs = runs;
    this.renderRunsAndSteps(this.selection.get());
    this.renderCompare(this.selection.get());
  }

  /** Devices of the current step (from its summary); empty while loading or for a step without memory. */
  setDevices(devices: readonly DeviceSummary[]): void {
    this.devices = devices;
    this.renderDevices(this.selection.get());
  }

  private renderRunsAndSteps(state: Readonly<SelectionState>): void {
    clear(this.runSelect);
    for (const run of this.runs) {
      const label = run.steps.length ? run.run : `${run.run} (no traced steps)`;
      this.runSelect.append(option(run.run, label, run.run === state.run, run.steps.length === 0));
    }
    this.runSelect.disabled = this.runs.length === 0;
    clear(this.stepSelect);
    const run = this.runs.find((r) => r.run === state.run);
    for (const step of run?.steps ?? []) {
      // A record that names no device (Keras' empty `batch_N` beside its profile): opened, it says where
      // the step is; listed, it says it holds none.
      const label = stepLabel(step.tag, step.step, step.function) + (step.devices.length === 0 ? ' (no memory)' : '');
      this.stepSelect.append(option(step.tag, label, step.tag === state.tag));
    }
    this.stepSelect.disabled = !run || run.steps.length === 0;
    titleFromChoice(this.runSelect);
    titleFromChoice(this.stepSelect);
  }

  private renderCompare(state: Readonly<SelectionState>): void {
    clear(this.compareSelect);
    const chosen = state.against ? againstValue(state.against.run, state.against.tag) : '';
    this.compareSelect.append(option('', '—', chosen === ''));
    for (const run of this.runs) {
      if (run.steps.length === 0) continue;
      const group = el('optgroup', { label: run.run });
      for (const step of run.steps) {
        const value = againstValue(run.run, step.tag);
        // The step shown is no step to compare it with, nor is one that names no device (a record
        // without step stats, a profile without memory events).
        const shown = run.run === state.run && step.tag === state.tag;
        const empty = step.devices.length === 0;
        const note = shown ? ' (this step)' : empty ? ' (no memory to compare)' : '';
        group.append(option(value, `${run.run} · ${step.tag}${note}`, value === chosen, shown || empty));
      }
      this.compareSelect.append(group);
    }
    this.compareSelect.disabled = this.runs.length === 0;
    titleFromChoice(this.compareSelect);
  }

  private renderDevices(state: Readonly<SelectionState>): void {
    clear(this.deviceSelect);
    for (const d of this.devices) this.deviceSelect.append(option(d.id, deviceLabel(d), d.id === state.device));
    this.deviceSelect.disabled = this.devices.length === 0;
    titleFromChoice(this.deviceSelect);
  }
}

/** A compare picker option's value: the run and step as JSON (names may hold any character). */
export function againstValue(run: string, tag: string): string {
  return JSON.stringify([run, tag]);
}

/** The baseline step an option's value names; '' (or anything else) is none. */
export function againstOf(value: string): AgainstStep | null {
  try {
    const parsed: unknown = JSON.parse(value);
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && typeof parsed[1] === 'string') {
      return { run: parsed[0], tag: parsed[1] };
    }
  } catch {
    // '' : the single-step view
  }
  return null;
}

/** "GPU:0/cuda_host_bfc (host memory) — peak 1.00 MiB"; a trace without a curve shows its allocated bytes instead. */
export function deviceLabel(d: DeviceSummary): string {
  const host = isPinnedHost(d) ? ' (host memory)' : '';
  if (d.has_curve === false) return `${d.id}${host} — no curve, allocated ${formatBytes(d.figures.allocated_bytes)}`;
  const peak = d.peak_bytes ?? d.peak_rise_bytes;
  return `${d.id}${host} — peak ${d.peak_bytes === null ? '+' : ''}${formatBytes(peak)}`;
}

/**
 * A step as the picker shows it: a profiled step's number first (`step_2 · profile/2026_11_23_15_32_10`,
 * which a narrow picker would otherwise cut off), and the step number where the tag does not hold it.
 */
export function stepLabel(tag: string, step: number | null, fn: string | null = null): string {
  // The step's number is in the tag where one of its numbers is it (`b32` at step 3 is not: trial AF).
  const numbered = step !== null && (tag.match(/\d+/g) ?? []).some((n) => Number(n) === step);
  const label = step !== null && !numbered ? `${tag} (step ${step})` : tag;
  // A profile's step: its own name first (an unmarked run's function beside it: a fit's, a predict's and an
  // evaluate's runs looked alike, trial AL), then its session; a whole profile (`profile/<session>`) as it is.
  if (!tag.startsWith('profile/') || tag.indexOf('/') === tag.lastIndexOf('/')) return label;
  const cut = label.lastIndexOf('/');
  return `${label.slice(cut + 1)}${fn ? ` (${fn})` : ''} · ${label.slice(0, cut)}`;
}
