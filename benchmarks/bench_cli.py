"""`tb-memory summary` wall time for one demo step next to `python -c "import tensorboard"`.

    python benchmarks/bench_cli.py [--rounds 7] [--logdir demo_logs --run unet_b2 --tag step_3]

Each command runs in a fresh process, alternating in every round so that both
see the same minutes of a shared machine; prints every round, the medians and
the median of the rounds' own ratios. `python -c pass` is the interpreter's
own floor. Target (issue 14): one step well under a second.

Bytecode is cached in a temporary `PYTHONPYCACHEPREFIX`, as an installed
package has its `.pyc` files (with `PYTHONDONTWRITEBYTECODE` every run would
compile the repo's modules again, ~0.2 s); `--as-is` keeps the environment.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def wall_time(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--logdir", default=os.path.join(REPO, "demo_logs"))
    parser.add_argument("--run", default="unet_b2")
    parser.add_argument("--tag", default="step_3")
    parser.add_argument("--as-is", action="store_true", help="keep the environment's bytecode settings")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="bench_cli_pycache_") as pycache:
        if not args.as_is:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = pycache
        bench(args, env)


def bench(args: argparse.Namespace, env: dict) -> None:
    commands = {
        "tb-memory summary (one step)": [sys.executable, "-m", "tb_memory_plugin.cli", "summary", args.logdir,
                                         "--run", args.run, "--tag", args.tag],
        'python -c "import tensorboard"': [sys.executable, "-c", "import tensorboard"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    names = list(commands)
    wall_time(commands[names[0]], env)  # warm the file cache and .pyc files
    times: dict[str, list[float]] = {name: [] for name in names}
    print(f"{args.logdir} --run {args.run} --tag {args.tag}, {args.rounds} alternating rounds (seconds)")
    print("round  " + "  ".join(f"{name:>30}" for name in names))
    for round_number in range(args.rounds):
        order = names if round_number % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(wall_time(commands[name], env))
        print(f"{round_number + 1:>5}  " + "  ".join(f"{times[name][-1]:>30.3f}" for name in names))
    print("median " + "  ".join(f"{statistics.median(times[name]):>30.3f}" for name in names))
    ratios = [cli / tensorboard for cli, tensorboard in zip(times[names[0]], times[names[1]])]
    print(f"tb-memory summary / import tensorboard: median of the rounds' ratios {statistics.median(ratios):.1f}x; "
          f"best against best {min(times[names[0]]):.3f} s vs {min(times[names[1]]):.3f} s")


if __name__ == "__main__":
    main()
