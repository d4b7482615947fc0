//! Interpreter set-up and run errors, and the arena it needs.

use hilt_runtime::allocation::{AllocError, AllocOptions};
use hilt_runtime::interpreter::{Clock, Interpreter, InterpreterError, OpName};
use hilt_runtime::kernels::{
    KernelError, OpResolver, Registration, Resolver, all_builtins, builtin,
};
use hilt_runtime::model::{Model, OpCode};
use hilt_runtime::planner::{Greedy, Linear};
use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, i32_bytes};

/// x [2,3] → RESHAPE → y [6] → RESHAPE → z [3,2]
fn reshape_chain() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[2, 3]);
    let s1 = w.constant("s1", TensorType::INT32, &[1], &i32_bytes(&[6]));
    let y = w.tensor("y", TensorType::INT8, &[6]);
    let s2 = w.constant("s2", TensorType::INT32, &[2], &i32_bytes(&[3, 2]));
    let z = w.output("z", TensorType::INT8, &[3, 2]);
    w.op(
        BuiltinOperator::RESHAPE,
        &[Some(x), Some(s1)],
        &[y],
        Options::None,
    );
    w.op(
        BuiltinOperator::RESHAPE,
        &[Some(y), Some(s2)],
        &[z],
        Options::None,
    );
    w.finish()
}

fn used_bytes(bytes: &[u8]) -> usize {
    let model = Model::from_bytes(bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter.arena_used_bytes()
}

#[test]
fn runs_and_keeps_results() {
    let bytes = reshape_chain();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    assert_eq!(interpreter.invoke(), Err(InterpreterError::NotAllocated));
    interpreter
        .allocate(&Linear, &AllocOptions::default())
        .unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&[1, 2, 3, 4, 5, 6]);
    interpreter.invoke().unwrap();
    assert_eq!(interpreter.output(0).unwrap(), &[1, 2, 3, 4, 5, 6]);
    assert_eq!(
        interpreter.output(1),
        Err(InterpreterError::NoSuchTensor { position: 1 })
    );
}

#[test]
fn profile_counts_every_op() {
    struct Ticks(std::cell::Cell<u64>);
    impl Clock for Ticks {
        fn now(&self) -> u64 {
            self.0.set(self.0.get() + 5);
            self.0.get()
        }
    }
    let bytes = reshape_chain();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    let mut per_op = [0u64; 2];
    interpreter
        .invoke_profiled(&Ticks(std::cell::Cell::new(0)), &mut per_op)
        .unwrap();
    assert_eq!(per_op, [5, 5]);
}

#[test]
fn unsupported_operator_is_named() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[4]);
    let y = w.output("y", TensorType::FLOAT32, &[4]);
    w.op(BuiltinOperator::RELU, &[Some(x)], &[y], Options::None);
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver: OpResolver<4> = OpResolver::new();
    let mut arena = vec![0u8; 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let err = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert_eq!(
        err,
        InterpreterError::UnsupportedOperator {
            op: 0,
            code: OpName::Builtin(BuiltinOperator::RELU.0)
        }
    );
    assert_eq!(err.to_string(), "operator 0 (RELU) is not supported");
}

/// A resolver of just the model's operators, found at compile time (as a
/// model-specific firmware builds its own) runs it; one without them names
/// what is missing.
#[test]
fn a_resolver_of_the_models_own_kernels_runs_it() {
    const RESHAPE: Option<Registration> = builtin(BuiltinOperator::RESHAPE);
    // An operator hilt has no kernel for has none here either.
    assert!(builtin(BuiltinOperator(-7)).is_none());
    // The one kernel `all_builtins` has for it, by name.
    let everything = all_builtins();
    let code = OpCode::Builtin(BuiltinOperator::RESHAPE);
    let listed = everything.get(everything.find(code).unwrap()).unwrap();
    assert_eq!(RESHAPE.unwrap().name, listed.name);
    let bytes = reshape_chain();
    let model = Model::from_bytes(&bytes).unwrap();
    let mut own: OpResolver<1> = OpResolver::new();
    own.add(BuiltinOperator::RESHAPE, RESHAPE.unwrap()).unwrap();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &own, &mut arena);
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&[1, 2, 3, 4, 5, 6]);
    interpreter.invoke().unwrap();
    assert_eq!(interpreter.output(0).unwrap(), &[1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_custom_op_is_named_by_its_code_and_every_missing_kernel_is_listed() {
    use hilt_runtime::interpreter::CustomCode;
    use hilt_runtime::kernels::unsupported_ops;
    let long = "VendorMelFilterbankWithAVeryLongCustomCode";
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[4]);
    let a = w.tensor("a", TensorType::FLOAT32, &[4]);
    let b = w.tensor("b", TensorType::FLOAT32, &[4]);
    let y = w.output("y", TensorType::FLOAT32, &[4]);
    w.custom_op(long, &[x], &[a]);
    w.op(
        BuiltinOperator::LSH_PROJECTION,
        &[Some(a)],
        &[b],
        Options::None,
    );
    w.op(BuiltinOperator::RESHAPE, &[Some(b)], &[y], Options::None);
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let missing: Vec<String> = unsupported_ops(&model, &resolver)
        .map(|op| format!("{} {}", op.index, op.code))
        .collect();
    assert_eq!(
        missing,
        [format!("0 CUSTOM({long})"), "1 LSH_PROJECTION".to_string()]
    );
    let mut arena = vec![0u8; 4096];
    let err = Interpreter::new(model, &resolver, &mut arena)
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    // The Copy error keeps the first 32 bytes of the code.
    assert_eq!(
        err,
        InterpreterError::UnsupportedOperator {
            op: 0,
            code: OpName::Custom(CustomCode::new(long))
        }
    );
    assert_eq!(
        err.to_string(),
        "operator 0 (CUSTOM(VendorMelFilterbankWithAVeryLong…)) is not supported"
    );
    assert_eq!(
        CustomCode::new("é".repeat(20).as_str()).as_str(),
        "é".repeat(16)
    );
}

#[test]
fn every_tflite_builtin_is_named_and_an_unknown_code_by_number() {
    use hilt_runtime::model::OpCode;
    // TRANSPOSE (39) was reported as BUILTIN_39: every builtin of TFLite's
    // schema now has its name, first to last.
    let name = |code| OpCode::Builtin(BuiltinOperator(code)).to_string();
    assert_eq!(name(39), "TRANSPOSE");
    assert_eq!(name(0), "ADD");
    assert_eq!(name(126), "BATCH_MATMUL");
    assert_eq!(name(117), "HARD_SWISH");
    assert_eq!(name(BuiltinOperator::ENUM_MAX), "STABLEHLO_CASE");
    assert_eq!(
        name(BuiltinOperator::ENUM_MAX + 1),
        format!("BUILTIN_{}", BuiltinOperator::ENUM_MAX + 1)
    );
    assert_eq!(
        OpCode::Custom("TFLM_NEGATE").to_string(),
        "CUSTOM(TFLM_NEGATE)"
    );
}

#[test]
fn missing_input_and_shape_mismatch_come_from_prepare() {
    let mut w = ModelWriter::new();
    w.input("x", TensorType::INT8, &[4]);
    w.output("y", TensorType::INT8, &[4]);
    w.op_raw(0, &[-1], &[1]);
    // op_raw registers ADD at opcode 0; give the resolver RESHAPE under ADD's code.
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let mut resolver: OpResolver<2> = OpResolver::new();
    resolver
        .add(
            BuiltinOperator::ADD,
            hilt_runtime::kernels::reshape::REGISTRATION,
        )
        .unwrap();
    let mut arena = vec![0u8; 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let err = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert!(matches!(
        err,
        InterpreterError::Kernel {
            op: 0,
            error: KernelError::MissingInput { position: 0 },
            ..
        }
    ));

    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[2, 3]);
    let y = w.output("y", TensorType::INT8, &[7]);
    w.op(BuiltinOperator::RESHAPE, &[Some(x)], &[y], Options::None);
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let err = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert!(matches!(
        err,
        InterpreterError::Kernel {
            op: 0,
            error: KernelError::ShapeMismatch { tensor: 1 },
            ..
        }
    ));
}

#[test]
fn in_place_operators_are_refused() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[4]);
    w.mark_output(x);
    w.op(BuiltinOperator::RESHAPE, &[Some(x)], &[x], Options::None);
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    assert_eq!(
        interpreter
            .allocate(&Greedy, &AllocOptions::default())
            .unwrap_err(),
        InterpreterError::Aliasing { op: 0, tensor: 0 }
    );
}

#[test]
fn a_tensor_read_before_anything_writes_it_is_refused() {
    // x → RESHAPE → y, but the second RESHAPE reads `stale`, which nothing
    // writes and which is not a model input.
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[6]);
    let stale = w.tensor("stale", TensorType::INT8, &[6]);
    let y = w.output("y", TensorType::INT8, &[6]);
    let z = w.output("z", TensorType::INT8, &[6]);
    w.op(BuiltinOperator::RESHAPE, &[Some(x)], &[y], Options::None);
    w.op(
        BuiltinOperator::RESHAPE,
        &[Some(stale)],
        &[z],
        Options::None,
    );
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let error = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert_eq!(
        error,
        InterpreterError::ReadBeforeWrite {
            op: 1,
            tensor: stale.0
        }
    );
    assert_eq!(
        error.to_string(),
        format!(
            "operator 1 reads tensor {}, which no earlier operator writes and which is not a model input",
            stale.0
        )
    );
}

#[test]
fn arena_one_byte_too_small_is_an_error_not_a_panic() {
    let bytes = reshape_chain();
    let needed = used_bytes(&bytes);
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    #[repr(align(16))]
    struct Aligned([u8; 4096]);
    let mut memory = Aligned([0; 4096]);
    {
        let mut interpreter = Interpreter::new(model, &resolver, &mut memory.0[..needed]);
        interpreter
            .allocate(&Greedy, &AllocOptions::default())
            .unwrap();
    }
    let mut interpreter = Interpreter::new(model, &resolver, &mut memory.0[..needed - 1]);
    let err = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert!(
        matches!(err, InterpreterError::Alloc(AllocError::ArenaTooSmall(_))),
        "{err:?}"
    );
    // A failed allocate leaves nothing half-usable.
    assert_eq!(interpreter.invoke(), Err(InterpreterError::NotAllocated));
}

#[test]
fn variables_reset_to_their_zero_point() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[4]);
    let state = w.variable("state", TensorType::INT8, &[4]);
    w.quantize(state, 0.5, -7);
    let y = w.output("y", TensorType::INT8, &[4]);
    // The state is read by an op; RESHAPE ignores its second input.
    w.op(
        BuiltinOperator::RESHAPE,
        &[Some(x), Some(state)],
        &[y],
        Options::None,
    );
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0xAAu8; 2048];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let allocation = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    assert!(allocation.tail_bytes >= 4);
    interpreter.reset().unwrap();
    // The four state bytes hold -7 somewhere in the tail.
    assert!(arena.windows(4).any(|w| w == [(-7i8) as u8; 4]));
}

/// `z = x + c` in int8, with `c`'s quantisation as given.
fn add_with_constant(scale: f32, zero_point: i64) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[1, 4]);
    let c = w.constant("c", TensorType::INT8, &[1, 4], &[1, 2, 3, 4]);
    let z = w.output("z", TensorType::INT8, &[1, 4]);
    w.quantize(x, 0.5, 0);
    w.quantize(c, scale, zero_point);
    w.quantize(z, 0.5, 0);
    w.op(
        BuiltinOperator::ADD,
        &[Some(x), Some(c)],
        &[z],
        Options::Add {
            activation: hilt_runtime::schema::ActivationFunctionType::NONE,
        },
    );
    w.finish()
}

#[test]
fn bad_quantisation_is_refused_at_prepare_naming_op_and_tensor() {
    use hilt_runtime::kernels::QuantProblem;
    let allocate = |bytes: &[u8]| {
        let model = Model::from_bytes(bytes).unwrap();
        let resolver = all_builtins();
        let mut arena = vec![0u8; 4096];
        Interpreter::new(model, &resolver, &mut arena)
            .allocate(&Greedy, &AllocOptions::default())
            .map(|_| ())
    };
    assert_eq!(allocate(&add_with_constant(0.25, 3)), Ok(()));
    for (scale, zero_point, problem, text) in [
        (
            0.0,
            0,
            QuantProblem::Scale {
                channel: 0,
                bits: 0,
            },
            "tensor 1: quantisation scale 0 (channel 0) is not a positive finite number",
        ),
        (
            -0.5,
            0,
            QuantProblem::Scale {
                channel: 0,
                bits: (-0.5f32).to_bits(),
            },
            "tensor 1: quantisation scale -0.5 (channel 0) is not a positive finite number",
        ),
        (
            f32::NAN,
            0,
            QuantProblem::Scale {
                channel: 0,
                bits: f32::NAN.to_bits(),
            },
            "tensor 1: quantisation scale NaN (channel 0) is not a positive finite number",
        ),
        (
            0.25,
            300,
            QuantProblem::ZeroPoint {
                channel: 0,
                zero_point: 300,
                dtype: TensorType::INT8.0,
            },
            "tensor 1: zero point 300 (channel 0) is outside the range of INT8",
        ),
    ] {
        let err = allocate(&add_with_constant(scale, zero_point)).unwrap_err();
        let InterpreterError::Kernel { op: 0, error, .. } = err else {
            panic!("{scale}, {zero_point}: {err:?}");
        };
        assert_eq!(error, KernelError::BadQuantization { tensor: 1, problem });
        assert_eq!(err.to_string(), format!("operator 0 (ADD): {text}"));
    }
}

/// A kernel registered with only some types' variants refuses the others
/// at prepare, naming the tensor, and runs its own as the full kernel does.
#[test]
fn a_kernel_of_some_types_refuses_the_others_and_runs_its_own() {
    use hilt_runtime::kernels::{builtin_typed, types};
    const INT8_ONLY: Option<Registration> =
        builtin_typed::<{ types::INT8 }>(BuiltinOperator::FULLY_CONNECTED);
    const FLOAT_ONLY: Option<Registration> =
        builtin_typed::<{ types::FLOAT32 }>(BuiltinOperator::FULLY_CONNECTED);
    // The float seed model: FULLY_CONNECTED, RELU, FULLY_CONNECTED.
    let bytes = hilt_runtime::writer::examples::seed_fc_float();
    let model = Model::from_bytes(&bytes).unwrap();
    let run = |kernel: Registration| {
        let mut resolver: OpResolver<2> = OpResolver::new();
        resolver
            .add(BuiltinOperator::FULLY_CONNECTED, kernel)
            .unwrap();
        let relu = builtin(BuiltinOperator::RELU).unwrap();
        resolver.add(BuiltinOperator::RELU, relu).unwrap();
        let mut arena = vec![0u8; 4096];
        let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
        interpreter.allocate(&Greedy, &AllocOptions::default())?;
        let input = interpreter.input_mut(0).unwrap();
        for (i, b) in input.iter_mut().enumerate() {
            *b = (i * 37) as u8;
        }
        interpreter.invoke()?;
        Ok::<_, InterpreterError>(interpreter.output(0).unwrap().to_vec())
    };
    let err = run(INT8_ONLY.unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            InterpreterError::Kernel {
                op: 0,
                error: KernelError::UnsupportedType {
                    tensor: 0,
                    dtype: 0
                },
                ..
            }
        ),
        "{err:?}"
    );
    let full = run(builtin(BuiltinOperator::FULLY_CONNECTED).unwrap()).unwrap();
    assert_eq!(run(FLOAT_ONLY.unwrap()).unwrap(), full);
    // An operator without a variant per type gets its one kernel.
    assert_eq!(
        builtin_typed::<{ types::INT8 }>(BuiltinOperator::RESHAPE).map(|k| k.name),
        builtin(BuiltinOperator::RESHAPE).map(|k| k.name)
    );
}
