import { describe, expect, it } from 'vitest';
import { isPinnedHost, memoryKind } from './memory-kind';

describe('memoryKind', () => {
  it('reads pinned host memory from the allocator name', () => {
    expect(memoryKind({ allocator: 'cuda_host_bfc' })).toBe('host');
    expect(memoryKind({ allocator: 'gpu_host_bfc' })).toBe('host');
    expect(memoryKind({ allocator: 'GPU_0_bfc' })).toBe('device');
    expect(memoryKind({ allocator: 'mklcpu' })).toBe('device');
  });
  it('takes the server’s memory_kind first', () => {
    expect(memoryKind({ allocator: 'cuda_host_bfc', memory_kind: 'device' })).toBe('device');
    expect(memoryKind({ allocator: 'GPU_0_bfc', memory_kind: 'host' })).toBe('host');
  });
});

describe('isPinnedHost', () => {
  it('marks host memory held for an accelerator, never the accelerator’s own', () => {
    expect(isPinnedHost({ allocator: 'cuda_host_bfc', device_type: 'GPU' })).toBe(true);
    expect(isPinnedHost({ allocator: 'cuda_host_bfc', device_type: 'GPU', memory_kind: 'host' })).toBe(true);
    expect(isPinnedHost({ allocator: 'GPU_0_bfc', device_type: 'GPU' })).toBe(false);
    expect(isPinnedHost({ allocator: 'GPU_0_bfc', device_type: 'GPU', memory_kind: 'device' })).toBe(false);
  });
  it('leaves a CPU’s memory unlabelled, whatever the server calls it', () => {
    expect(isPinnedHost({ allocator: 'mklcpu', device_type: 'CPU' })).toBe(false);
    expect(isPinnedHost({ allocator: 'mklcpu', device_type: 'CPU', memory_kind: 'host' })).toBe(false);
  });
});
