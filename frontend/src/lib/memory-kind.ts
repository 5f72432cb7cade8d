// Which memory a memory space holds: the device's own, or host memory (a
// CPU's, or host memory pinned for an accelerator: `cuda_host_bfc` lives on a
// GPU device but is host RAM).

import type { DeviceSummary, MemoryKind } from '../api';

/** The server's `memory_kind` when it sends one, else read from the allocator's name. */
export function memoryKind(space: Pick<DeviceSummary, 'allocator' | 'memory_kind'>): MemoryKind {
  if (space.memory_kind === 'host' || space.memory_kind === 'device') return space.memory_kind;
  return space.allocator.toLowerCase().includes('host') ? 'host' : 'device';
}

/**
 * Host memory held for an accelerator (pinned, `cuda_host_bfc`): labelled
 * "host memory" so it is never read as the GPU's own. A CPU's memory is host
 * memory by nature and needs no label.
 */
export function isPinnedHost(space: Pick<DeviceSummary, 'allocator' | 'memory_kind' | 'device_type'>): boolean {
  return memoryKind(space) === 'host' && space.device_type.toUpperCase() !== 'CPU';
}
