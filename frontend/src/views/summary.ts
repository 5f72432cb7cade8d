// The step at a glance for the chosen device: peak, baseline, the identity
// "at peak by category = by op type = peak rise", and the empty state.

import type { Bytes, DefaultStepResponse, DeviceSummary, LargestAtPeak, SummaryResponse } from '../api';
import { clear, el } from '../dom';
import { countOf, formatBytes, formatBytesDelta, formatCount, formatExactBytes, formatPercent, formatTime } from '../format';
import { shareOfCapacity } from '../lib/allocator-readings';
import { peakIdentity } from '../lib/identity';
import { noCurveReason } from '../lib/peak-figures';
import { isPinnedHost, memoryKind } from '../lib/memory-kind';
import { elideLeading } from '../lib/path-elide';
import { canShowAbsolute, peakMode, type PeakMode } from '../lib/resident';
import type { Selection } from '../selection';

export const TRACE_HOWTO = [
  "run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)",
  'run_metadata = tf.compat.v1.RunMetadata()',
  'sess.run(train_op, feed_dict=feed, options=run_options, run_metadata=run_metadata)',
  "writer.add_run_metadata(run_metadata, 'step_%d' % i)",
].join('\n');

/** How TF 2.x and Keras users record a step's memory: the profiler, into the logdir (README, "TF2 and Keras"). */
export const PROFILE_HOWTO = [
  'tf.profiler.experimental.start(logdir)   # or keras.callbacks.TensorBoard(logdir, profile_batch=(2, 4))',
  "for step in range(3):",
  "    with tf.profiler.experimental.Trace('train', step_num=step):",
  '        train_step(x, y)',
  'tf.profiler.experimental.stop()',
].join('\n');

/**
 * A node's name in the summary is shortened past this many characters by leaving out its first
 * components ("…/unet_11/Conv2D_grad/Conv2DBackpropInput"): its layer and its own name stay, and
 * the whole name is in the item's title (the item takes the focus, so the title can be read).
 */
export const SUMMARY_NAME_CHARS = 48;

/**
 * The node's tile, where its path in the grouping is not its raw name (a control-flow call or a gradients
 * scope dropped: `router/indexed_case/Tile` for `router/indexed_case/branch1/_1/Tile`), as a title line.
 */
function tileLine(node: { name: string; path?: string }): string {
  return node.path && node.path !== node.name ? `\nin the treemap: ${node.path}` : '';
}

export class SummaryView {
  readonly element = el('section', { class: 'summary', 'data-testid': 'summary', 'aria-label': 'Step summary' });
  /** The peak as absolute memory (resident + rise) where the start is known, or as the rise alone; the user switches
   * (kept in the shared selection where there is one: the curve follows it). */
  private ownMode: PeakMode = 'absolute';
  private shown: Parameters<SummaryView['setData']> | null = null;

  /** With a selection, the biggest holder at the peak selects its scope when clicked. */
  constructor(private readonly selection: Selection | null = null) {}

  private get wantedMode(): PeakMode {
    return this.selection ? this.selection.get().peakMode : this.ownMode;
  }

  /** `opening`: why the page opened on this step, while it still shows it (said at the start of line 2). */
  setData(summary: SummaryResponse | null, device: DeviceSummary | null, opening: DefaultStepResponse | null = null): void {
    this.shown = [summary, device, opening];
    clear(this.element);
    this.element.classList.toggle('hidden', !device);
    if (!summary || !device) return;
    // Line 1: the peak and what runs there. Line 2: how the figures hold together.
    // Each line stays one row; the op name and the notes are cut with an ellipsis, full text in their titles.
    const main = el('div', { class: 'summary-line' });
    const secondary = el('div', { class: 'summary-line secondary' });
    this.element.append(main, secondary);
    if (isPinnedHost(device)) {
      main.append(
        el('span', { class: 'figure', 'data-testid': 'summary-memory', title: `${device.id}: host memory pinned for the device (allocator ${device.allocator}), not the device's own memory` }, 'host memory'),
      );
    }
    // What the trace misses (a GPU whose allocations were not recorded, XLA programs' buffers): a line
    // of its own below, in full (it wraps: cut to one row it read "XLA pro…" at 1000 px).
    // A step without a curve says so on its own.
    if (summary.message && device.has_curve !== false) {
      this.element.append(el('div', { class: 'summary-note-line note missing', 'data-testid': 'summary-note' }, summary.message));
    }
    if (opening) secondary.append(openingItem(opening));
    if (summary.source === 'xplane') {
      secondary.append(
        el('span', { class: 'note', 'data-testid': 'summary-source', title: `A step of the profiler’s trace (plugins/profile/…/*.xplane.pb): ${summary.tag}` }, 'profiled step (XPlane)'),
      );
    }
    // No allocation records: no curve and no peak (the server sends the peak's figures as null).
    if (device.has_curve === false || device.peak_rise_bytes === null) this.noCurve(summary, device, main, secondary);
    else this.peak(summary, device, device.peak_rise_bytes, main, secondary);
  }

  private peak(summary: SummaryResponse, device: DeviceSummary, rise: Bytes, main: HTMLElement, secondary: HTMLElement): void {
    const absolute = device.baseline === 'allocator_bytes_in_use' && device.peak_bytes !== null;
    const mode = peakMode(device, this.wantedMode);
    const peakText = mode === 'absolute' ? formatBytes(device.peak_bytes) : absolute ? formatBytesDelta(rise) : `${formatBytesDelta(rise)} (relative)`;
    main.append(
      el(
        'span',
        { class: 'figure' },
        mode === 'absolute' || !absolute ? 'Peak ' : 'Peak rise ',
        el('b', { 'data-testid': 'summary-peak', 'data-mode': mode, title: peakTitle(device, rise, mode) }, peakText),
        device.peak_time_us !== null ? ` at ${formatTime(device.peak_time_us)}` : '',
      ),
    );
    // The peak shown may be above the allocator's real one (variables' old buffers given back in no record): said
    // beside it, where it is read first (trial AF had read 233 MiB above a finding bounding it by 201.5 MiB), and
    // before the button that switches it (after it, it had read as the button's: trial AM).
    const tooHigh = device.snapshots.peak_too_high_bytes ?? 0;
    if (tooHigh > 0) {
      main.append(
        el(
          'span',
          {
            class: 'note',
            'data-testid': 'summary-peak-too-high',
            title: 'The records count variables’ old buffers that the allocator gave back with no record; its largest reading bounds the peak (see the allocator gap finding).',
          },
          `may be up to ${formatBytes(tooHigh)} lower`,
        ),
      );
    }
    if (canShowAbsolute(device)) main.append(this.modeToggle(mode));
    if (absolute) {
      const countsFrom = device.start_counts_from_bytes ?? null;
      main.append(
        el(
          'span',
          countsFrom === null
            ? {}
            : {
                'data-testid': 'summary-start-partial',
                title: `${device.allocator} counts only its requests of ${formatBytes(countsFrom)} and more in its bytes in use: smaller tensors in use before the step are in neither the start nor the absolute peak (the rise counts every request of the step).`,
              },
          `start ${formatBytes(device.start_bytes)}${countsFrom === null ? '' : '*'} → rise ${formatBytesDelta(rise)} → end ${formatBytes(device.end_bytes)}`,
        ),
      );
      // The model's smaller tensors, which that allocator counts in no reading: the peak with them.
      const small = device.resident?.uncounted_bytes ?? null;
      const withSmall = device.resident?.peak_with_uncounted_bytes ?? null;
      // Said where the server finds they move the peak (`uncounted_noticeable`: they and the peak with them are known).
      if (mode === 'absolute' && countsFrom !== null && small !== null && withSmall !== null && device.resident?.uncounted_noticeable) {
        main.append(
          el(
            'span',
            {
              'data-testid': 'summary-peak-with-small',
              'data-bytes': String(withSmall),
              title: `The model’s parameters, optimizer slots and feeds under ${formatBytes(countsFrom)} (${formatExactBytes(small)}), from the run’s graph: in use before the step, but ${device.allocator} counts them in no reading, so they are in neither the start nor the peak above. With them the peak is ${formatExactBytes(withSmall)}.`,
            },
            `with smaller tensors ${formatBytes(withSmall)}`,
          ),
        );
      }
    } else {
      // Why, as the CLI says it (the route's `no_baseline_reason`: a shared allocator, readings that give no start,
      // mklcpu's readings of large requests only).
      const reason = device.no_baseline_reason;
      main.append(
        el('span', { class: 'note', 'data-testid': 'summary-no-baseline' },
          reason ? `no allocator baseline (${reason}): relative to the step’s start` : 'no allocator baseline: relative to the step’s start'),
      );
    }
    // A device's limit is what the step must fit in: line 1. A host allocator's cap is not the
    // machine's memory: line 2, so that the op names on line 1 keep their room.
    const host = memoryKind(device) === 'host';
    const capacity = device.capacity_bytes ? capacityItem(device.capacity_bytes, absolute ? device.peak_bytes : null, host) : null;
    if (capacity && !host) main.append(capacity);
    if (device.peak_node) {
      const node = device.peak_node;
      const op = opTypeSuffix(node.op_type);
      main.append(
        nameItem('op at peak: ', node.name, opSuffix(node.name, node.op_type), {
          'data-testid': 'summary-op',
          title: `op at peak: ${node.name}${op}\nscope: ${node.scope || '(root)'}${tileLine(node)}`,
        }),
      );
    }
    if (device.largest_at_peak) main.append(this.largestItem(device.largest_at_peak));

    const id = peakIdentity(device, rise);
    const identity = el(
      'span',
      { class: 'identity', 'data-testid': 'identity', 'data-holds': String(id.holds) },
      `At peak, categories (${formatBytes(id.categoriesBytes)}) = op types (${formatBytes(id.opTypesBytes)}) = peak rise (${formatBytes(id.peakRiseBytes)}) ${id.holds ? '✓' : '✗ (do not add up)'}`,
    );
    identity.setAttribute(
      'title',
      `Bytes held at the peak, split by category and by op type, add up exactly to the peak's rise over the start of the step.\ncategories ${formatExactBytes(id.categoriesBytes)}\nop types ${formatExactBytes(id.opTypesBytes)}\nrise ${formatExactBytes(id.peakRiseBytes)}`,
    );
    secondary.append(identity);
    if (capacity && host) secondary.append(capacity);
    const notes: string[] = [];
    // The gap the allocator_gap finding and the compare view give (the raw disagreement at each
    // op's end is bigger, and had read as a second, different figure beside them). First: the line is
    // cut where it is narrow, and this one matters (at 1100 px it had been cut after the step's counts: trial AM).
    const gap = device.snapshots.readings_gap_bytes;
    if (typeof gap === 'number' && device.snapshots.count > 0) {
      notes.push(`allocator readings differ from the records by up to ${formatBytes(gap)} (see the allocator gap finding)`);
    }
    notes.push(`${formatTime(summary.duration_us)} · ${countOf(device.exec_count, 'execution')} · ${countOf(device.event_count, 'allocation event')}`);
    notes.push('categories are heuristic (from names, op types and lifetimes)');
    appendNote(secondary, notes.join(' · '));
  }

  /** Switches the peak between absolute memory (resident + rise) and the rise over the step's start. */
  private modeToggle(mode: PeakMode): HTMLElement {
    const next: PeakMode = mode === 'absolute' ? 'rise' : 'absolute';
    const button = el(
      'button',
      {
        type: 'button',
        class: 'peak-mode',
        'data-testid': 'summary-peak-mode',
        'aria-pressed': mode === 'rise' ? 'true' : 'false',
        title: mode === 'absolute' ? 'Show the rise over the step’s start (what the step itself allocates), here and on the curve' : 'Show absolute memory at the peak: resident before the step + the rise, here and on the curve',
      },
      mode === 'absolute' ? 'show rise' : 'show absolute',
    );
    button.addEventListener('click', () => {
      if (this.selection) this.selection.set({ peakMode: next });
      else this.ownMode = next;
      if (this.shown) this.setData(...this.shown);
    });
    return button;
  }

  /**
   * A trace without allocation records (old TF 1.x dumps, or nothing allocated): there is no curve,
   * so no peak and no at-peak figure. Says so once and shows what the trace
   * has: allocated and output bytes.
   */
  private noCurve(summary: SummaryResponse, device: DeviceSummary, main: HTMLElement, secondary: HTMLElement): void {
    main.append(
      el('span', { class: 'figure', 'data-testid': 'summary-no-curve' }, 'No memory curve'),
      el('span', { 'data-testid': 'summary-allocated', 'data-bytes': String(device.figures.allocated_bytes), title: formatExactBytes(device.figures.allocated_bytes) }, `allocated ${formatBytes(device.figures.allocated_bytes)}`),
      el('span', { 'data-testid': 'summary-output', 'data-bytes': String(device.figures.output_bytes), title: formatExactBytes(device.figures.output_bytes) }, `output ${formatBytes(device.figures.output_bytes)}`),
    );
    appendNote(main, `${noCurveReason(device)}: no peak and no at-peak figures`);
    const notes = [`${formatTime(summary.duration_us)} · ${countOf(device.exec_count, 'execution')}`];
    notes.push('categories are heuristic (from names, op types and lifetimes)');
    appendNote(secondary, notes.join(' · '));
  }

  /**
   * "biggest at peak: <name> (op) 3.0 MiB": the node execution holding the most
   * at the peak (the op at the peak may hold little). Only the name gives way
   * to an ellipsis; the scope is in the title; a click selects the scope.
   */
  private largestItem(largest: LargestAtPeak): HTMLElement {
    const op = opTypeSuffix(largest.op_type);
    const scope = largest.scope || '(root)';
    const runs = largest.executions > 1 ? ` over ${countOf(largest.executions, 'execution')}` : '';
    const title = [
      `biggest at peak: ${largest.name}${op} holds ${formatBytes(largest.at_peak_bytes)} (${formatExactBytes(largest.at_peak_bytes)})${runs}`,
      `scope: ${scope}`,
      tileLine(largest).trim() || null,
      largest.graph_name && largest.graph_name !== largest.name ? `graph node: ${largest.graph_name}` : null,
      this.selection ? 'click to select its scope' : null,
    ]
      .filter(Boolean)
      .join('\n');
    const item = nameItem('biggest at peak: ', largest.name, `${opSuffix(largest.name, largest.op_type)} ${formatBytes(largest.at_peak_bytes)}`, {
      'data-testid': 'summary-largest',
      'data-scope': largest.scope,
      'data-bytes': String(largest.at_peak_bytes),
      title,
    });
    const selection = this.selection;
    if (!selection) return item;
    item.classList.add('clickable');
    item.setAttribute('role', 'button');
    const choose = () => selection.select(largest.scope === '' ? null : largest.scope);
    item.addEventListener('click', choose);
    item.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Enter' && ev.key !== ' ') return;
      ev.preventDefault();
      choose();
    });
    return item;
  }
}

/** The peak's exact bytes, and what it is made of: resident before the step (from the run's graph) and the rise. */
function peakTitle(device: DeviceSummary, riseBytes: Bytes, mode: PeakMode): string {
  const rise = `rise over the step’s start ${formatExactBytes(riseBytes)}`;
  if (mode !== 'absolute' || device.peak_bytes === null || device.start_bytes === null) return rise;
  const lines = [`absolute memory at the peak ${formatExactBytes(device.peak_bytes)}`, `= in use before the step ${formatExactBytes(device.start_bytes)}`];
  const r = device.resident;
  if (r) {
    const fed = r.fed_bytes ? `, inputs ${formatBytes(r.fed_bytes)}` : '';
    lines.push(`    parameters ${formatBytes(r.param_bytes)}, optimizer slots ${formatBytes(r.slot_bytes)}${fed}, other ${formatBytes(r.other_bytes)}`);
  }
  lines.push(`+ ${rise}`);
  return lines.join('\n');
}

/** "limit 16.0 GiB (peak 42.1%)": the memory the step must fit in, where the trace reports it. */
function capacityItem(capacity: number, peakBytes: number | null, host: boolean): HTMLElement {
  const share = shareOfCapacity(peakBytes, capacity);
  // A host allocator's limit is a cap it was given (the CPU BFC allocator's 64 GiB), not the machine's memory.
  const what = host ? 'The CPU allocator’s cap' : 'The allocator’s limit';
  const cap = host ? ' It is not the machine’s memory, and the what-if does not use it as a limit.' : '';
  return el(
    'span',
    {
      'data-testid': 'summary-capacity',
      'data-bytes': String(capacity),
      title: `${what}, ${formatExactBytes(capacity)}: bytes allocated + available + reserved, as the profiler reports them.${share === null ? '' : ` The peak fills ${formatPercent(share)} of it.`}${cap}`,
    },
    `${host ? 'allocator cap' : 'limit'} ${formatBytes(capacity)}${share === null ? '' : ` (peak ${formatPercent(share)})`}`,
  );
}

function appendNote(line: HTMLElement, text: string): void {
  line.append(el('span', { class: 'note shrink', title: text }, text));
}

/** "opened here: largest peak of 5 runs": short, for the summary's second line (the title says more). */
export function openingText(opening: DefaultStepResponse): string {
  const { compared_steps: compared, run_count: runs } = opening;
  if (runs <= 1) return 'opened here: the only traced run';
  if (compared < runs) return `opened here: largest peak of the ${formatCount(compared)} latest of ${formatCount(runs)} runs`;
  return `opened here: largest peak of ${formatCount(runs)} runs`;
}

function openingItem(opening: DefaultStepResponse): HTMLElement {
  const peak = opening.peak_bytes === null ? '' : ` (${opening.absolute ? '' : '+'}${formatBytes(opening.peak_bytes)} on ${opening.device ?? 'its default device'})`;
  const title = [
    `The page opened on this step: it has the largest peak${peak} among the latest traced step of each run compared (the ${formatCount(opening.compared_steps)} most recently written of ${formatCount(opening.run_count)}).`,
    'Pick another run or step above; the page reopens where you leave it.',
  ].join('\n');
  return el('span', { class: 'note opening', 'data-testid': 'summary-reason', title }, openingText(opening));
}

/** " (OpType)", or nothing when the name's last part already says it ("…/Conv2D_grad/Conv2DBackpropInput"); titles keep it. */
export function opSuffix(name: string, opType: string | null): string {
  const leaf = name.slice(name.lastIndexOf('/') + 1);
  // A name that is its op type already (`MatMul`), or that in brackets (an XLA program's own `(XLA program)`).
  if (!opType || leaf === opType || leaf === `(${opType})`) return '';
  return opTypeSuffix(opType);
}

/** " (MatMul)" after a name; a made-up op type is already in brackets: " (unknown)". */
export function opTypeSuffix(opType: string | null): string {
  if (!opType) return '';
  return opType.startsWith('(') && opType.endsWith(')') ? ` ${opType}` : ` (${opType})`;
}

/**
 * "label <code>…/layer/</code><code>leaf</code> suffix": the name shortened from its start
 * (`elideLeading`), the full name in the title; the item is a Tab stop so that the title can be
 * read. The summary's line wraps before it cuts an item; on a row too narrow for one item alone
 * its path gives way first, then its last component; the label and the suffix (op type, bytes)
 * stay whole.
 */
function nameItem(label: string, name: string, suffix: string, attrs: Record<string, string>): HTMLElement {
  const shown = elideLeading(name, SUMMARY_NAME_CHARS);
  const cut = shown.lastIndexOf('/') + 1;
  return el(
    'span',
    { ...attrs, class: `${attrs.class ?? ''} summary-name-item`.trim(), tabindex: 0 },
    el('span', { class: 'label' }, label),
    el(
      'code',
      { class: 'name' },
      cut > 0 ? el('span', { class: 'name-head' }, shown.slice(0, cut)) : null,
      el('span', { class: 'name-tail' }, shown.slice(cut)),
    ),
    suffix ? el('span', { class: 'label' }, suffix) : null,
  );
}

export interface EmptyStateOptions {
  /** Show how to trace a step with memory: only where that is the fix (no traced step, or one traced without memory). */
  howTo?: boolean;
  /** The message is an error text (a decode error, an HTTP error): shown as such. */
  error?: boolean;
  /** A line under the message saying what the user can do. */
  hint?: string;
  /** Steps to open instead (a Keras run's profiled steps, beside its empty `batch_N` record): one button each. */
  open?: { label: string; onOpen: () => void }[];
}

export class EmptyStateView {
  readonly element = el('section', { class: 'empty-state hidden', 'data-testid': 'empty-state', role: 'status' });

  /** Shows why there is nothing to draw (and, when it applies, how to trace a step with memory); null hides it. */
  show(title: string | null, message: string | null = null, options: EmptyStateOptions = {}): void {
    clear(this.element);
    this.element.classList.toggle('hidden', title === null);
    if (title === null) return;
    this.element.append(el('h2', {}, title));
    if (message) {
      this.element.append(
        options.error
          ? el('pre', { class: 'message error-text', 'data-testid': 'empty-state-error' }, message)
          : el('p', { class: 'message' }, message),
      );
    }
    if (options.hint) this.element.append(el('p', {}, options.hint));
    if (options.open?.length) {
      const buttons = options.open.map(({ label, onOpen }) => {
        const button = el('button', { type: 'button', 'data-testid': 'empty-state-open' }, label);
        button.addEventListener('click', onOpen);
        return button;
      });
      this.element.append(el('p', { class: 'empty-state-open' }, ...buttons));
    }
    if (!options.howTo) return;
    this.element.append(
      el('p', {}, 'Trace one training step with memory (TF 1.x sessions, or tf.compat.v1 in TF 2.x) and write its run metadata:'),
      el('pre', { 'data-testid': 'trace-howto' }, TRACE_HOWTO),
      el('p', {}, 'TF 2.x eager, tf.function and Keras fit: profile a few steps instead (their memory is in the profiler’s .xplane.pb, which TensorFlow 2.5 and later write):'),
      el('pre', { 'data-testid': 'profile-howto' }, PROFILE_HOWTO),
      el(
        'p',
        { class: 'muted' },
        'Then reload. On a CPU, set TF_CPU_ALLOCATOR_USE_BFC=true before TensorFlow starts, or the profile records only oneDNN’s allocations of 256 KiB and more (none with oneDNN off). TensorBoard keeps 10 traced steps per run unless started with --samples_per_plugin graph_tagged_run_metadata=0.',
      ),
    );
  }
}
