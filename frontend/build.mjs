// Bundles src/index.ts into the one ES module TensorBoard loads in the plugin iframe.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const outfile = path.resolve(here, '../tb_memory_plugin/static/index.js');

await build({
  entryPoints: [path.join(here, 'src/index.ts')],
  outfile,
  bundle: true,
  format: 'esm',
  target: 'es2020',
  platform: 'browser',
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  logLevel: 'info',
});
