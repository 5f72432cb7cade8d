// Findings in the page: their kinds in words, and what a click selects.

import type { Finding } from '../api';
import type { SelectionState } from '../selection';
import { parentScope } from '../selection';

const KIND_LABELS: Record<string, string> = {
  layout_transpose: 'layout transposes',
  conv_scratch: 'convolution scratch',
  graph_constants: 'constants in the graph',
  step_growth: 'memory left behind by the step',
  allocator_gap: 'allocator gap',
  undonated_arguments: 'arguments not donated',
  variable_copies: 'variables copied by their updates',
};

export function findingLabel(kind: string): string {
  return KIND_LABELS[kind] ?? kind.replace(/_/g, ' ');
}

/** One finding's title: its kind's, but where the finding says otherwise (a step_growth outside the steps). */
export function findingTitle(f: Finding): string {
  if (f.kind === 'step_growth' && f.details['between_steps_bytes'] !== undefined) return 'memory that grows between steps';
  return findingLabel(f.kind);
}

/** Whether a finding says it holds nothing at the peak (a convolution's scratch freed before it). */
export function notAtPeak(f: Finding): boolean {
  return f.details['at_peak_bytes'] === 0;
}

/** Largest bytes first, those holding nothing at the peak last (the route's order; kept when equal). */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  return findings
    .map((f, i) => ({ f, i }))
    .sort((a, b) => Number(notAtPeak(a.f)) - Number(notAtPeak(b.f)) || b.f.bytes - a.f.bytes || a.i - b.i)
    .map((x) => x.f);
}

/**
 * The selection a click on a finding makes: its scope (a path of the layer
 * grouping) selected, its parent focused so the treemap shows its tile, on the
 * finding's memory space; null when the finding names no scope.
 */
export function findingSelection(f: Finding, current: Readonly<SelectionState>): Partial<SelectionState> | null {
  if (f.scope === null || f.scope === '') return null;
  return {
    group: 'layer',
    device: f.device ?? current.device,
    focus: parentScope(f.scope),
    selected: f.scope,
  };
}
