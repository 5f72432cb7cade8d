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

export function layoutGraph(graph: GraphResponse, hasCurve = true): GraphLayout {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 36, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set<string>();
  for (const node of graph.nodes) {
    ids.add(node.id);
    // The second line is a size smaller: about 0.9 of a name character per character.
    const width = Math.max(boxWidth(node.name), Math.min(MAX_BOX_WIDTH, Math.ceil(boxSubLabel(node, hasCurve).length * CHAR_PX * 0.9) + 20));
    g.setNode(node.id, { width, height: BOX_HEIGHT });
  }
  const edges = graph.edges.filter((e) => ids.has(e.source) && ids.has(e.target) && e.source !== e.target);
  for (const e of edges) g.setEdge(e.source, e.target, { weight: e.count });
  dagre.layout(g);

  const nodes: PlacedNode[] = graph.nodes.map((node) => {
    const n = g.node(node.id) as { x: number; y: number; width: number; height: number };
    return { node, x: n.x, y: n.y, width: n.width, height: n.height };
  });
  const placedEdges: PlacedEdge[] = edges.map((edge) => {
    const e = g.edge(edge.source, edge.target) as { points?: { x: number; y: number }[] } | undefined;
    return { edge, points: e?.points ?? [] };
  });
  const info = g.graph() as { width?: number; height?: number };
  return { nodes, edges: placedEdges, width: info.width ?? 0, height: info.height ?? 0 };
}
