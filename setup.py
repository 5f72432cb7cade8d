"""tb-memory: a TensorBoard plugin that shows where a TensorFlow model's memory goes.

`pip install .` builds the TypeScript frontend (node + npm) into
tb_memory_plugin/static/index.js and ships it in the wheel.
"""

import os
import shutil
import subprocess

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
FRONTEND = os.path.join(HERE, "frontend")
BUNDLE = os.path.join(HERE, "tb_memory_plugin", "static", "index.js")


class BuildWithFrontend(build_py):
    """Builds the frontend bundle before the Python files are collected."""

    def run(self):
        if os.path.isdir(FRONTEND):
            npm = shutil.which("npm")
            if npm is None:
                raise SystemExit(
                    "tb-memory: building the Memory tab needs Node.js (20+) and npm on PATH.\n"
                    "Install them (e.g. `apt-get install nodejs npm`) and run `pip install .` again."
                )
            if not os.path.isdir(os.path.join(FRONTEND, "node_modules")):
                subprocess.check_call([npm, "ci", "--no-audit", "--no-fund"], cwd=FRONTEND)
            subprocess.check_call([npm, "run", "build"], cwd=FRONTEND)
        if not os.path.isfile(BUNDLE):
            raise SystemExit(f"tb-memory: the frontend bundle {BUNDLE} was not built")
        super().run()


setup(
    name="tb-memory",
    version="0.1.0",
    description="TensorBoard plugin: where a TensorFlow step's memory goes (scopes, op types, curve, peak)",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    if os.path.exists(os.path.join(HERE, "README.md")) else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tb_memory_plugin", "tb_memory_plugin.*"]),
    package_data={"tb_memory_plugin": ["static/index.js"]},
    python_requires=">=3.9",
    install_requires=["tensorboard>=2.12", "protobuf>=3.20", "werkzeug>=1.0", "numpy>=1.22"],
    extras_require={"test": ["pytest>=7", "hypothesis>=6", "playwright>=1.40", "tensorflow-cpu>=2.12"]},
    entry_points={
        "tensorboard_plugins": ["memory = tb_memory_plugin.loader:MemoryPluginLoader"],
        "console_scripts": ["tb-memory = tb_memory_plugin.cli:main"],
    },
    cmdclass={"build_py": BuildWithFrontend},
)
