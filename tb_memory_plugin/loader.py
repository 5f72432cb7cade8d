"""Entry point named in setup.py: imports the plugin lazily.

An ImportError here would stop TensorBoard from starting, so the heavy
modules (numpy, protos, the plugin) load only in `load()`, and a failure
there disables the Memory tab instead of TensorBoard.
"""

import logging

from tensorboard.plugins import base_plugin

logger = logging.getLogger(__name__)


class MemoryPluginLoader(base_plugin.TBLoader):
    def load(self, context):
        try:
            from tb_memory_plugin.plugin import MemoryPlugin
        except ImportError as exc:
            logger.warning("tb-memory: the Memory tab is disabled: %s", exc)
            return None
        return MemoryPlugin(context)
