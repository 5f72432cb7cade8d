import { describe, expect, it } from 'vitest';
import type { Figures, ScopeChild, ScopeDetails, ScopesResponse } from '../api';
import { ScopePreviews, isFullDetails, previewOfChild } from './scope-preview';

const figures = (at: number): Figures => ({
  at_peak_bytes: at,
  allocated_bytes: 2 * at,
  op_peak_bytes: at,
  live_bytes: at,
  output_bytes: at + 1,
  temp_bytes: 3,
  persistent_bytes: 0,
});
const cats = { parameters: 0, inputs: 1, activations: 20, gradients: 0, optimizer: 0, temporaries: 4, other: 0 };
const child = (scope: string, at: number): ScopeChild => ({
  scope,
  name: scope.split('/').pop()!,
  kind: 'scope',
  has_children: true,
  exec_count: 7,
  top_op_type: 'Conv2D',
  figures: figures(at),
  categories: cats,
});
const level = (scope: string, children: ScopeChild[], rise = 100): ScopesResponse => ({
  scope,
  name: scope,
  path: [{ name: '(all)', scope: '' }],
  figures: figures(100),
  categories: cats,
  peak_rise_bytes: rise,
  children,
});

describe('previewOfChild', () => {
  it('carries the figures, node count and categories in the route’s order, with the share of the peak', () => {
    const p = previewOfChild(child('m/a', 25), 100);
    expect(p.scope).toBe('m/a');
    expect(p.figures).toEqual(figures(25));
    expect(p.share_of_peak).toBe(0.25);
    expect(p.peak_rise_bytes).toBe(100);
    expect(p.exec_count).toBe(7);
    expect(p.categories.map((c) => c.name)).toEqual(['parameters', 'inputs', 'activations', 'gradients', 'optimizer', 'temporaries', 'other']);
    expect(p.categories.find((c) => c.name === 'activations')!.at_peak_bytes).toBe(20);
  });

  it('has no share when the peak did not rise (like the scope route)', () => {
    expect(previewOfChild(child('a', 0), 0).share_of_peak).toBeNull();
  });

  it('is told apart from full details', () => {
    const p = previewOfChild(child('a', 1), 10);
    expect(isFullDetails(p)).toBe(false);
    const full: ScopeDetails = { ...p, op_types: [], time_span: null, nodes: [] };
    expect(isFullDetails(full)).toBe(true);
  });
});

describe('ScopePreviews', () => {
  it('keeps the children of every level of one step, device and grouping', () => {
    const previews = new ScopePreviews();
    previews.useKey('r|t|d|layer');
    previews.addLevel(level('', [child('m', 90)]));
    previews.addLevel(level('m', [child('m/a', 60), child('m/b', 30)]));
    expect(previews.get('m')!.figures.at_peak_bytes).toBe(90);
    expect(previews.get('m/b')!.share_of_peak).toBe(0.3);
    expect(previews.get('nope')).toBeNull();
    previews.useKey('r|t|d|layer');
    expect(previews.size).toBe(3);
  });

  it('forgets everything when the step, device or grouping changes', () => {
    const previews = new ScopePreviews();
    previews.useKey('r|t|d|layer');
    previews.addLevel(level('', [child('m', 90)]));
    previews.useKey('r|t|d|scope');
    expect(previews.get('m')).toBeNull();
    expect(previews.size).toBe(0);
  });
});
