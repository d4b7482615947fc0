#!/usr/bin/env python3
"""Runs every one-op model listed in cases.txt through TFLM (the tflite-micro
Python package, reference kernels) and writes its outputs as NAME.out0.bin, NAME.out1.bin, ...

    pip install tflite-micro==0.dev20261023182759
    python3 run_tflm.py

The Rust test tflm_op_vectors compares hilt's outputs with these files.
"""
import pathlib
import sys

import numpy as np
from tflite_micro.python.tflite_micro import runtime

HERE = pathlib.Path(__file__).resolve().parent


def main():
    failed = 0
    for line in (HERE / "cases.txt").read_text().splitlines():
        name, n_inputs, _rule = line.split()
        model = (HERE / f"{name}.tflite").read_bytes()
        try:
            interpreter = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
            for i in range(int(n_inputs)):
                details = interpreter.get_input_details(i)
                data = np.frombuffer(
                    (HERE / f"{name}.in{i}.bin").read_bytes(), dtype=details["dtype"]
                ).reshape(details["shape"])
                interpreter.set_input(data, i)
            interpreter.invoke()
            n_outputs = len(runtime.convert_bytearray_to_object(model).subgraphs[0].outputs)
            for k in range(n_outputs):
                out = interpreter.get_output(k)
                (HERE / f"{name}.out{k}.bin").write_bytes(np.ascontiguousarray(out).tobytes())
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print(f"{name}: TFLM failed: {e}", file=sys.stderr)
    print(f"TFLM ran {len((HERE / 'cases.txt').read_text().splitlines()) - failed} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
