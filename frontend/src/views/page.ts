// The page's layout: header (pickers, status), empty state, summary, then the
// dashboard (curve, treemap and graph, step op types; details beside them), or
// in its place compare mode's panels (the single-step panels stay as they were, hidden).
// It builds the views and places them; it holds no data and fetches nothing.

import { el } from '../dom';
import type { Selection } from '../selection';
import { CompareView } from './compare';
import { CurveView } from './curve';
import { DetailsView, StepOpTypesView } from './details';
import { FindingsView } from './findings';
import { GraphView } from './graph';
import { PickersView } from './pickers';
import { ResidentView } from './resident';
import { EmptyStateView, SummaryView, type EmptyStateOptions } from './summary';
import { TreemapView } from './treemap';
import { WhatIfView } from './whatif';

export class PageView {
  readonly root: HTMLElement;
  readonly pickers: PickersView;
  readonly summary: SummaryView;
  readonly emptyState = new EmptyStateView();
  readonly curve: CurveView;
  readonly treemap: TreemapView;
  readonly graph: GraphView;
  readonly details: DetailsView;
  readonly stepOps: StepOpTypesView;
  readonly findings: FindingsView;
  readonly whatif: WhatIfView;
  readonly resident: ResidentView;
  readonly compare: CompareView;
  private readonly dashboard: HTMLElement;
  private readonly singleStep: HTMLElement;

  /** `status` and `link` end the header row (the readiness line, the link to this view). */
  constructor(selection: Selection, status: HTMLElement, link: HTMLElement | null = null) {
    this.pickers = new PickersView(selection);
    this.summary = new SummaryView(selection);
    this.curve = new CurveView(selection);
    this.treemap = new TreemapView(selection);
    this.graph = new GraphView(selection);
    this.details = new DetailsView(selection);
    this.stepOps = new StepOpTypesView(selection);
    const fileBase = () => {
      const s = selection.get();
      return [s.run ?? '', s.tag ?? '', s.device ?? ''];
    };
    this.findings = new FindingsView(selection);
    this.whatif = new WhatIfView(fileBase);
    this.resident = new ResidentView(fileBase);
    this.compare = new CompareView(selection);
    // One grid: the details beside the other panels, or below 1000 px (TensorBoard's iframe at
    // 800) stacked under the curve and the treemap, before the panels on what to change.
    this.singleStep = el(
      'div',
      { class: 'layout single-layout', 'data-testid': 'single-step' },
      el('div', { class: 'area-curve' }, this.curve.element),
      el('div', { class: 'two-up area-maps' }, this.treemap.element, this.graph.element),
      el('div', { class: 'side-column area-side' }, this.details.element),
      // What to change so it fits, below the first screen: findings, the batch what-if, the model's own memory.
      el('div', { class: 'two-up area-fit' }, this.findings.element, this.whatif.element),
      el('div', { class: 'area-resident' }, this.resident.element),
      el('div', { class: 'area-ops' }, this.stepOps.element),
    );
    this.dashboard = el('div', { class: 'dashboard hidden' }, this.singleStep, this.compare.element);
    this.root = el(
      'div',
      { class: 'mem-root' },
      el('header', { class: 'mem-header' }, el('h1', {}, 'Memory'), this.pickers.element, el('div', { class: 'header-end' }, status, link)),
      this.emptyState.element,
      this.summary.element,
      this.dashboard,
    );
    this.summary.setData(null, null);
  }

  /** A step to draw: the empty state goes, the dashboard shows. */
  showDashboard(): void {
    this.emptyState.show(null);
    this.dashboard.classList.remove('hidden');
  }

  /** Compare mode's panels in place of the single step's, or back; neither is redrawn by the switch. */
  setCompareMode(comparing: boolean): void {
    this.singleStep.classList.toggle('hidden', comparing);
    this.compare.show(comparing);
  }

  /** Nothing to draw: the empty state says why (once); the dashboard and summary go. */
  showEmpty(title: string, text: string, options: EmptyStateOptions = {}): void {
    this.emptyState.show(title, text, options);
    this.dashboard.classList.add('hidden');
    this.summary.setData(null, null);
  }
}
