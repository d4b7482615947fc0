#!/usr/bin/env python3
"""TFLM's outputs for hilt's LSTM tests (tests/kernel_lstm.rs).

Needs the tflite-micro Python package the conformance set was made with
(pip install tflite-micro==0.dev20261023182759) and numpy. Not run by CI:
its output is checked in.

    HILT_LSTM_EXPORT=/tmp/lstm cargo test -p hilt-runtime --test kernel_lstm -- --ignored export
    python3 target/runtime/tests/tflm/lstm_goldens.py /tmp/lstm ../shared/conformance \
        target/runtime/tests/data

1. Every NAME.tflite in the export folder (one-op LSTM models hilt's writer
   built) runs on one TFLM interpreter for NAME.step0.bin, step1, ...;
   the outputs go to lstm_tflm.txt as "NAME STEP HEX".
2. The conformance models with LSTM layers run case by case on TFLM with
   every tensor preserved; the LSTM layers' output tensors after each step
   go to lstm_conformance_tflm.txt as "MODEL CASE STEP HEX". The same layers
   cut out by hilt's test (layers_MODEL.tflite.model) must give the same
   bytes on TFLM, which checks the cutting.
"""

import glob
import os
import sys

import numpy as np
from tflite_micro.python.tflite_micro import runtime

# Conformance model -> its LSTM output tensors, in operator order.
LSTM_OUTPUTS = {
    "tflm_mnist_lstm_int8": [23],
    "tflm_mnist_lstm_float": [18],
    "tflm_dtln_noise_suppression": [34, 42],
}


def interpreter(model, preserve=False):
    config = (
        runtime.InterpreterConfig.kPreserveAllTensors
        if preserve
        else runtime.InterpreterConfig.kAllocationRecording
    )
    return runtime.Interpreter.from_bytes(model, intrepreter_config=config)


def set_input(interp, raw):
    details = interp.get_input_details(0)
    data = np.frombuffer(raw, dtype=details["dtype"]).reshape(details["shape"])
    interp.set_input(data, 0)


def outputs(interp, count):
    return b"".join(np.ascontiguousarray(interp.get_output(i)).tobytes() for i in range(count))


def one_op_models(export, out):
    lines = ["# TFLM outputs of tests/kernel_lstm.rs's one-op LSTM models (lstm_goldens.py)"]
    for path in sorted(glob.glob(os.path.join(export, "*.tflite"))):
        name = os.path.basename(path)[: -len(".tflite")]
        interp = interpreter(open(path, "rb").read())
        step = 0
        while os.path.exists(os.path.join(export, f"{name}.step{step}.bin")):
            set_input(interp, open(os.path.join(export, f"{name}.step{step}.bin"), "rb").read())
            interp.invoke()
            lines.append(f"{name} {step} {outputs(interp, 1).hex()}")
            step += 1
    with open(os.path.join(out, "lstm_tflm.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines) - 1} one-op outputs")


def conformance(export, conf, out):
    lines = [
        "# TFLM's LSTM layer outputs on the conformance models and inputs (lstm_goldens.py)"
    ]
    for name, tensors in LSTM_OUTPUTS.items():
        model = open(os.path.join(conf, "models", f"{name}.tflite"), "rb").read()
        layers = open(os.path.join(export, f"layers_{name}.tflite.model"), "rb").read()
        for case in range(3):
            full = interpreter(model, preserve=True)
            cut = interpreter(layers)
            for step in range(3):
                raw = open(
                    os.path.join(conf, "cases", name, f"case{case}_step{step}_input0.bin"), "rb"
                ).read()
                set_input(full, raw)
                full.invoke()
                set_input(cut, raw)
                cut.invoke()
                got = b"".join(
                    np.ascontiguousarray(full.GetTensor(t, 0)["tensor_data"]).tobytes() for t in tensors
                )
                assert got == outputs(cut, len(tensors)), f"{name} {case} {step}: cut differs"
                lines.append(f"{name} {case} {step} {got.hex()}")
    with open(os.path.join(out, "lstm_conformance_tflm.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines) - 1} conformance layer outputs")


if __name__ == "__main__":
    export_dir, conformance_dir, out_dir = sys.argv[1:4]
    one_op_models(export_dir, out_dir)
    conformance(export_dir, conformance_dir, out_dir)
