//! The wire form of every error a firmware reports: each variant comes back
//! as the value it was, with the same words; a cut or altered form is
//! refused or read as some value, never a panic.

use hilt_runtime::accel::{AccelError, RegionRole};
use hilt_runtime::allocation::{AllocError, ArenaNeeds};
use hilt_runtime::arena::{ArenaError, Section};
use hilt_runtime::canary::{CanaryFault, GuardOwner};
use hilt_runtime::interpreter::{CustomCode, InterpreterError, OpName};
use hilt_runtime::kernels::{KernelError, QuantProblem};
use hilt_runtime::model::{FlatbufferFault, ModelError, Site};
use hilt_runtime::planner::{OfflinePlanError, PlanError};
use hilt_runtime::pool::PoolError;
use hilt_runtime::port::{PlacedBuffer, PlanFailure};
use hilt_runtime::reach::Reach;
use hilt_runtime::request::BufferRequest;
use hilt_runtime::wire_form::{FormReader, FormWriter, WireForm};

fn intern(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn form<T: WireForm>(value: &T) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let mut w = FormWriter::new(&mut buf);
    value.put(&mut w);
    assert!(!w.overflowed());
    w.written().to_vec()
}

fn read<T: WireForm>(bytes: &[u8]) -> Option<T> {
    let mut intern = intern;
    FormReader::new(bytes, &mut intern).whole()
}

fn requests() -> [BufferRequest; 2] {
    [
        BufferRequest::tensor(7, 1_000, 2, 5)
            .with_align(64)
            .held_until(9)
            .reached_by(Reach::ACCEL),
        BufferRequest::scratch(3, 1, 256),
    ]
}

fn kernel_errors() -> Vec<KernelError> {
    vec![
        KernelError::MissingInput { position: 2 },
        KernelError::MissingOutput { position: 1 },
        KernelError::MissingOptions,
        KernelError::UnsupportedType {
            tensor: 4,
            dtype: 9,
        },
        KernelError::UnsupportedType {
            tensor: 4,
            dtype: -7,
        },
        KernelError::ShapeMismatch { tensor: 3 },
        KernelError::UnsupportedRank { tensor: 3, rank: 7 },
        KernelError::MissingQuantization { tensor: 11 },
        KernelError::BadQuantization {
            tensor: 2,
            problem: QuantProblem::Scale {
                channel: 5,
                bits: 0x7f80_0001,
            },
        },
        KernelError::BadQuantization {
            tensor: 2,
            problem: QuantProblem::ZeroPointForKernel {
                zero_point: 3,
                min: 0,
                max: 0,
            },
        },
        KernelError::BadQuantization {
            tensor: 2,
            problem: QuantProblem::ZeroPoint {
                channel: 1,
                zero_point: -200,
                dtype: 9,
            },
        },
        KernelError::UnsupportedParameter {
            what: "dilation above 1 on this axis",
        },
        KernelError::Misaligned { tensor: 6 },
        KernelError::OutOfMemory { bytes: 4_096 },
        KernelError::NotVariable { position: 4 },
        KernelError::IndexOutOfRange {
            tensor: 1,
            index: -3_000_000_000,
            size: 10,
        },
        KernelError::TakenTwice,
        KernelError::Internal,
        KernelError::ConstantImageShort {
            needed: 24_600,
            image: 24_000,
        },
        KernelError::ConstantImageDiffers { byte: 1_234 },
    ]
}

fn plan_errors() -> Vec<PlanError> {
    vec![
        PlanError::InvalidAlignment {
            request: 3,
            align: 12,
        },
        PlanError::SizeOverflow { request: 1 },
        PlanError::WorkspaceTooSmall {
            needed: 100,
            given: 10,
        },
        PlanError::OffsetsTooShort {
            needed: 8,
            given: 4,
        },
        PlanError::InvertedLifetime { request: 2 },
        PlanError::Offline(OfflinePlanError::NotFound),
        PlanError::Offline(OfflinePlanError::Truncated {
            bytes: 10,
            needed: 24,
        }),
        PlanError::Offline(OfflinePlanError::UnsupportedVersion { version: -1 }),
        PlanError::Offline(OfflinePlanError::TensorCountMismatch { plan: 3, model: 4 }),
        PlanError::Offline(OfflinePlanError::NegativeOffset {
            tensor: 2,
            offset: -16,
        }),
        PlanError::Offline(OfflinePlanError::OutOfBounds {
            tensor: 1,
            offset: 64,
            end: 1 << 33,
            limit: 1_024,
        }),
        PlanError::Offline(OfflinePlanError::Misaligned {
            tensor: 1,
            offset: 3,
            align: 16,
        }),
        PlanError::Offline(OfflinePlanError::Overlap {
            first: 1,
            second: 2,
        }),
    ]
}

fn accel_errors() -> Vec<AccelError> {
    let mut errors = vec![
        AccelError::Misaligned {
            region: 1,
            role: RegionRole::Input(0),
        },
        AccelError::OutsideWindow {
            region: 2,
            role: RegionRole::Output(1),
        },
        AccelError::WriteToReadOnly {
            region: 0,
            role: RegionRole::Scratch(2),
        },
        AccelError::TooManyRegions { count: 200 },
        AccelError::Busy,
        AccelError::Unsupported,
        AccelError::Timeout,
        AccelError::Aborted,
        AccelError::UnknownJob,
        AccelError::LeaseViolation {
            region: 3,
            role: RegionRole::Descriptor,
        },
        AccelError::NotWholeLines {
            role: RegionRole::Output(0),
        },
        AccelError::NotHeld {
            role: RegionRole::Input(2),
        },
        AccelError::Engine { code: 0xdead },
        AccelError::NotWaited { by_op: 4 },
        AccelError::NotCleaned {
            region: 1,
            role: RegionRole::Input(0),
        },
        AccelError::NotInvalidated {
            region: 2,
            role: RegionRole::Output(0),
        },
    ];
    errors.extend(kernel_errors().into_iter().map(AccelError::Kernel));
    errors
}

fn alloc_errors() -> Vec<AllocError> {
    let [a, b] = requests();
    let placed = |index, request, offset| PlacedBuffer {
        index,
        request,
        offset,
    };
    let mut errors = vec![
        AllocError::ArenaTooSmall(ArenaNeeds {
            available: 1_000,
            head: 900,
            head_exact: false,
            head_start: 16,
            temp: 32,
            tail: 200,
            peak_step: 7,
        }),
        AllocError::Arena(ArenaError::OutOfMemory {
            section: Section::Tail,
            requested: 64,
            free: 8,
        }),
        AllocError::Arena(ArenaError::OutOfMemory {
            section: Section::Head,
            requested: 64,
            free: 8,
        }),
        AllocError::Arena(ArenaError::OutOfMemory {
            section: Section::Temp,
            requested: 64,
            free: 8,
        }),
        AllocError::Arena(ArenaError::InvalidAlignment { align: 3 }),
        AllocError::Arena(ArenaError::TempInUse),
        AllocError::PlanRejected(PlanFailure::MissingOffsets {
            given: 1,
            needed: 2,
        }),
        AllocError::PlanRejected(PlanFailure::InvalidRequest { index: 1, align: 6 }),
        AllocError::PlanRejected(PlanFailure::Misaligned {
            buffer: placed(0, a, 8),
        }),
        AllocError::PlanRejected(PlanFailure::OutsideHead {
            buffer: placed(1, b, 900),
            head: 1_000,
        }),
        AllocError::PlanRejected(PlanFailure::Overlap {
            first: placed(0, a, 0),
            second: placed(1, b, 64),
        }),
        AllocError::PlanRejected(PlanFailure::FixedMoved {
            buffer: placed(0, a, 0),
            fixed: 64,
        }),
        AllocError::InvalidAlignment { align: 24 },
        AllocError::Pool(PoolError::TooMany { count: 9 }),
        AllocError::Pool(PoolError::TooLarge),
        AllocError::Pool(PoolError::NonePlanned),
        AllocError::Pool(PoolError::SizeMismatch {
            pools: 10,
            arena: 12,
        }),
        AllocError::Pool(PoolError::Unreachable {
            request: 3,
            needs: Reach::CPU.with(Reach::ACCEL),
        }),
        AllocError::Pool(PoolError::Short {
            pool: 1,
            needs: 100,
            capacity: 50,
        }),
        AllocError::Pool(PoolError::Plan(PlanError::SizeOverflow { request: 2 })),
    ];
    errors.extend(plan_errors().into_iter().map(AllocError::Plan));
    errors
}

fn model_errors() -> Vec<ModelError> {
    let sites = [
        Site::Model,
        Site::Subgraph(1),
        Site::Tensor {
            subgraph: 0,
            tensor: 5,
        },
        Site::Operator { subgraph: 0, op: 2 },
        Site::OperatorCode(3),
        Site::Buffer(4),
        Site::Metadata(0),
    ];
    let faults = [
        FlatbufferFault::NotAModel,
        FlatbufferFault::MissingRequiredField,
        FlatbufferFault::InconsistentUnion,
        FlatbufferFault::BadString,
        FlatbufferFault::Unaligned,
        FlatbufferFault::OutOfBounds,
        FlatbufferFault::TooComplex,
    ];
    let mut errors: Vec<ModelError> = faults
        .into_iter()
        .map(|fault| ModelError::Malformed {
            fault,
            position: 12,
        })
        .collect();
    errors.push(ModelError::NoSubgraph);
    errors.push(ModelError::BufferOutsideFile {
        buffer: 3,
        offset: 1 << 40,
        size: 12,
        file_len: 100,
    });
    for site in sites {
        errors.extend([
            ModelError::MissingField {
                site,
                field: "shape",
            },
            ModelError::IndexOutOfRange {
                site,
                field: "inputs",
                entry: 2,
                value: -9,
                len: 4,
            },
            ModelError::NegativeDimension {
                site,
                axis: 1,
                value: -2,
            },
            ModelError::ShapeOverflow { site },
            ModelError::UnsupportedType { site, code: 42 },
            ModelError::BufferSizeMismatch {
                site,
                buffer: 1,
                expected: 16,
                actual: 1 << 35,
            },
            ModelError::TooManyEntries {
                site,
                field: "operators",
            },
        ]);
    }
    errors
}

fn interpreter_errors() -> Vec<InterpreterError> {
    let codes = [
        OpName::Builtin(39),
        OpName::Builtin(9_999),
        OpName::Custom(CustomCode::new("hilt.vnpu.negate")),
        OpName::Custom(CustomCode::new(&"é".repeat(40))),
    ];
    let guards = [
        GuardOwner::ArenaStart,
        GuardOwner::HeadEnd,
        GuardOwner::TailStart,
        GuardOwner::ArenaEnd,
        GuardOwner::Tensor(4),
        GuardOwner::Scratch(2),
    ];
    let mut errors = vec![
        InterpreterError::NotAllocated,
        InterpreterError::OffloadNotLinked,
        InterpreterError::Aliasing { op: 1, tensor: 2 },
        InterpreterError::ReadBeforeWrite { op: 3, tensor: 4 },
        InterpreterError::NoSuchTensor { position: 5 },
        InterpreterError::ConstantImageMisaligned,
        InterpreterError::LeanWithOffload,
        InterpreterError::LeanNotLinked,
        InterpreterError::ConstantImageNotLinked,
        InterpreterError::ConstantImageLonger {
            used: 100,
            image: 180,
        },
    ];
    for code in codes {
        errors.push(InterpreterError::UnsupportedOperator { op: 2, code });
        errors.extend(
            kernel_errors()
                .into_iter()
                .map(|error| InterpreterError::Kernel { op: 1, code, error }),
        );
    }
    errors.extend(alloc_errors().into_iter().map(InterpreterError::Alloc));
    for (i, owner) in guards.into_iter().enumerate() {
        errors.push(InterpreterError::Canary(CanaryFault {
            owner,
            offset: 64 * i as u32,
            bytes_hit: 3,
            op: (i % 2 == 0).then_some(i as u32),
        }));
    }
    errors.extend(
        accel_errors()
            .into_iter()
            .map(|error| InterpreterError::Accelerator {
                op: 2,
                job: 7,
                error,
            }),
    );
    errors
}

/// The value read back equals the value written, and so do their words.
fn round_trips<T: WireForm + PartialEq + std::fmt::Debug + std::fmt::Display>(values: &[T]) {
    for value in values {
        let bytes = form(value);
        let back: T = read(&bytes).unwrap_or_else(|| panic!("{value:?} did not read back"));
        assert_eq!(&back, value);
        assert_eq!(back.to_string(), value.to_string());
    }
}

#[test]
fn every_error_a_firmware_reports_reads_back_as_itself() {
    round_trips(&interpreter_errors());
    round_trips(&model_errors());
    round_trips(&plan_errors());
    round_trips(&accel_errors());
}

#[test]
fn distinct_errors_have_distinct_forms() {
    let errors = interpreter_errors();
    let mut forms: Vec<Vec<u8>> = errors.iter().map(form).collect();
    forms.sort();
    forms.dedup();
    assert_eq!(forms.len(), errors.len());
}

#[test]
fn a_cut_form_is_refused_and_an_altered_one_never_panics() {
    for error in &interpreter_errors() {
        let bytes = form(error);
        for cut in 0..bytes.len() {
            assert_eq!(
                read::<InterpreterError>(&bytes[..cut]),
                None,
                "{error:?} cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            read::<InterpreterError>(&longer),
            None,
            "{error:?} with a byte more"
        );
        for at in 0..bytes.len() {
            for value in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut altered = bytes.clone();
                altered[at] = value;
                if let Some(e) = read::<InterpreterError>(&altered) {
                    let _ = e.to_string();
                }
            }
        }
    }
}

#[test]
fn a_form_that_does_not_fit_is_marked() {
    let error = InterpreterError::Kernel {
        op: 1,
        code: OpName::Custom(CustomCode::new("a.long.custom.operator.name")),
        error: KernelError::UnsupportedParameter {
            what: "a parameter",
        },
    };
    let whole = form(&error);
    let mut buf = vec![0u8; whole.len() - 1];
    let mut w = FormWriter::new(&mut buf);
    error.put(&mut w);
    assert!(w.overflowed());
    assert_eq!(read::<InterpreterError>(w.written()), None);
}
