import { describe, expect, it } from 'vitest';
import { memoryKind, memoryLabel } from './memory-kind';

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

describe('memoryLabel', () => {
  it('labels host memory as such, never as GPU memory', () => {
    expect(memoryLabel({ allocator: 'cuda_host_bfc', device_type: 'GPU' })).toBe('host memory');
    expect(memoryLabel({ allocator: 'GPU_0_bfc', device_type: 'GPU' })).toBe('GPU memory');
    expect(memoryLabel({ allocator: 'mklcpu', device_type: 'CPU' })).toBe('CPU memory');
  });
});
