/// <reference types="node" />
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Names come from user files and the iframe is same-origin with TensorBoard:
// no source file may render text as HTML.
const SINKS = [/\.innerHTML\b/, /\.outerHTML\b/, /\.html\(/, /insertAdjacentHTML/, /document\.write/, /DOMParser/, /createContextualFragment/];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('no HTML sinks', () => {
  const files = sourceFiles(fileURLToPath(new URL('.', import.meta.url)));
  it('finds the sources', () => {
    expect(files.length).toBeGreaterThan(10);
  });
  it.each(files)('%s renders text only', (file) => {
    const text = readFileSync(file, 'utf8');
    for (const sink of SINKS) expect(text).not.toMatch(sink);
  });
});
