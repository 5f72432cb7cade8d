"""Trace sources: one importer per trace format, each producing a `trace.Trace`.

- `run_metadata`: TF1-style `Session.run` step stats (RunMetadata blobs
  written by `FileWriter.add_run_metadata`).
- `xplane`: the TF2 profiler's XSpace files (`plugins/profile/<session>/
  <host>.xplane.pb`, Keras `TensorBoard(profile_batch=...)`,
  `tf.profiler.experimental`): one Trace per profiled step.

Everything downstream (analysis, reports, routes, CLI) reads only the
`Trace` columns, so a new format plugs in here and nowhere else
(docs/architecture.md).
"""
