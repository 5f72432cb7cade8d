// Findings: what to change so the step fits, largest first; a click selects the
// finding's layer (layer grouping), so the treemap, graph and details follow.

import type { DeviceSummary, Finding } from '../api';
import { breakableText, clear, el } from '../dom';
import { formatBytes, formatExactBytes } from '../format';
import { findingLabel, findingTitle, findingSelection, notAtPeak, sortFindings } from '../lib/findings';
import type { Selection } from '../selection';

/** Findings sharing their advice shown in full before the rest fold into one line (the CLI spells out as many). */
export const ALIKE_SPELT_OUT = 3;

/** How many findings from `at` on share the advice of the one at `at`, and their bytes. */
function countAlike(sorted: readonly Finding[], at: number): { count: number; bytes: number } {
  let count = 0;
  let bytes = 0;
  for (let i = at; i < sorted.length && sorted[i]!.suggestion === sorted[at]!.suggestion; i++) {
    count += 1;
    bytes += sorted[i]!.bytes;
  }
  return { count, bytes };
}

export class FindingsView {
  readonly element: HTMLElement;
  private readonly list = el('div', { class: 'findings-list panel-body', 'data-testid': 'findings' });
  private readonly caption = el('span', { class: 'muted findings-caption' });
  /** "click one to select its layer": only where some finding names a layer to select. */
  private readonly hint = el('span', { class: 'muted findings-caption hidden', 'data-testid': 'findings-hint' }, 'click one to select its layer');
  private items: { scope: string | null; node: HTMLElement }[] = [];

  constructor(private readonly selection: Selection) {
    this.element = el(
      'section',
      { class: 'panel findings-panel', 'aria-label': 'Findings: what to change so the step fits' },
      // The toolbar wraps: its caption and hint are read in full, never cut with an ellipsis.
      el('div', { class: 'panel-toolbar findings-toolbar' }, el('h2', {}, 'Findings'), this.caption, this.hint),
      this.list,
    );
    selection.subscribe((_state, changed) => {
      if (changed.has('selected') || changed.has('group')) this.markSelected();
    });
  }

  /** The step's findings (absent from an older server: undefined); `device` is the memory space shown. */
  setData(findings: Finding[] | undefined, device: DeviceSummary | null): void {
    clear(this.list);
    this.items = [];
    this.hint.classList.add('hidden');
    if (findings === undefined) {
      this.caption.textContent = 'this server sends no findings';
      return;
    }
    const sorted = sortFindings(findings);
    this.caption.textContent = sorted.length > 1 ? 'largest first, those held at the peak before the rest' : '';
    if (sorted.length === 0) {
      this.list.append(el('div', { class: 'muted', 'data-testid': 'findings-none' }, 'Nothing to flag in this step: no layout transposes, large convolution scratch, constants in the graph, growth across steps, allocator gap or variables copied by their updates.'));
      return;
    }
    // Findings of one kind often share their advice (a convolution per layer): said once, then "as above";
    // past the first few of such a run, the rest fold into one line that opens on them, as the CLI names them.
    let run = 0;
    let more: HTMLElement | null = null;
    sorted.forEach((finding, i) => {
      const alike = i > 0 && sorted[i - 1]?.suggestion === finding.suggestion;
      run = alike ? run + 1 : 0;
      if (!alike) more = null;
      const node = this.item(finding, device, alike);
      if (run < ALIKE_SPELT_OUT) {
        this.list.append(node);
        return;
      }
      if (!more) {
        const rest = countAlike(sorted, i);
        more = el('div', { class: 'findings-more-list' });
        this.list.append(
          el(
            'details',
            { class: 'findings-more', 'data-testid': 'findings-more', 'data-count': String(rest.count) },
            el('summary', {}, `and ${rest.count} more ${findingLabel(finding.kind)} finding${rest.count > 1 ? 's' : ''} like these, ${formatBytes(rest.bytes)} in all`),
            more,
          ),
        );
      }
      more.append(node);
    });
    this.hint.classList.toggle('hidden', !this.list.querySelector('.finding.clickable'));
    this.markSelected();
  }

  private item(f: Finding, device: DeviceSummary | null, adviceAsAbove: boolean): HTMLElement {
    const elsewhere = f.device !== null && device !== null && f.device !== device.id;
    const head = el(
      'div',
      { class: 'finding-head' },
      el('b', {}, findingTitle(f)),
      el('span', { class: 'finding-bytes', title: formatExactBytes(f.bytes) }, formatBytes(f.bytes)),
      f.scope ? el('code', { class: 'finding-scope', title: f.scope }, f.scope) : null,
      notAtPeak(f) ? el('span', { class: 'muted', 'data-testid': 'finding-not-at-peak' }, 'none of it at the peak') : null,
      elsewhere ? el('span', { class: 'muted' }, `on ${f.device}`) : null,
    );
    const node = el(
      'div',
      {
        class: 'finding',
        'data-testid': 'finding',
        'data-kind': f.kind,
        'data-scope': f.scope ?? '',
        'data-bytes': String(f.bytes),
        title: f.nodes.length ? `nodes: ${f.nodes.join('\n')}` : null,
      },
      head,
      el('div', { class: 'finding-message' }, ...breakableText(f.message)),
      el(
        'div',
        { class: 'finding-suggestion', title: adviceAsAbove ? f.suggestion : null },
        el('span', { class: 'muted' }, 'Try: '),
        adviceAsAbove ? 'as above.' : f.suggestion,
      ),
    );
    const patch = findingSelection(f, this.selection.get());
    if (patch) {
      node.classList.add('clickable');
      node.setAttribute('role', 'button');
      node.setAttribute('tabindex', '0');
      const choose = () => {
        const latest = findingSelection(f, this.selection.get());
        if (latest) this.selection.set(latest);
      };
      node.addEventListener('click', choose);
      node.addEventListener('keydown', (ev) => {
        if (ev.key !== 'Enter' && ev.key !== ' ') return;
        ev.preventDefault();
        choose();
      });
    }
    this.items.push({ scope: f.scope, node });
    return node;
  }

  private markSelected(): void {
    const s = this.selection.get();
    for (const { scope, node } of this.items) {
      const on = scope !== null && s.group === 'layer' && s.selected === scope;
      node.classList.toggle('selected', on);
      node.setAttribute('aria-pressed', on ? 'true' : 'false');
    }
  }
}
