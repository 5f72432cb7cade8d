// Typed access to every route in docs/http_api.md. The JSON types live here and nowhere else.

export type Bytes = number;
export type Micros = number;

export const CATEGORY_NAMES = [
  'parameters',
  'inputs',
  'activations',
  'gradients',
  'optimizer',
  'temporaries',
  'other',
] as const;
export type CategoryName = (typeof CATEGORY_NAMES)[number];

export type Group = 'layer' | 'scope';

export interface Figures {
  at_peak_bytes: Bytes;
  allocated_bytes: Bytes;
  op_peak_bytes: Bytes;
  live_bytes: Bytes;
  output_bytes: Bytes;
  temp_bytes: Bytes;
  persistent_bytes: Bytes;
}
export type FigureName = keyof Figures;

export interface ErrorBody {
  error: string;
}

// ---- runs ----
export interface StepInfo {
  tag: string;
  step: number | null;
  wall_time: number | null;
  /** The devices its trace names: none for a record without step stats (the Keras callback's `batch_N`). */
  devices: string[];
  /** Absent from older servers. */
  source?: TraceSource;
  /** An unmarked profiled step's tf.function (`multi_step_on_iterator_1187`); null otherwise, absent from older servers. */
  function?: string | null;
}
export interface RunInfo {
  run: string;
  has_graph: boolean;
  /** The step a run opens on (null without steps): chosen by the server, as the CLI chooses it. */
  latest_tag: string | null;
  steps: StepInfo[];
}
export interface RunsResponse {
  runs: RunInfo[];
}

// ---- default_step ----
/** Where the page opens when the user chose nothing before; nulls when no step analyses. */
export interface DefaultStepResponse {
  run: string | null;
  tag: string | null;
  device: string | null;
  /** Why this step: the largest peak of the steps compared. */
  reason: 'largest_peak' | null;
  peak_bytes: Bytes | null;
  absolute: boolean | null;
  /** The latest step of this many runs (the most recent ones) was compared... */
  compared_steps: number;
  /** ...out of this many runs with traced steps. */
  run_count: number;
}

// ---- summary ----
export type SummaryStatus = 'ok' | 'no_memory' | 'empty' | 'corrupt';
export type Baseline = 'allocator_bytes_in_use' | 'none';

export interface NodeRef {
  name: string;
  scope: string;
  op_type: string | null;
  /** The GraphDef node the runtime name maps back to (a layout transpose's producer, say). */
  graph_name?: string | null;
  /** The node as the grouping's tree (its tile) names it: runtime calls dropped, a gradient in its layer. Absent from older servers. */
  path?: string;
}
/** The node execution holding the most bytes at the peak, with those bytes. */
export interface LargestAtPeak extends NodeRef {
  /** Over all its executions (a loop body's op runs once per iteration). */
  at_peak_bytes: Bytes;
  executions: number;
}
export interface CategoryTotal {
  name: CategoryName;
  at_peak_bytes: Bytes;
  allocated_bytes?: Bytes;
  /** Bytes in use before the step, from the run's graph (parameters, optimizer, other); null without a graph. */
  resident_bytes?: Bytes | null;
}
/** A scope's own model tensors, from the run's GraphDef (docs/http_api.md, "Resident memory"); null without a graph. */
export interface ParamFigures {
  param_count?: number | null;
  param_bytes?: Bytes | null;
  slot_bytes?: Bytes | null;
}
/** One layer of `resident.layers`, like a row of Keras's `summary()`. */
export interface ResidentLayer {
  scope: string;
  param_count: number;
  param_bytes: Bytes;
  slot_bytes: Bytes;
  tensor_count: number;
}
/** The model's tensors in memory before the step (variables, optimizer slots, a frozen graph's weights). */
export interface Resident {
  source: 'run_graph';
  start_bytes: Bytes | null;
  param_count: number;
  param_bytes: Bytes;
  slot_bytes: Bytes;
  /** The step's feeds, made before it (TF1's fed arrays): in use before the step as its input. */
  fed_bytes?: Bytes;
  /** start_bytes minus those: null without a baseline, negative when the GraphDef's tensors exceed it. */
  other_bytes: Bytes | null;
  /** What to read other_bytes with: why it is negative, or the constants it may hold (else null). */
  other_note: string | null;
  /** Where the start counts only the allocator's larger requests (mklcpu): what `other_bytes` is read against. Absent from older servers. */
  counted_note?: string | null;
  /** There: the model's smaller tensors in use before the step, in neither the start nor the peak, and the peak with them. */
  uncounted_bytes?: Bytes | null;
  peak_with_uncounted_bytes?: Bytes | null;
  /** Whether they move the peak enough to be said beside it (resident.UNCOUNTED_NOTICEABLE_SHARE). */
  uncounted_noticeable?: boolean;
  weight_constants: boolean;
  note: string | null;
  layers: ResidentLayer[];
}
export type FindingKind =
  | 'layout_transpose' | 'conv_scratch' | 'graph_constants' | 'step_growth' | 'allocator_gap' | 'undonated_arguments'
  | 'variable_copies';
/** What to change so the step fits (docs/http_api.md, "Findings"). */
export interface Finding {
  kind: FindingKind | string;
  bytes: Bytes;
  /** A scope path of the layer grouping; null when the finding has none. */
  scope: string | null;
  nodes: string[];
  message: string;
  suggestion: string;
  /** The memory space; null for graph_constants (the run's graph). */
  device: string | null;
  details: Record<string, unknown>;
}
export interface OpTypeTotal {
  name: string;
  count: number;
  figures: Figures;
}
export interface TopScope extends ParamFigures {
  scope: string;
  name: string;
  figures: Figures;
}
/** `device`: an accelerator's own memory; `host`: a CPU's, or host memory pinned for an accelerator (`cuda_host_bfc`). */
export type MemoryKind = 'device' | 'host';

export interface DeviceSummary {
  id: string;
  device: string;
  device_type: string;
  allocator: string;
  /** Absent from older servers: then read from the allocator's name (lib/memory-kind). */
  memory_kind?: MemoryKind;
  /** The allocator's limit where the trace reports it (XPlane); null for RunMetadata steps. */
  capacity_bytes?: Bytes | null;
  baseline: Baseline;
  /** The other spaces of the same allocator (devices of one process sharing it): then no baseline. Absent from older servers. */
  shared_with?: string[];
  /** False when the trace has no allocation records (old TF 1.x dumps): no curve, no at-peak figures. Absent means true. */
  has_curve?: boolean;
  /** Why there is no curve: allocations without records (old TF 1.x), or nothing allocated; null with one. Absent from older servers. */
  no_curve?: 'no_records' | 'nothing_allocated' | null;
  start_bytes: Bytes | null;
  /** The smallest request the allocator counts in the readings the start comes from (oneDNN's mklcpu: 256 KiB; null: all, or no start). Absent from older servers. */
  start_counts_from_bytes?: Bytes | null;
  /** Without a start: why (a shared allocator, readings that give none, mklcpu reading only large requests); else null. Absent from older servers. */
  no_baseline_reason?: string | null;
  peak_bytes: Bytes | null;
  /** Null without a curve (`has_curve` false), as `peak_time_us` and `peak_bytes` are. */
  peak_rise_bytes: Bytes | null;
  peak_time_us: Micros | null;
  /** The op whose allocation made the peak (it may itself hold little). */
  peak_node: NodeRef | null;
  /** The node holding the most at the peak over all its executions; null when the curve never rises. */
  largest_at_peak: LargestAtPeak | null;
  end_bytes: Bytes | null;
  /** Executions on this memory space (docs/figures.md, "Words"). */
  exec_count: number;
  event_count: number;
  figures: Figures;
  /** The allocator's own readings: how many, their raw disagreement with the records at each op's
   * end, and the gap the allocator_gap finding flags (null where it flags none; absent from older
   * servers): the one figure the page shows. */
  /** `peak_too_high_bytes`: how much the peak shown may be above the allocator's (its largest reading bounds it); 0 where not. */
  snapshots: { count: number; max_abs_diff_bytes: Bytes | null; readings_gap_bytes?: Bytes | null; peak_too_high_bytes?: Bytes };
  categories: CategoryTotal[];
  op_types: OpTypeTotal[];
  /** What the `(unknown)` op type is, where the step's op types hold it; null where not (absent from older servers). */
  op_types_note?: string | null;
  top_scopes: TopScope[];
  /** Absent from older servers; null when the run has no graph. */
  resident?: Resident | null;
  /** Why `resident` is null (no GraphDef, no Keras model config); null when it is not. */
  resident_note?: string | null;
}
/** Where a step comes from: `run_metadata` (step stats) or `xplane` (a step of a profiler XPlane file). */
export type TraceSource = 'run_metadata' | 'xplane';

export interface SummaryResponse {
  run: string;
  tag: string;
  step: number | null;
  /** Absent from older servers (then step stats). */
  source?: TraceSource;
  status: SummaryStatus;
  message: string | null;
  duration_us: Micros | null;
  default_device: string | null;
  devices: DeviceSummary[];
  /** Largest bytes first; absent from older servers. */
  findings?: Finding[];
}

// ---- scopes ----
export type ScopeKind = 'scope' | 'node' | 'self';
export type CategoryBytes = Record<CategoryName, Bytes>;

export interface Crumb {
  name: string;
  scope: string;
}
export interface ScopeChild extends ParamFigures {
  scope: string;
  name: string;
  kind: ScopeKind;
  has_children: boolean;
  /** Executions under this child. */
  exec_count: number;
  top_op_type: string | null;
  figures: Figures;
  categories: CategoryBytes;
  /**
   * A child holding a large share of its level (and children of its own) lists them, largest
   * first: the treemap shows what its tile is made of. Absent on other children.
   */
  inside?: ScopeChild[];
}
export interface ScopesResponse extends ParamFigures {
  scope: string;
  name: string;
  path: Crumb[];
  figures: Figures;
  categories: CategoryBytes;
  peak_rise_bytes: Bytes;
  children: ScopeChild[];
}

// ---- scope ----
export type NodeKind = 'op' | 'layout_transpose' | 'feed' | 'plumbing';
export interface NodeExecution {
  raw_name: string;
  graph_name: string;
  scope: string;
  op_type: string;
  kernel: string | null;
  xla_program: string | null; // the XLA program whose blocks hold its bytes (a profile's HLO placed them)
  kind: NodeKind;
  category: CategoryName;
  start_us: Micros;
  end_us: Micros;
  figures: Figures;
}
export interface TimeSpan {
  start_us: Micros;
  end_us: Micros;
}
export interface ScopeDetails extends ParamFigures {
  scope: string;
  name: string;
  kind: ScopeKind;
  figures: Figures;
  share_of_peak: number | null;
  peak_rise_bytes: Bytes;
  categories: { name: CategoryName; at_peak_bytes: Bytes }[];
  op_types: OpTypeTotal[];
  /** Executions under the scope; `nodes` lists the largest of them. */
  exec_count: number;
  time_span: TimeSpan | null;
  nodes: NodeExecution[];
}

// ---- curve ----
/** A span of the step, microseconds from its start; start_us < end_us. */
export interface CurveWindow {
  start_us: Micros;
  end_us: Micros;
}
export interface CurveSeries {
  scope: string | null;
  name: string;
  bytes: Bytes[];
}
export interface CurveResponse {
  /** The window that was bucketed (echoes start_us/end_us); null for the whole step. */
  window: CurveWindow | null;
  baseline: Baseline;
  start_bytes: Bytes | null;
  absolute: boolean;
  peak: { time_us: Micros; bytes: Bytes; rise_bytes: Bytes; node: NodeRef | null } | null;
  duration_us: Micros;
  t_us: Micros[];
  min_bytes: Bytes[];
  max_bytes: Bytes[];
  node_at: number[];
  node_names: string[];
  /** `series`: the allocator's other readings at the same times (XPlane: reserved_bytes, fragmentation); {} otherwise. */
  /** `counts_from_bytes`: the smallest request the readings count (mklcpu: 256 KiB), where they leave smaller ones out; else null (absent from older servers). */
  snapshots: { t_us: Micros[]; bytes: Bytes[]; series?: Record<string, number[]>; counts_from_bytes?: Bytes | null };
  capacity_bytes?: Bytes | null;
  /** Absent from older servers. `host`: the capacity is a cap the allocator was given, not the machine's memory. */
  memory_kind?: MemoryKind;
  series: CurveSeries[];
}

// ---- graph ----
export type GraphNodeKind = 'scope' | 'node' | 'other';
export interface GraphNode {
  id: string;
  name: string;
  kind: GraphNodeKind;
  op_type: string | null;
  /** Graph nodes inside the box (GraphDef nodes; executions where the graph comes from the trace). */
  node_count: number;
  at_peak_bytes: Bytes;
  allocated_bytes: Bytes;
  output_bytes: Bytes;
  /** Whether the grouping asked for holds this box's path (absent when none was asked, and on "(other)"). */
  in_group?: boolean;
}
export interface GraphEdge {
  source: string;
  target: string;
  count: number;
}
export interface GraphResponse {
  scope: string;
  source: 'run_graph' | 'trace';
  nodes: GraphNode[];
  edges: GraphEdge[];
  omitted_nodes: number;
  graphs_dashboard_run: string;
}

// ---- compare ----
/** One side of a comparison: its step and memory space, named as in `summary.devices[]`. */
export interface CompareSide {
  run: string;
  tag: string;
  step: number | null;
  source: TraceSource | string;
  id: string;
  device: string;
  allocator: string;
  baseline: Baseline;
  has_curve: boolean;
  start_bytes: Bytes | null;
  /** Where the start counts only the allocator's larger requests (mklcpu), that size; else null. Absent from older servers. */
  start_counts_from_bytes?: Bytes | null;
  peak_bytes: Bytes | null;
  peak_rise_bytes: Bytes | null;
  peak_time_us: Micros | null;
  duration_us: Micros;
  /** How far this side's allocator readings and records disagree (its `allocator_gap` finding), else null: its peak may be off by that much. Absent from older servers. */
  readings_gap_bytes?: Bytes | null;
}
export type CompareStatus = 'added' | 'removed' | 'changed' | 'same';
/** A's, B's and the difference (A - B): at each step's own peak (`*_bytes`, null on a side without a curve), allocated, output. */
export interface CompareFigures {
  a_bytes: Bytes | null;
  b_bytes: Bytes | null;
  delta_bytes: Bytes | null;
  a_allocated_bytes: Bytes;
  b_allocated_bytes: Bytes;
  delta_allocated_bytes: Bytes;
  a_output_bytes?: Bytes;
  b_output_bytes?: Bytes;
  delta_output_bytes?: Bytes;
}
export interface CompareScopeRow extends CompareFigures {
  /** The scope's path; "" is the root. */
  name: string;
  kind: ScopeKind;
  parent: string | null;
  status: CompareStatus;
  /** B's own path, where B numbers the row otherwise (a model built again: see `renumbered`). */
  b_name?: string;
  /** Present (true) where both sides' outputs request as many bytes and the allocator gave them other chunks. */
  same_requests?: boolean;
  /** Present where another row of the listing lists this row's change: the child that explains a scope's,
   * or a `(self)`'s scope (as `tb-memory diff` lists it once). */
  listed_by?: string;
}
/** One part of the change of start, split by the runs' graphs (as `resident` splits each start). */
export interface StartChangePart {
  name: 'parameters' | 'optimizer slots' | 'inputs' | 'other';
  delta_bytes: Bytes;
}
/** A − B of the bytes in use before each step, which no listing holds (the listings add up to the peak rises). */
export interface StartChange {
  delta_bytes: Bytes;
  /** The non-zero parts, adding up to delta_bytes; null where a run has no graph to split it. */
  parts: StartChangePart[] | null;
  /** Where a start counts only its allocator's larger requests (mklcpu), the smallest tensor the parts count; else null. Absent from older servers. */
  counts_from_bytes?: Bytes | null;
}
/** A path of B and the path of A it was matched with by numbering. */
export interface Renumbered {
  b: string;
  a: string;
}
export interface CompareOpTypeRow extends CompareFigures {
  name: string;
  status: CompareStatus;
  a_count: number;
  b_count: number;
}
export interface CompareCategoryRow extends CompareFigures {
  name: CategoryName;
  status: CompareStatus;
}
export interface CompareResponse {
  a: CompareSide;
  b: CompareSide;
  group: Group;
  peak_rise_delta_bytes: Bytes | null;
  /** Null where a side has no start (no curve, or no baseline). */
  start_change: StartChange | null;
  /** B's paths numbered as A's (a model built again in one process or graph), outermost first; empty when B's names are A's. */
  renumbered: Renumbered[];
  /** Of the side with fewer entries, the share the other has too (matched by name); about 1 for one model. */
  shared_share?: number;
  /** Where the steps share under half their entries: two models, said once (else null). */
  models_note?: string | null;
  scope: CompareScopeRow;
  /** The scope's children in the union of both trees, largest first by the larger side. */
  children: CompareScopeRow[];
  scope_count: number;
  /** Every entry below the scope, by absolute difference, the `top` first. */
  scopes: CompareScopeRow[];
  op_types: CompareOpTypeRow[];
  categories: CompareCategoryRow[];
}
export interface CompareParams {
  run: string;
  tag: string;
  device: string | null;
  against_run: string;
  against_tag: string;
  against_device?: string | null;
  group: Group;
  scope: string;
  top?: number;
}

// ---- whatif ----
export type WhatIfMethod = 'one_step' | 'fit';
export interface WhatIfRun {
  run: string;
  tag: string;
  step: number | null;
  source: TraceSource | string;
  device: string;
  /** The batch it ran at, read from its feeds' shapes (or given: `batch_given`). */
  batch: number;
  /** The batch was the user's (`traced_batch`), not read from the shapes. */
  batch_given?: boolean;
  peak_rise_bytes: Bytes;
  start_bytes: Bytes | null;
  peak_bytes: Bytes | null;
}
/** A layer at the predicted peak: one step gives its traced bytes, a fit its fixed and per-sample bytes. */
export interface WhatIfLayer {
  layer: string;
  at_peak_bytes: Bytes;
  traced_at_peak_bytes?: Bytes;
  fixed_bytes?: Bytes;
  per_sample_bytes?: Bytes;
  /** Fit: where the line starts from zero when its fixed part is below zero (the layer grew faster
   * than the batch between the traced batches); null elsewhere. */
  from_batch?: number | null;
}
export interface WhatIfPrediction {
  predicted_peak_rise_bytes: Bytes;
  predicted_start_bytes: Bytes | null;
  predicted_peak_bytes: Bytes | null;
  max_batch: number | null;
  layers: WhatIfLayer[];
}
/** Predicted peaks over batch sizes; `peak_bytes` entries are null without a baseline. */
export interface WhatIfSeries {
  peak_rise_bytes: Bytes[];
  /** Null when the step has no baseline (then only the rise is predicted). */
  peak_bytes: Bytes[] | null;
}
export interface WhatIfResponse extends WhatIfPrediction {
  batch: number;
  /** The steps read, the first one predicting alone. */
  runs: WhatIfRun[];
  method: WhatIfMethod;
  limit_bytes: Bytes | null;
  limit_source: 'limit' | 'capacity' | null;
  limit_applies_to: 'peak_bytes' | 'peak_rise_bytes' | null;
  /** The largest batch the search reads: max_batch null under a limit means none up to it reaches the limit. */
  max_batch_searched: number;
  predictions: {
    /** `warning`: what may make the one-step prediction low (the traced batch is also a parameter's dimension), or null. */
    one_step: (WhatIfPrediction & { from_run: string; from_tag: string; traced_batch: number; scaled_share: number; warning?: string | null }) | null;
    /** `warning`: the traced peaks do not grow with the batch (a line through them may be far off), or null. */
    /** `falls`: its traced peaks do not grow with the batch (no largest batch is read from it). */
    fit: (WhatIfPrediction & { batches: number[]; warning?: string | null; falls?: boolean }) | null;
  };
  series: { batch: number[]; one_step?: WhatIfSeries | null; fit?: WhatIfSeries | null };
  /** Runs picked to fit with that were left out (unreadable, another memory space or model), and why; absent from older servers. */
  skipped_runs?: { run: string; tag: string; reason: string }[];
  /** What to read the answer with (another step of the profile peaked well above the one read; a profile's start held as traced); absent from older servers. */
  notes?: string[];
}
export interface WhatIfParams {
  run: string;
  tag: string;
  batch: number;
  /** Other steps of this run (each `tags=`), fitted with this one. */
  tags?: readonly string[];
  /** Other runs of the same model (each `runs=`), fitted with this one. */
  runs?: readonly string[];
  limit?: Bytes | null;
  device?: string | null;
  /** The batch the step ran at, where the user gives it (else the route reads it from the shapes). */
  tracedBatch?: number | null;
}

// ---- fetching ----

/** A route answered with an error body (4xx/5xx) or did not answer JSON. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly url: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export type Fetcher = (url: string) => Promise<Response>;

type Params = Record<string, string | number | readonly string[] | undefined | null>;

/** Builds a relative URL; the entry page's <base> points it at the plugin route. */
export function routeUrl(route: string, params: Params = {}): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) for (const item of value) query.append(key, item);
    else query.set(key, String(value));
  }
  const qs = query.toString();
  return qs ? `./${route}?${qs}` : `./${route}`;
}

export interface StepParams {
  run: string;
  tag: string;
}
export interface DeviceParams extends StepParams {
  device: string;
  group: Group;
}

/**
 * Client for the plugin's routes. Responses are cached per URL (steps are
 * immutable once written), so a selection change that needs no new data costs
 * no request; concurrent requests for the same URL share one fetch.
 */
export class Api {
  private readonly cache = new Map<string, Promise<unknown>>();

  constructor(private readonly fetcher: Fetcher = (url) => fetch(url)) {}

  runs(): Promise<RunsResponse> {
    // Runs can appear while TensorBoard is open: never cached.
    return this.get<RunsResponse>(routeUrl('runs'), false);
  }

  /** The step with the largest peak; asked once when the page opens (never cached: runs can appear). */
  defaultStep(): Promise<DefaultStepResponse> {
    return this.get<DefaultStepResponse>(routeUrl('default_step'), false);
  }

  summary(p: StepParams & { group: Group }): Promise<SummaryResponse> {
    return this.get(routeUrl('summary', { run: p.run, tag: p.tag, group: p.group }));
  }

  scopes(p: DeviceParams & { scope: string }): Promise<ScopesResponse> {
    return this.get(routeUrl('scopes', { ...deviceQuery(p), scope: p.scope }));
  }

  scope(p: DeviceParams & { scope: string; top?: number }): Promise<ScopeDetails> {
    return this.get(routeUrl('scope', { ...deviceQuery(p), scope: p.scope, top: p.top }));
  }

  /** The step's curve, or with `window` only that span bucketed (its own `points` buckets; `peak` stays the step's). */
  curve(
    p: DeviceParams & { points: number; breakdown?: string; top?: number; window?: CurveWindow | null; split?: boolean },
  ): Promise<CurveResponse> {
    return this.get(
      routeUrl('curve', {
        ...deviceQuery(p),
        points: p.points,
        breakdown: p.breakdown,
        top: p.top,
        // Children as they are (a scope's own series, to highlight it), not a dominant one's entries in its place.
        split: p.split === false ? 0 : undefined,
        start_us: p.window?.start_us,
        end_us: p.window?.end_us,
      }),
    );
  }

  graph(p: StepParams & { device: string; scope: string; max_nodes?: number; group?: Group }): Promise<GraphResponse> {
    return this.get(
      routeUrl('graph', {
        run: p.run,
        tag: p.tag,
        device: p.device,
        scope: p.scope,
        max_nodes: p.max_nodes,
        group: p.group,
      }),
    );
  }

  /** Step A against a baseline step B under one scope (docs/http_api.md, `compare`). */
  compare(p: CompareParams): Promise<CompareResponse> {
    return this.get(
      routeUrl('compare', {
        run: p.run,
        tag: p.tag,
        device: p.device,
        against_run: p.against_run,
        against_tag: p.against_tag,
        against_device: p.against_device,
        group: p.group,
        scope: p.scope,
        top: p.top,
      }),
    );
  }

  /** The step's peak predicted at another batch size, and the largest batch that fits (docs/http_api.md, `whatif`). */
  whatif(p: WhatIfParams): Promise<WhatIfResponse> {
    return this.get(
      routeUrl('whatif', {
        run: p.run,
        tag: p.tag,
        batch: p.batch,
        tags: p.tags,
        runs: p.runs,
        limit: p.limit,
        device: p.device,
        traced_batch: p.tracedBatch,
      }),
    );
  }

  private get<T>(url: string, cached = true): Promise<T> {
    const hit = cached ? this.cache.get(url) : undefined;
    if (hit) return hit as Promise<T>;
    const pending = this.fetchJson<T>(url);
    if (cached) {
      this.cache.set(url, pending);
      // Failures are not cached, so a retry after a transient error can succeed.
      pending.catch(() => this.cache.delete(url));
    }
    return pending;
  }

  private async fetchJson<T>(url: string): Promise<T> {
    let response: Response;
    try {
      response = await this.fetcher(url);
    } catch (e) {
      throw new ApiError(`network error: ${(e as Error).message}`, 0, url);
    }
    let body: unknown = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      const message =
        body && typeof body === 'object' && typeof (body as ErrorBody).error === 'string'
          ? (body as ErrorBody).error
          : `HTTP ${response.status} ${response.statusText}`.trim();
      throw new ApiError(message, response.status, url);
    }
    if (body === null) throw new ApiError('response is not JSON', response.status, url);
    return body as T;
  }
}

function deviceQuery(p: DeviceParams): Params {
  return { run: p.run, tag: p.tag, device: p.device, group: p.group };
}
