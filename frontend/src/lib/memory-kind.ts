// Which memory a memory space holds: the device's own, or host memory pinned
// for it (`cuda_host_bfc` lives on a GPU device but is host RAM).

import type { DeviceSummary, MemoryKind } from '../api';

/** The server's `memory_kind` when it sends one, else read from the allocator's name. */
export function memoryKind(space: Pick<DeviceSummary, 'allocator' | 'memory_kind'>): MemoryKind {
  if (space.memory_kind === 'host' || space.memory_kind === 'device') return space.memory_kind;
  return space.allocator.toLowerCase().includes('host') ? 'host' : 'device';
}

/** "host memory", "GPU memory", "CPU memory": what the space's bytes are. */
export function memoryLabel(space: Pick<DeviceSummary, 'allocator' | 'memory_kind' | 'device_type'>): string {
  return memoryKind(space) === 'host' ? 'host memory' : `${space.device_type || 'device'} memory`;
}
