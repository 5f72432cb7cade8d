// The page's CSS, injected as one <style> element (no external files: TensorBoard's CSP allows no CDN).

// The dark palette: the system's dark scheme, or TensorBoard's dark mode where it is on.
const DARK = `
    --bg: #1e1f22; --panel: #26282c; --fg: #e6e6e6; --muted: #a2a8b3; --border: #3c4048;
    --accent: #ff9f43; --accent-soft: rgba(255,159,67,0.18); --select: #8ab4f8; --select-soft: rgba(138,180,248,0.18);
    --curve: #8ab4f8; --curve-band: rgba(138,180,248,0.22); --peak: #f28b82; --error-bg: #5c1e1b; --error-fg: #f6aea9;
    --focus: #8ab4f8; --tile-text: #111; --box: #2d3036; --edge: #80868b; --code-bg: #2f3238;`;

export const CSS = `
:root {
  color-scheme: light dark;
  --bg: #ffffff; --panel: #f7f7f9; --fg: #1f2328; --muted: #5c6470; --border: #d6d9de;
  --accent: #e8710a; --accent-soft: rgba(232,113,10,0.16); --select: #1a73e8; --select-soft: rgba(26,115,232,0.14);
  --curve: #1a73e8; --curve-band: rgba(26,115,232,0.18); --peak: #d93025; --error-bg: #fce8e6; --error-fg: #a50e0e;
  --focus: #1a73e8; --tile-text: #111; --box: #ffffff; --edge: #9aa0a6; --code-bg: #eef0f3;
}
@media (prefers-color-scheme: dark) {
  :root:not([data-theme="light"]) { ${DARK} }
}
/* TensorBoard's own dark-mode toggle (host.followHostTheme), whatever the system's scheme. */
:root[data-theme="dark"] { color-scheme: dark; ${DARK} }
:root[data-theme="light"] { color-scheme: light; }
* { box-sizing: border-box; }
html, body { margin: 0; background: var(--bg); color: var(--fg); }
body { font: 13px/1.4 Roboto, "Segoe UI", system-ui, sans-serif; }
button, select, input { font: inherit; color: inherit; }
button, select { background: var(--panel); border: 1px solid var(--border); border-radius: 4px; padding: 3px 8px; }
button:not(:disabled) { cursor: pointer; }
button:disabled { opacity: 0.5; }
:focus-visible { outline: 2px solid var(--focus); outline-offset: 2px; }
code, pre { font-family: "Roboto Mono", ui-monospace, Menlo, monospace; font-size: 12px; }
pre { background: var(--code-bg); padding: 8px 10px; border-radius: 4px; overflow-x: auto; white-space: pre-wrap; }
.mem-root { display: flex; flex-direction: column; gap: 6px; padding: 6px 12px 16px; min-width: 0; }
.mem-header { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; }
.mem-header h1 { font-size: 16px; margin: 0 8px 0 0; font-weight: 500; }
.picker { display: inline-flex; gap: 6px; align-items: center; }
.picker label { color: var(--muted); }
.picker select { max-width: 200px; }
.picker #mem-compare { max-width: 140px; }
/* One line whatever it says (the full text is its title): a long message never pushes the page down. */
.header-end { margin-left: auto; flex: 1 1 60px; min-width: 60px; display: flex; gap: 10px; align-items: baseline; justify-content: flex-end; }
.status { color: var(--muted); flex: 1 1 auto; min-width: 0; text-align: right; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.status[data-kind="error"] { color: var(--error-fg); }
.view-link { flex: 0 0 auto; font-size: 12px; }
/* Line 1 (the peak, the op at it, the biggest holder) wraps rather than cut an item: the names
   must show their layer and their own name. Line 2 (how the figures hold together, notes) stays
   one row from 1000 px, its notes cut with an ellipsis (full text in their titles). */
.summary { display: flex; flex-direction: column; gap: 1px; padding: 3px 10px; background: var(--panel); border: 1px solid var(--border); border-radius: 6px; min-width: 0; }
.summary .summary-line { display: flex; flex-wrap: wrap; gap: 0 18px; align-items: baseline; line-height: 20px; min-width: 0; }
.summary .summary-line > * { flex: 0 1 auto; min-width: 0; max-width: 100%; }
.summary .summary-line.secondary { flex-wrap: nowrap; white-space: nowrap; overflow: hidden; }
.summary .summary-line.secondary > * { flex: 0 0 auto; }
.summary .summary-note-line { white-space: normal; line-height: 16px; padding: 1px 0 2px; }
.summary .summary-line > .shrink { flex: 0 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.summary .summary-line > .opening { flex: 0 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; flex-shrink: 0.1; }
/* A name between a label and a suffix, on a row too narrow for it alone: the path before its
   last "/" gives way first, then the last part. */
.summary .summary-name-item { display: inline-flex; align-items: baseline; white-space: pre; }
.summary .summary-name-item > .label { flex: 0 0 auto; }
.summary .summary-name-item > .name { flex: 0 1 auto; min-width: 0; display: inline-flex; overflow: hidden; }
.summary .summary-name-item .name-head { flex: 0 1000 auto; min-width: 1.5em; overflow: hidden; text-overflow: ellipsis; }
.summary .summary-name-item .name-tail { flex: 0 0 auto; max-width: 100%; overflow: hidden; text-overflow: ellipsis; }
.summary .clickable { cursor: pointer; }
.summary .clickable:hover .name, .summary .summary-name-item:focus-visible .name { text-decoration: underline; }
.summary .summary-line.secondary { font-size: 12px; line-height: 17px; }
.summary .figure b { font-size: 15px; font-weight: 600; }
.summary .note { color: var(--muted); }
.summary .note.missing { color: var(--error-fg); }
.summary .identity[data-holds="false"] { color: var(--error-fg); }
.layout { display: grid; grid-template-columns: minmax(0, 1fr) 400px; gap: 8px; align-items: start; }
/* The single step's panels are the grid's own items (not a column of its own), so that below
   1000 px the details can go between the treemap and the panels on what to change. The last
   row takes what the details need beyond the other rows: those keep their own heights. */
.single-layout {
  grid-template-areas: "curve side" "maps side" "fit side" "resident side" "ops side";
  grid-template-rows: auto auto auto auto 1fr;
}
.area-curve { grid-area: curve; min-width: 0; }
.area-maps { grid-area: maps; }
.area-side { grid-area: side; }
.area-fit { grid-area: fit; }
.area-resident { grid-area: resident; min-width: 0; }
.area-ops { grid-area: ops; min-width: 0; }
.main-column { display: flex; flex-direction: column; gap: 8px; min-width: 0; }
.side-column { display: flex; flex-direction: column; gap: 8px; min-width: 0; }
.panel { contain: layout style; position: relative; background: var(--bg); border: 1px solid var(--border); border-radius: 6px; padding: 6px 8px; min-width: 0; }
.panel h2 { font-size: 13px; font-weight: 600; margin: 0 0 4px; }
.panel-toolbar { display: flex; flex-wrap: wrap; gap: 6px 10px; align-items: center; margin-bottom: 4px; min-height: 24px; }
/* A toolbar that must stay one row: its text items shrink with an ellipsis instead of wrapping. */
.panel-toolbar.one-row { flex-wrap: nowrap; white-space: nowrap; }
.panel-toolbar.one-row > * { flex: 0 0 auto; }
.panel-toolbar.one-row > .shrink { flex: 0 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.panel-toolbar.bottom { margin: 4px 0 0; font-size: 12px; }
.panel-toolbar select { padding: 1px 4px; }
.panel-toolbar .spacer { flex: 1; }
.panel-toolbar label { color: var(--muted); display: inline-flex; gap: 4px; align-items: center; }
.panel-error { background: var(--error-bg); color: var(--error-fg); padding: 6px 8px; border-radius: 4px; margin-bottom: 6px; white-space: pre-wrap; }
.is-loading::after { content: "Loading…"; position: absolute; top: 6px; right: 10px; padding: 1px 8px; border-radius: 10px; background: var(--select-soft); color: var(--fg); font-size: 12px; pointer-events: none; }
.is-loading > .panel-body { opacity: 0.55; transition: opacity 0.15s; }
.curve-note { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center; padding: 0 24px; text-align: center; }
.muted { color: var(--muted); }
.hidden { display: none !important; }
.two-up { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 8px; }

/* curve */
.curve-svg { display: block; width: 100%; user-select: none; cursor: crosshair; }
.curve-svg .axis text { fill: var(--muted); font-size: 10px; }
.curve-svg .axis line, .curve-svg .axis path { stroke: var(--border); }
.curve-svg .grid line { stroke: var(--border); stroke-opacity: 0.5; }
.curve-svg .band { fill: var(--curve-band); }
.curve-svg .line { fill: none; stroke: var(--curve); stroke-width: 1.5; }
.curve-svg .snapshots { fill: none; stroke: var(--muted); stroke-width: 1; stroke-dasharray: 2 3; }
.curve-svg .reserved { fill: none; stroke: var(--muted); stroke-width: 0.75; }
.curve-svg .capacity line { stroke: var(--peak); stroke-width: 1; }
.curve-svg .capacity text { fill: var(--peak); font-size: 10px; }
.curve-svg .capacity.host line { stroke: var(--muted); }
.curve-svg .capacity.host text { fill: var(--muted); }
.curve-svg .highlight { fill: var(--accent-soft); stroke: var(--accent); stroke-width: 1.2; }
.curve-svg .span { fill: var(--select-soft); }
.curve-svg .span-edge { stroke: var(--select); stroke-dasharray: 3 3; }
.curve-svg .peak line { stroke: var(--peak); stroke-dasharray: 4 3; }
.curve-svg .peak circle { fill: var(--peak); }
.curve-svg .peak text { fill: var(--peak); font-size: 11px; font-weight: 600; }
.curve-svg .hover line { stroke: var(--muted); }
.curve-svg .hover circle { fill: var(--curve); }
.curve-svg .drag { fill: var(--select-soft); stroke: var(--select); }
.curve-svg .layer { stroke: var(--bg); stroke-width: 0.5; fill-opacity: 0.8; }
.curve-svg .layer.layer-selected { stroke: var(--accent); stroke-width: 2.5; fill-opacity: 1; }
.curve-tooltip { position: absolute; pointer-events: none; background: var(--panel); border: 1px solid var(--border); border-radius: 4px; padding: 4px 8px; font-size: 12px; max-width: 420px; box-shadow: 0 2px 6px rgba(0,0,0,0.2); z-index: 5; overflow-wrap: anywhere; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 12px; font-size: 12px; color: var(--muted); }
.legend:empty { display: none; }
.legend-selection { display: inline-block; color: var(--fg); }
/* In the curve's toolbar the caption gives way first: the selected scope's name matters more. */
.panel-toolbar.one-row > .legend-selection { flex-shrink: 0.25; }
.legend .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: -1px; }

/* treemap */
/* One row that scrolls sideways when the path is deep (it is scrolled to its end on each render). */
.breadcrumbs { display: flex; flex-wrap: nowrap; gap: 2px; align-items: center; font-size: 12px; overflow-x: auto; scrollbar-width: thin; }
.breadcrumbs > * { flex: 0 0 auto; }
.panel-toolbar.one-row > .breadcrumbs { overflow-x: auto; overflow-y: hidden; text-overflow: clip; }
.breadcrumbs button { border: none; background: none; color: var(--select); padding: 1px 3px; }
.breadcrumbs button[aria-current="page"] { color: var(--fg); font-weight: 600; }
.breadcrumbs .sep { color: var(--muted); }
.treemap-area { contain: strict; position: relative; height: 330px; overflow: hidden; border-radius: 4px; }
.tile { position: absolute; overflow: hidden; border: 1px solid var(--bg); padding: 2px 4px; font-size: 11px; line-height: 1.25; color: var(--tile-text); cursor: pointer; }
.tile .name { font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; display: block; }
.tile .bytes { white-space: nowrap; display: block; }
.tile.self { background-image: repeating-linear-gradient(45deg, rgba(255,255,255,0.35) 0 4px, transparent 4px 8px); }
.tile-inside { position: absolute; pointer-events: none; }
.subtile { position: absolute; box-sizing: border-box; overflow: hidden; border: 1px solid rgba(255,255,255,0.55); padding: 0 2px; font-size: 10px; line-height: 1.2; color: var(--tile-text); }
.subtile .name { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; display: block; }
.subtile .bytes { white-space: nowrap; overflow: hidden; display: block; opacity: 0.85; }
.subtile.clickable { cursor: pointer; pointer-events: auto; }
.subtile.clickable:hover { border-color: var(--tile-text); }
.subtile.selected { outline: 2px solid var(--accent); outline-offset: -2px; }
.subtile.rest { background-image: repeating-linear-gradient(45deg, rgba(255,255,255,0.3) 0 3px, transparent 3px 6px); }
.tile.holds { box-shadow: inset 0 0 0 1px rgba(0,0,0,0.25); }
.tile.more { background: var(--panel) !important; color: var(--muted); border-style: dashed; border-color: var(--border); }
.tile.selected { outline: 3px solid var(--select); outline-offset: -3px; z-index: 2; }
.tile:focus-visible { outline: 3px solid var(--focus); outline-offset: -3px; z-index: 3; }
.more-list { max-height: 160px; overflow: auto; display: flex; flex-wrap: wrap; gap: 3px; margin-top: 4px; padding: 4px; border: 1px dashed var(--border); border-radius: 4px; }
.more-list .more-item { display: inline-flex; gap: 6px; font-size: 11px; padding: 1px 6px; max-width: 260px; }
.more-list .more-item[aria-pressed="true"] { border-color: var(--select); background: var(--select-soft); }
.more-list .more-item .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.treemap-note { font-size: 12px; color: var(--muted); margin-top: 4px; }
.more-button { margin-left: auto; font-size: 11px; padding: 1px 6px; color: var(--muted); border-style: dashed; }
.more-button[aria-expanded="true"] { border-style: solid; color: var(--fg); }

/* graph */
.graph-area { contain: strict; position: relative; height: 330px; overflow: hidden; border-radius: 4px; background: var(--panel); }
.graph-area svg { display: block; width: 100%; height: 100%; cursor: grab; }
.graph-area .edge { fill: none; stroke: var(--edge); stroke-width: 1.2; }
.graph-area .box rect { stroke: var(--border); stroke-width: 1; }
.graph-area .box text { fill: var(--fg); font-size: 12px; pointer-events: none; }
.graph-area .box .sub { fill: var(--muted); font-size: 11px; }
.whatif-skipped { font-size: 12px; white-space: pre-line; }
.graph-note { font-size: 12px; color: var(--muted); margin-top: 4px; }
.graph-area .box { cursor: pointer; }
.graph-area .box.selected rect { stroke: var(--select); stroke-width: 3; }
.graph-area .box:focus { outline: none; }
.graph-area .box:focus-visible rect { stroke: var(--focus); stroke-width: 3; stroke-dasharray: 4 2; }
.graph-area .box.other rect { stroke-dasharray: 4 3; }
a.link { color: var(--select); }

/* details and tables */
.details-title { font-weight: 600; overflow-wrap: anywhere; }
.kv { width: 100%; border-collapse: collapse; font-size: 12px; }
.kv td, .kv th { padding: 2px 4px; border-bottom: 1px solid var(--border); vertical-align: top; text-align: left; }
.kv td.num, .kv th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.kv .explain { color: var(--muted); font-size: 11px; }
/* Tables never widen their panel: what does not fit scrolls inside this box. */
.table-wrap { contain: content; max-width: 100%; max-height: 300px; overflow: auto; border: 1px solid var(--border); border-radius: 4px; }
table.data { width: 100%; border-collapse: collapse; font-size: 12px; }
table.data th { position: sticky; top: 0; background: var(--panel); text-align: left; padding: 0; border-bottom: 1px solid var(--border); }
table.data th button { width: 100%; border: none; border-radius: 0; background: none; text-align: inherit; padding: 3px 6px; font-weight: 600; }
table.data.compact th button { padding: 3px 3px; white-space: nowrap; }
/* Names and op types break only where breakableText put a <wbr> (after "/", inside a long
   component after "_"), never inside a word ("Conv2DBackpropFilte r"): what is still too wide
   scrolls sideways in the table's box. */
table.data.compact td { padding: 2px 3px; }
.table-note { font-size: 11px; color: var(--muted); margin-top: 2px; }
table.data th.num, table.data td.num { text-align: right; }
table.data td { padding: 2px 6px; border-bottom: 1px solid var(--border); vertical-align: top; overflow-wrap: normal; word-break: normal; }
table.data td.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
table.data td.raw { font-family: "Roboto Mono", ui-monospace, monospace; font-size: 11px; min-width: 230px; }
table.data.compact td.raw { min-width: 130px; }
.bar { height: 8px; border-radius: 2px; background: var(--accent); display: inline-block; vertical-align: middle; }
.cat-row { display: grid; grid-template-columns: 100px 1fr 80px; gap: 6px; align-items: center; font-size: 12px; }
.stack-bar { display: flex; height: 12px; border-radius: 3px; overflow: hidden; background: var(--panel); margin: 4px 0; }
.empty-state { padding: 16px 20px; border: 1px dashed var(--border); border-radius: 6px; background: var(--panel); max-width: 900px; }
.empty-state h2 { margin-top: 0; font-size: 15px; }
.empty-state .message { white-space: pre-wrap; overflow-wrap: anywhere; }
.empty-state .empty-state-open { display: flex; flex-wrap: wrap; gap: 8px; }
.empty-state .error-text { background: var(--error-bg); color: var(--error-fg); }
.exports { display: flex; gap: 6px; }

/* findings, what-if, model memory */
/* The list takes the panel's height, which its row gets from the what-if beside it: its cards
   scroll only past that (a flex basis of 0 adds nothing to the row's height), at least 200 px. */
.findings-panel { display: flex; flex-direction: column; }
.findings-toolbar { gap: 0 10px; }
.findings-toolbar .findings-caption { font-size: 12px; }
.findings-list { display: flex; flex-direction: column; gap: 6px; flex: 1 1 0px; min-height: 200px; overflow: auto; }
.finding { border: 1px solid var(--border); border-radius: 4px; padding: 4px 8px; font-size: 12px; overflow-wrap: break-word; }
.finding.clickable { cursor: pointer; }
.finding.clickable:hover { background: var(--select-soft); }
.finding.selected { border-color: var(--select); background: var(--select-soft); }
.finding-head { display: flex; flex-wrap: wrap; gap: 2px 10px; align-items: baseline; }
.finding-bytes { font-variant-numeric: tabular-nums; font-weight: 600; color: var(--peak); }
.finding-scope { color: var(--muted); }
.finding-message { margin-top: 2px; }
.finding-suggestion { margin-top: 2px; }
.findings-more > summary { cursor: pointer; font-size: 12px; color: var(--muted); padding: 2px 0; }
.findings-more-list { display: flex; flex-direction: column; gap: 6px; margin-top: 4px; }
.whatif-batch { width: 80px; }
.whatif-limit { width: 90px; }
.panel-toolbar input { padding: 1px 4px; border: 1px solid var(--border); border-radius: 4px; background: var(--panel); }
.whatif-runs { font-size: 12px; margin-bottom: 4px; }
.whatif-runs label { display: flex; gap: 6px; align-items: flex-start; }
.whatif-runs select { min-width: 160px; max-width: 100%; }
.whatif-input-note { font-size: 12px; }
.panel-toolbar input[aria-invalid="true"] { border-color: var(--error-fg); }
[data-stale] .whatif-headline, [data-stale] .whatif-meta, [data-stale] .whatif-svg { opacity: 0.5; }
.whatif-headline b { font-size: 14px; }
.whatif-meta { display: flex; flex-wrap: wrap; gap: 2px 14px; font-size: 12px; color: var(--muted); }
.whatif-notes { margin: 2px 0 0; padding-left: 16px; font-size: 12px; color: var(--muted); }
.whatif-notes:empty { display: none; }
.curve-svg.whatif-svg { cursor: default; }
.curve-svg .whatif-max line { stroke: var(--select); stroke-dasharray: 4 3; }
.curve-svg .whatif-max text { fill: var(--select); font-size: 10px; }
.curve-svg .whatif-points circle { fill: var(--curve); }
.curve-svg .whatif-traced rect { fill: var(--accent); }
/* The asked batch's label may cross the line it labels: a halo of the background keeps it legible. */
.curve-svg.whatif-svg .peak text { paint-order: stroke; stroke: var(--bg); stroke-width: 3px; stroke-linejoin: round; }
.resident-line { font-size: 12px; }
.peak-mode { padding: 0 6px; font-size: 11px; }

/* compare mode */
.compare { display: flex; flex-direction: column; gap: 6px; }
.compare-bar { display: flex; gap: 10px; align-items: center; }
.compare-bar .spacer { flex: 1; }
.compare-heading { display: flex; flex-wrap: wrap; gap: 2px 18px; align-items: baseline; min-width: 0; }
.curve-svg .compare-line { fill: none; stroke-width: 1.5; }
.curve-svg .compare-line-a { stroke: var(--curve); }
.curve-svg .compare-line-b { stroke: var(--accent); stroke-dasharray: 5 3; }
.curve-svg .compare-peak-a circle { fill: var(--curve); }
.curve-svg .compare-peak-b circle { fill: var(--accent); }
.curve-svg .highlight-a { fill: var(--select-soft); stroke: var(--curve); stroke-width: 0.75; }
.curve-svg .highlight-b { fill: var(--accent-soft); stroke: var(--accent); stroke-width: 0.75; stroke-dasharray: 3 2; }
.legend .swatch-a { background: var(--curve); }
.legend .swatch-b { background: repeating-linear-gradient(90deg, var(--accent) 0 5px, transparent 5px 8px); }
.compare-table { max-height: 360px; overflow: auto; }
/* The table of changes gets the wider half: its scope names break only after "/", and its four
   figure columns should fit beside them without scrolling at 800 px and up. */
.compare-two-up { grid-template-columns: minmax(0, 3fr) minmax(0, 5fr); }
/* Between the narrow layout and a wide window the main column is narrower than at 800 px (the details
   take the right): the treemap above the table, each the column's width (at 1100 px the treemap's
   path had been cut to "(al" and the table's A and B columns off its edge: trial AM). */
@media (min-width: 1000px) and (max-width: 1299px) { .compare-two-up { grid-template-columns: minmax(0, 1fr); } }
table.data tr.selected td { background: var(--select-soft); }

/* Narrow (TensorBoard's iframe at 800 px): one column, the details under the curve and the
   treemap; the summary's lines wrap rather than cut what they say. Nothing scrolls sideways. */
@media (max-width: 999px) {
  .layout, .single-layout { grid-template-columns: minmax(0, 1fr); }
  .single-layout { grid-template-areas: "curve" "maps" "side" "fit" "resident" "ops"; grid-template-rows: none; }
  .summary .summary-line.secondary { flex-wrap: wrap; white-space: normal; overflow: visible; }
  .summary .summary-line.secondary > * { flex: 0 1 auto; }
}
/* Narrower still: two panels side by side would be too thin to read. */
@media (max-width: 639px) {
  .two-up { grid-template-columns: minmax(0, 1fr); }
  .findings-list { flex: 0 0 auto; max-height: 480px; }
}
`;
