#!/usr/bin/env python3
"""Checks that TFLM itself runs the models `hilt layout --write-offline` writes.

For each conformance model named: hilt plans it (`--planner optimal` by
default) and writes the plan into a copy as TFLM's OfflineMemoryAllocation
metadata; then TFLM's Python interpreter (the tflite-micro package, pinned in
ci/requirements-tflm.txt) runs the original and the copy on every case of the
conformance set. The check fails when
- TFLM refuses the copy, or any output of the copy differs from the
  original's (byte for byte) or from the set's expected output (TFLM's own);
- TFLM's planned head for the copy is larger than for the original (hilt
  plans TFLM's kernels' scratch with the tensors and refuses to write a plan
  that would make TFLM worse; a refusal is reported, not a fault), or is
  not the head hilt predicted for it (what `--write-offline` prints:
  "TFLM's head with its kernels' scratch N B");
- with --strict-head, TFLM's planned head for the copy is not hilt's head
  (a model whose kernels request scratch gets it placed by TFLM around the
  fixed buffers, so its head may be larger: leave those out of --strict-head).

TFLM's planned head is read from `print_allocations()` ("Arena allocation
head N bytes", from its RecordingMicroAllocator), which TFLM's C++ code
prints straight to the process's output: so it is read in a child process.

Usage:
  build/tflm-venv/bin/python ci/tflm-offline-check.py --hilt build/debug/hilt \
      [--conformance DIR] [--models a,b | --all] [--strict-head] [--json OUT]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Room for every conformance model's arena (the largest needs ~1.3 MB).
ARENA_BYTES = 8 * 1024 * 1024
DEFAULT_MODELS = "mlperf_tiny_vww_mobilenetv1_int8"
HEAD_LINE = re.compile(r"Arena allocation head (\d+) bytes")
TOTAL_LINE = re.compile(r"Arena allocation total (\d+) bytes")


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_conformance():
    env = os.environ.get("HILT_CONFORMANCE_DIR")
    if env:
        return env
    return os.path.join(repo_root(), "..", "shared", "conformance")


def tflm_runtime():
    from tflite_micro.python.tflite_micro import runtime

    return runtime


def child_allocations(model_path):
    """Child process: build TFLM's interpreter and print its allocations."""
    runtime = tflm_runtime()
    with open(model_path, "rb") as f:
        data = f.read()
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES)
    sys.stdout.flush()
    interpreter.print_allocations()


def tflm_arena(model_path):
    """TFLM's (head, total) bytes for the model, from a child process."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child-allocations", model_path],
        capture_output=True,
        text=True,
        check=False,
    )
    text = out.stdout + out.stderr
    head, total = HEAD_LINE.search(text), TOTAL_LINE.search(text)
    if out.returncode != 0 or head is None or total is None:
        raise RuntimeError(f"TFLM could not allocate {model_path}:\n{text}")
    return int(head.group(1)), int(total.group(1))


def run_cases(model_path, entry, cases_dir):
    """Every case's outputs (raw bytes per step and output) under TFLM."""
    import numpy as np

    runtime = tflm_runtime()
    with open(model_path, "rb") as f:
        data = f.read()
    results = []
    for case in entry["cases"]:
        interpreter = runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES)
        for step in case["steps"]:
            for i, spec in enumerate(step["inputs"]):
                path = os.path.join(cases_dir, spec["file"])
                value = np.fromfile(path, dtype=spec["dtype"]).reshape(spec["shape"])
                interpreter.set_input(value, i)
            interpreter.invoke()
            outputs = []
            for o in range(len(step["outputs"])):
                outputs.append(np.asarray(interpreter.get_output(o)).tobytes())
            results.append(outputs)
    return results


def expected_outputs(entry, cases_dir):
    expected = []
    for case in entry["cases"]:
        for step in case["steps"]:
            step_outputs = []
            for spec in step["outputs"]:
                with open(os.path.join(cases_dir, spec["file"]), "rb") as f:
                    step_outputs.append(f.read())
            expected.append(step_outputs)
    return expected


PREDICTED = re.compile(r"TFLM's head with its kernels' scratch (\d+) B")
REFUSED = "not written: with this plan TFLM would need"


def hilt_write_offline(hilt, model_path, out_path, planner):
    """Runs hilt layout --write-offline; returns hilt's plan (its JSON) and
    the TFLM head hilt predicts, or (None, refusal) when hilt refused."""
    cmd = [
        hilt, "layout", model_path, "--planner", planner,
        "--write-offline", out_path, "--format", "json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0 and REFUSED in out.stderr:
        return None, out.stderr.strip()
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
    predicted = PREDICTED.search(out.stderr)
    return json.loads(out.stdout), int(predicted.group(1)) if predicted else None


def check_model(args, conformance, entry, work):
    name = entry["name"]
    model_path = os.path.join(conformance, entry["model"])
    cases_dir = os.path.join(conformance, "cases", name)
    offline_path = os.path.join(work, name + "_offline.tflite")
    plan, predicted = hilt_write_offline(args.hilt, model_path, offline_path, args.planner)
    if plan is None:
        return {"model": name, "written": False, "refusal": predicted, "faults": []}
    head_before, total_before = tflm_arena(model_path)
    head_after, total_after = tflm_arena(offline_path)
    original = run_cases(model_path, entry, cases_dir)
    rewritten = run_cases(offline_path, entry, cases_dir)
    expected = expected_outputs(entry, cases_dir)
    faults = []
    if rewritten != original:
        faults.append("outputs of the offline-planned model differ from the original's")
    if rewritten != expected:
        faults.append("outputs of the offline-planned model differ from the expected ones")
    if head_after > head_before:
        faults.append(f"TFLM's head grew from {head_before} to {head_after} with hilt's plan")
    if head_after != predicted:
        faults.append(f"TFLM's head {head_after} is not the {predicted} hilt predicted")
    if args.strict_head and head_after != plan["head"]:
        faults.append(f"TFLM's head {head_after} is not hilt's {plan['head']}")
    return {
        "model": name,
        "written": True,
        "planner": args.planner,
        "hilt_head": plan["head"],
        "lower_bound": plan["lower_bound"],
        "tflm_head_original": head_before,
        "tflm_head_offline": head_after,
        "tflm_head_predicted": predicted,
        "tflm_total_original": total_before,
        "tflm_total_offline": total_after,
        "outputs_equal": rewritten == original,
        "outputs_expected": rewritten == expected,
        "invocations": len(original),
        "faults": faults,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child-allocations", help=argparse.SUPPRESS)
    parser.add_argument("--hilt", default=os.path.join(repo_root(), "build", "debug", "hilt"))
    parser.add_argument("--conformance", default=default_conformance())
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated names")
    parser.add_argument("--all", action="store_true", help="every model of the set")
    parser.add_argument("--planner", default="optimal")
    parser.add_argument("--strict-head", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.child_allocations:
        child_allocations(args.child_allocations)
        return 0
    with open(os.path.join(args.conformance, "manifest.json")) as f:
        manifest = json.load(f)
    wanted = None if args.all else args.models.split(",")
    entries = [m for m in manifest["models"] if wanted is None or m["name"] in wanted]
    missing = set(wanted or []) - {m["name"] for m in entries}
    if missing:
        print(f"not in {args.conformance}: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for entry in entries:
            try:
                row = check_model(args, args.conformance, entry, work)
            except RuntimeError as e:
                row = {"model": entry["name"], "faults": [str(e)]}
            rows.append(row)
            print(render(row))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failed = [r for r in rows if r["faults"]]
    print(f"tflm-offline-check: {len(rows) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def render(row):
    if row.get("written") is False:
        return f"{row['model']}: no plan written ({row['refusal']})"
    if "hilt_head" not in row:
        return f"{row['model']}: FAILED: {'; '.join(row['faults'])}"
    verdict = "ok" if not row["faults"] else "FAILED: " + "; ".join(row["faults"])
    return (
        f"{row['model']}: TFLM head {row['tflm_head_original']} -> {row['tflm_head_offline']} B "
        f"with hilt's {row['planner']} plan (hilt head {row['hilt_head']}, lower bound "
        f"{row['lower_bound']}); outputs equal over {row['invocations']} invocations: "
        f"{row['outputs_equal']}; {verdict}"
    )


if __name__ == "__main__":
    sys.exit(main())
