// Layered layout of the collapsed graph (dagre), computed once per graph
// response: a selection change restyles boxes and never re-lays them out.

import dagre from '@dagrejs/dagre';
import type { GraphEdge, GraphNode, GraphResponse } from '../api';
import { formatBytes } from '../format';
import { rankingFigure } from './peak-figures';

export interface PlacedNode {
  node: GraphNode;
  /** Centre and size, in layout pixels. */
  x: number;
  y: number;
  width: number;
  height: number;
}
export interface PlacedEdge {
  edge: GraphEdge;
  points: { x: number; y: number }[];
}
export interface GraphLayout {
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

export const BOX_HEIGHT = 38;
const CHAR_PX = 7;
const MIN_BOX_WIDTH = 70;
const MAX_BOX_WIDTH = 220;

/** Box width from the label length, so names fit without measuring text in the DOM. */
export function boxWidth(label: string): number {
  return Math.max(MIN_BOX_WIDTH, Math.min(MAX_BOX_WIDTH, label.length * CHAR_PX + 20));
}

/** The bytes a box is shaded and labelled by: at peak, or allocated for a trace without a curve. */
export function boxBytes(node: GraphNode, hasCurve = true): number {
  return node[rankingFigure(hasCurve)];
}

/** The second line of a box: its bytes at the peak (allocated, said so, without a curve) and its op type. */
export function boxSubLabel(node: GraphNode, hasCurve = true): string {
  const bytes = hasCurve ? formatBytes(node.at_peak_bytes) : `${formatBytes(node.allocated_bytes)} allocated`;
  return `${bytes}${node.op_type ? ` · ${node.op_type}` : ''}`;
}

/** The figures of a box's tooltip, leaving out at peak when the trace has no curve. */
export function boxFiguresText(node: GraphNode, hasCurve = true): string {
  const parts = [`allocated ${formatBytes(node.allocated_bytes)}`, `output ${formatBytes(node.output_bytes)}`];
  if (hasCurve) parts.unshift(`at peak ${formatBytes(node.at_peak_bytes)}`);
  return parts.join(' · ');
}

const MARGIN = 12;
const GAP_X = 18;
const GAP_Y = 18;
/** Boxes without edges fill rows about this much wider than tall (the graph panel's shape). */
const LOOSE_ASPECT = 2;

/**
 * Boxes joined by edges are layered by dagre; boxes no edge touches (a TF2 run's top level: the model,
 * `gradient_tape`, the optimizer, from the trace) fill rows below them, in the response's order
 * (largest first), rather than one row dagre would make of them, wider than any panel.
 */
export function layoutGraph(graph: GraphResponse, hasCurve = true): GraphLayout {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: 'TB', nodesep: GAP_X, ranksep: 36, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(graph.nodes.map((node) => node.id));
  const edges = graph.edges.filter((e) => ids.has(e.source) && ids.has(e.target) && e.source !== e.target);
  const joined = new Set(edges.flatMap((e) => [e.source, e.target]));
  // The second line is a size smaller: about 0.9 of a name character per character.
  const widthOf = (node: GraphNode) =>
    Math.max(boxWidth(node.name), Math.min(MAX_BOX_WIDTH, Math.ceil(boxSubLabel(node, hasCurve).length * CHAR_PX * 0.9) + 20));
  const loose = graph.nodes.filter((node) => !joined.has(node.id));
  const layered = loose.length > 1 ? graph.nodes.filter((node) => joined.has(node.id)) : graph.nodes;
  for (const node of layered) g.setNode(node.id, { width: widthOf(node), height: BOX_HEIGHT });
  for (const e of edges) g.setEdge(e.source, e.target, { weight: e.count });
  dagre.layout(g);

  const placed = new Map<string, PlacedNode>();
  for (const node of layered) {
    const n = g.node(node.id) as { x: number; y: number; width: number; height: number };
    placed.set(node.id, { node, x: n.x, y: n.y, width: n.width, height: n.height });
  }
  const info = g.graph() as { width?: number; height?: number };
  let width = layered.length ? info.width ?? 0 : 0;
  let height = layered.length ? info.height ?? 0 : 0;
  if (layered !== graph.nodes) {
    const widths = loose.map(widthOf);
    const area = widths.reduce((sum, w) => sum + (w + GAP_X) * (BOX_HEIGHT + GAP_Y), 0);
    const rowWidth = Math.max(width - 2 * MARGIN, Math.sqrt(area * LOOSE_ASPECT), Math.max(...widths));
    let x = 0;
    let y = layered.length ? height : MARGIN;
    loose.forEach((node, i) => {
      const w = widths[i]!;
      if (x > 0 && x + w > rowWidth) {
        x = 0;
        y += BOX_HEIGHT + GAP_Y;
      }
      placed.set(node.id, { node, x: MARGIN + x + w / 2, y: y + BOX_HEIGHT / 2, width: w, height: BOX_HEIGHT });
      x += w + GAP_X;
      width = Math.max(width, 2 * MARGIN + x - GAP_X);
    });
    height = y + BOX_HEIGHT + MARGIN;
  }
  const nodes = graph.nodes.map((node) => placed.get(node.id)!);
  const placedEdges: PlacedEdge[] = edges.map((edge) => {
    const e = g.edge(edge.source, edge.target) as { points?: { x: number; y: number }[] } | undefined;
    return { edge, points: e?.points ?? [] };
  });
  return { nodes, edges: placedEdges, width, height };
}
