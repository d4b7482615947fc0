#!/usr/bin/env python3
"""Times TFLM's Python interpreter and hilt's host runtime in one run, model by model.

The README's host speed-ups used to divide hilt's times by the manifest's
`invoke_us_x86_reference_kernels`, which were taken on another machine: a
ratio of figures from two machines says little. This script measures both
sides here and now, interleaved per model and in alternating rounds
(TFLM, hilt, then hilt, TFLM, ...), so that whatever else the machine is
doing weighs on both alike.

- TFLM: the tflite-micro package (reference kernels, pinned in
  ci/requirements-tflm.txt; ci/setup.sh installs it into build/tflm-venv).
  The inputs of the set's first case (step 0) are set once, then only
  `invoke()` runs in the loop; each call is timed alone and the median kept.
  That figure includes the Python call overhead of one `invoke()` call per
  inference, which the script measures on the smallest selected model and
  reports (wrapper method, pybind11 dispatch, clock reads).
- hilt: `hilt bench MODEL --format json` (the release build), whose `median_us` is
  the median per-invoke time of the same kind of loop in Rust. hilt bench
  fills the inputs with its fixed pattern (`host/src/bench.rs`), not the
  case's; `--tflm-inputs pattern` gives TFLM that pattern too, to check
  that the inputs do not move TFLM's figure.

Each side runs `--rounds` rounds per model; a round times `--iterations`
invokes (default: as many as fill `--seconds`). The figure is the median of
the round medians and `spread` is (largest - smallest round median) / figure:
above 10% (beyond +-5%) the row is marked noisy, and a rerun on a quieter
machine is due.

Usage:
  build/tflm-venv/bin/python ci/host-vs-tflm.py [--ops] [--conformance DIR]
      [--models a,b] [--iterations N | --seconds S] [--rounds R]
      [--hilt build/release/hilt] [--json OUT]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# TFLM's arena: room for every model of both sets (the largest needs ~1.3 MB).
TFLM_ARENA_BYTES = 8 * 1024 * 1024
# Spread of the round medians above which a row is marked noisy (+-5%).
NOISY_SPREAD = 0.10
# Bounds of the automatic iteration count per round.
MIN_ITERATIONS = 30
MAX_ITERATIONS = 200_000
BUILD_HILT = "cargo build --release -p hilt -j 1"


class SetupError(Exception):
    """Something the run needs is missing; the message names it and its remedy."""


class MissingTflm(SetupError):
    """The Python running the script has no tflite-micro package."""


class MissingSet(SetupError):
    """A conformance folder has no readable manifest.json."""


class MissingHilt(SetupError):
    """The hilt binary is not where the script looks for it."""


class UnknownModels(SetupError):
    """`--models` names models that no selected set holds."""


class ModelError(Exception):
    """One model could not be timed by one side (`side`: TFLM or hilt);
    `reason` is the short form for the table, the message the whole story."""

    def __init__(self, model, side, reason, detail=""):
        super().__init__(f"{model}: {side}: {reason}" + (f" ({detail})" if detail else ""))
        self.model = model
        self.side = side
        self.reason = reason


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_conformance():
    # HILT_CONFORMANCE_DIR may name several sets (`:`-separated): the first.
    env = os.environ.get("HILT_CONFORMANCE_DIR", "").split(os.pathsep)[0]
    if env:
        return env
    return os.path.normpath(os.path.join(repo_root(), "..", "shared", "conformance"))


def import_tflm():
    """TFLM's Python runtime module and numpy, or MissingTflm naming this Python."""
    try:
        import numpy
        from tflite_micro.python.tflite_micro import runtime
    except ImportError as e:
        venv = os.path.join(repo_root(), "build", "tflm-venv", "bin", "python")
        raise MissingTflm(
            f"{sys.executable} cannot import TFLM's Python interpreter (tflite_micro, numpy: {e}): "
            "run ci/setup.sh, "
            f"which installs it into build/tflm-venv, and run this script with {venv}"
        ) from e
    return runtime, numpy


def tflm_version():
    try:
        from importlib.metadata import version

        return version("tflite-micro")
    except Exception:  # the figure is informative only
        return "unknown"


def read_set(folder):
    """(folder, manifest entries) of one conformance folder."""
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except FileNotFoundError as e:
        raise MissingSet(
            f"conformance set not found: {path} is missing "
            "(pass --conformance DIR or set HILT_CONFORMANCE_DIR)"
        ) from e
    except (OSError, ValueError) as e:
        raise MissingSet(f"conformance manifest {path} is unreadable: {e}") from e
    models = manifest.get("models") if isinstance(manifest, dict) else None
    if not isinstance(models, list):
        raise MissingSet(f"conformance manifest {path} has no \"models\" list")
    return [(folder, entry) for entry in models]


def selected_models(args):
    """(folder, entry) pairs of every model to time, in manifest order."""
    pairs = read_set(args.conformance)
    if args.ops:
        ops = os.path.join(os.path.dirname(os.path.normpath(args.conformance)), "conformance-ops")
        pairs += read_set(ops)
    if not args.models:
        return pairs
    wanted = [name for name in args.models.split(",") if name]
    known = {entry["name"] for _, entry in pairs}
    missing = [name for name in wanted if name not in known]
    if missing:
        sets = args.conformance + (" and its conformance-ops" if args.ops else "")
        raise UnknownModels(f"not in {sets}: {', '.join(missing)}")
    return [(folder, entry) for folder, entry in pairs if entry["name"] in wanted]


def check_hilt(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingHilt(f"hilt binary not found at {path}: build it with `{BUILD_HILT}`")
    return path


def pattern_byte(i):
    """hilt bench's fixed input pattern (host/src/bench.rs), byte i."""
    return (i * 37 + 11) & 0xFF


def pattern_input(np, spec):
    """An input filled as hilt bench fills it: the byte pattern, or for
    float32 the pattern mapped to finite values in [-1, 1)."""
    count = int(np.prod(spec["shape"]))
    dtype = np.dtype(spec["dtype"])
    if dtype == np.float32:
        values = [(pattern_byte(i) - 128.0) / 128.0 for i in range(count)]
        return np.array(values, dtype=np.float32).reshape(spec["shape"])
    raw = bytes(pattern_byte(i) for i in range(count * dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype).reshape(spec["shape"]).copy()


def model_inputs(np, folder, entry, kind):
    """The inputs TFLM gets: step 0 of the first case, or hilt's pattern."""
    step = entry["cases"][0]["steps"][0]
    inputs = []
    for spec in step["inputs"]:
        if kind == "pattern":
            inputs.append(pattern_input(np, spec))
            continue
        path = os.path.join(folder, "cases", entry["name"], spec["file"])
        try:
            value = np.fromfile(path, dtype=spec["dtype"]).reshape(spec["shape"])
        except (OSError, ValueError) as e:
            raise ModelError(entry["name"], "TFLM", f"input {path} unreadable: {e}") from e
        inputs.append(value)
    return inputs


def tflm_interpreter(runtime, np, folder, entry, kind):
    """TFLM's interpreter for the model with its inputs set once."""
    path = os.path.join(folder, entry["model"])
    arena = max(TFLM_ARENA_BYTES, 2 * entry.get("tflm", {}).get("min_arena_bytes", 0))
    try:
        with open(path, "rb") as f:
            interpreter = runtime.Interpreter.from_bytes(f.read(), arena_size=arena)
        for index, value in enumerate(model_inputs(np, folder, entry, kind)):
            interpreter.set_input(value, index)
    except (OSError, RuntimeError, ValueError) as e:
        raise ModelError(entry["name"], "TFLM", f"could not load {path}: {e}") from e
    return interpreter


def timed_calls(call, iterations):
    """Microseconds each of `iterations` calls of `call` took, one by one."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(iterations):
        start = clock()
        call()
        samples.append((clock() - start) / 1e3)
    return samples


def tflm_round(name, interpreter, iterations, warmup):
    """Median µs of one TFLM round of `invoke()` calls."""
    try:
        for _ in range(warmup):
            interpreter.invoke()
        return statistics.median(timed_calls(interpreter.invoke, iterations))
    except RuntimeError as e:
        raise ModelError(name, "TFLM", f"invoke() failed: {e}") from e


def hilt_round(hilt, path, name, iterations, warmup):
    """Median µs of one `hilt bench` round, and its report."""
    cmd = [
        hilt, "bench", path, "--format", "json",
        "--iterations", str(iterations), "--warmup", str(warmup),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        reason = out.stderr.strip().removeprefix("error: ") or f"exit status {out.returncode}"
        raise ModelError(name, "hilt", reason, f"`{' '.join(cmd)}`")
    try:
        report = json.loads(out.stdout)
        return float(report["median_us"]), report
    except (ValueError, KeyError, TypeError) as e:
        raise ModelError(name, "hilt", f"hilt bench printed no median_us: {e}") from e


def iterations_for(median_us, args):
    """The round length: --iterations, or as many invokes as fill --seconds."""
    if args.iterations:
        return args.iterations
    wanted = int(args.seconds * 1e6 / max(median_us, 0.01))
    return max(MIN_ITERATIONS, min(MAX_ITERATIONS, wanted))


def summary(medians):
    """(figure, spread) of a side's round medians."""
    figure = statistics.median(medians)
    spread = (max(medians) - min(medians)) / figure if figure > 0 else 0.0
    return figure, spread


def time_model(ctx, folder, entry):
    """One model's row: both sides in alternating rounds."""
    name = entry["name"]
    path = os.path.join(folder, entry["model"])
    interpreter = tflm_interpreter(ctx.runtime, ctx.np, folder, entry, ctx.args.tflm_inputs)
    args = ctx.args
    # Calibration rounds (untimed in the figures) size the real ones.
    tflm_n = iterations_for(tflm_round(name, interpreter, 10, 3), args)
    hilt_n = iterations_for(hilt_round(ctx.hilt, path, name, 20, 5)[0], args)
    tflm, hilt, report = [], [], None
    for r in range(args.rounds):
        order = ("tflm", "hilt") if r % 2 == 0 else ("hilt", "tflm")
        for side in order:
            if side == "tflm":
                tflm.append(tflm_round(name, interpreter, tflm_n, args.warmup))
            else:
                median, report = hilt_round(ctx.hilt, path, name, hilt_n, args.warmup)
                hilt.append(median)
    tflm_us, tflm_spread = summary(tflm)
    hilt_us, hilt_spread = summary(hilt)
    return {
        "model": name,
        "set": os.path.basename(os.path.normpath(folder)),
        "tflm_us": tflm_us,
        "hilt_us": hilt_us,
        "ratio": tflm_us / hilt_us if hilt_us > 0 else None,
        "tflm_rounds_us": tflm,
        "hilt_rounds_us": hilt,
        "tflm_spread": tflm_spread,
        "hilt_spread": hilt_spread,
        "noisy": max(tflm_spread, hilt_spread) > NOISY_SPREAD,
        "tflm_iterations": tflm_n,
        "hilt_iterations": hilt_n,
        "hilt_arena_total": report["arena_total"] if report else None,
        "manifest_tflm_us": entry.get("tflm", {}).get("invoke_us_x86_reference_kernels"),
    }


def call_overhead(ctx, folder, entry):
    """What one `invoke()` call costs on top of TFLM's C++ Invoke, measured
    on `entry` (the smallest model, whose own work is least), in rounds
    that alternate the kinds of call so load weighs on each alike:
    - wrapper: Interpreter.invoke() against the pybind11 method it calls;
    - dispatch: a pybind11 call that does next to nothing (Reset(): no
      variable tensors to zero in a stateless model), an upper bound;
    - loop: the timing itself, two perf_counter_ns() reads around an empty
      Python call.
    The total (wrapper + dispatch + loop) is what a TFLM figure holds
    beyond the C++ work."""
    interpreter = tflm_interpreter(ctx.runtime, ctx.np, folder, entry, ctx.args.tflm_inputs)
    inner = interpreter._interpreter
    calls = {
        "wrapped": interpreter.invoke,
        "direct": inner.Invoke,
        "dispatch": inner.Reset,
        "loop": lambda: None,
    }
    timed_calls(interpreter.invoke, 1_000)
    rounds = {kind: [] for kind in calls}
    for _ in range(9):
        for kind, call in calls.items():
            rounds[kind].append(statistics.median(timed_calls(call, 20_000)))
    m = {kind: statistics.median(values) for kind, values in rounds.items()}
    wrapper = max(m["wrapped"] - m["direct"], 0.0)
    return {
        "model": entry["name"],
        "stateful": bool(entry.get("stateful")),
        "invoke_us": m["wrapped"],
        "wrapper_us": wrapper,
        "dispatch_us": max(m["dispatch"] - m["loop"], 0.0),
        "loop_us": m["loop"],
        "total_us": wrapper + m["dispatch"],
    }


def machine():
    """What the figures were taken on."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": platform.platform()}


def load_average():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


class Context:
    """What every measurement needs: the modules, the binary, the arguments."""

    def __init__(self, args, runtime, np):
        self.args = args
        self.runtime = runtime
        self.np = np
        self.hilt = args.hilt


def render_row(row):
    if "error" in row:
        return f"| {row['model']} | — | — | — | not timed: {row['side']}: {row['reason']} |"
    mark = " (noisy)" if row["noisy"] else ""
    ratio = row["ratio"]
    if ratio is None:
        ratio_text = "—"
    else:
        ratio_text = f"{ratio:.2f}×" if ratio < 1 else f"{ratio:.1f}×"
    spread = 100 * max(row["tflm_spread"], row["hilt_spread"])
    return (
        f"| {row['model']} | {row['tflm_us']:,.1f} | {row['hilt_us']:,.1f} | "
        f"{ratio_text} | {spread:.0f}%{mark} |"
    )


def render_overhead(o):
    return (
        f"TFLM's figures include the Python call overhead of one invoke() call per inference: "
        f"measured on {o['model']} (invoke() {o['invoke_us']:.2f} µs), about "
        f"{o['total_us']:.2f} µs (Python wrapper {o['wrapper_us']:.2f} µs, pybind11 dispatch "
        f"<= {o['dispatch_us']:.2f} µs, timing loop {o['loop_us']:.2f} µs)."
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Run with build/tflm-venv/bin/python (ci/setup.sh creates it).",
    )
    parser.add_argument("--conformance", default=default_conformance(),
                        help="the conformance folder [HILT_CONFORMANCE_DIR, else ../shared/conformance]")
    parser.add_argument("--ops", action="store_true",
                        help="also time the conformance-ops set beside it")
    parser.add_argument("--models", help="comma-separated model names (default: every model)")
    parser.add_argument("--hilt", default=os.path.join(repo_root(), "build", "release", "hilt"),
                        help=f"the hilt binary [build/release/hilt: {BUILD_HILT}]")
    parser.add_argument("--iterations", type=positive, help="timed invokes per round (default: --seconds)")
    parser.add_argument("--seconds", type=positive_float, default=0.5,
                        help="with no --iterations, each round lasts about this long [0.5]")
    parser.add_argument("--rounds", type=positive, default=3, help="rounds per side and model [3]")
    parser.add_argument("--warmup", type=non_negative, default=10, help="untimed invokes per round [10]")
    parser.add_argument("--tflm-inputs", choices=["case", "pattern"], default="case",
                        help="TFLM's inputs: the first case's, or hilt bench's pattern [case]")
    parser.add_argument("--json", help="write the figures here")
    return parser.parse_args(argv)


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive whole number")
    return value


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def measure(ctx, pairs):
    """Every row, printed as it comes, then the call overhead."""
    print("| model | TFLM µs | hilt µs | TFLM / hilt | spread |")
    print("|---|---:|---:|---:|---:|")
    rows = []
    for folder, entry in pairs:
        try:
            row = time_model(ctx, folder, entry)
        except ModelError as e:
            row = {"model": entry["name"], "error": str(e), "side": e.side, "reason": e.reason}
        rows.append(row)
        print(render_row(row), flush=True)
    timed = [(row, pair) for row, pair in zip(rows, pairs) if "error" not in row]
    overhead = None
    if timed:
        # The smallest stateless model: least C++ work, and Reset() is a no-op.
        key = lambda t: (bool(t[1][1].get("stateful")), t[0]["tflm_us"])  # noqa: E731
        _, (folder, entry) = min(timed, key=key)
        overhead = call_overhead(ctx, folder, entry)
    return rows, overhead


def main(argv=None):
    args = parse_args(argv)
    try:
        pairs = selected_models(args)
        check_hilt(args.hilt)
        runtime, np = import_tflm()
    except SetupError as e:
        print(f"host-vs-tflm: {e}", file=sys.stderr)
        return 2
    ctx = Context(args, runtime, np)
    about = {"machine": machine(), "load_before": load_average(), "tflite_micro": tflm_version(),
             "tflm_inputs": args.tflm_inputs, "rounds": args.rounds}
    print(f"host-vs-tflm: {about['machine']['cpu']}, {about['machine']['cores']} cores, "
          f"load average {about['load_before']}, tflite-micro {about['tflite_micro']}, "
          f"TFLM inputs: {args.tflm_inputs}")
    rows, overhead = measure(ctx, pairs)
    about["load_after"] = load_average()
    print(f"load average after: {about['load_after']}")
    if overhead:
        print(render_overhead(overhead))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"run": about, "call_overhead": overhead, "models": rows}, f, indent=1)
    failed = [row for row in rows if "error" in row]
    if failed:
        print(f"host-vs-tflm: {len(failed)} of {len(rows)} models not timed "
              f"(the rows say which side refused them)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
