//! Kernel constants in a constant image instead of the arena's tail: the
//! host's write, the firmware's checked read, and every way a wrong image
//! is told apart.

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::constants::{Constants, IMAGE_ALIGN};
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::{KernelError, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::writer::examples::tiny_convnet_int8;

const ARENA: usize = 64 * 1024;

/// What one run gives: the output, the tail and the image bytes used.
struct Run {
    output: Vec<u8>,
    tail: u32,
    image: Vec<u8>,
}

fn input(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 37 % 251) as u8).collect()
}

/// Runs the tiny convnet with `constants`, or returns allocate's error.
fn run(constants: Constants<'_>) -> Result<Run, InterpreterError> {
    let bytes = tiny_convnet_int8();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; ARENA];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_constants(constants);
    let tail = interpreter
        .allocate(&Greedy, &AllocOptions::DEFAULT)?
        .tail_bytes;
    let data = input(interpreter.input_mut(0)?.len());
    interpreter.input_mut(0)?.copy_from_slice(&data);
    interpreter.invoke()?;
    Ok(Run {
        output: interpreter.output(0)?.to_vec(),
        tail,
        image: interpreter.constant_image().to_vec(),
    })
}

/// `bytes` in a buffer that starts `IMAGE_ALIGN`-aligned (plus `skew`).
fn aligned_copy(bytes: &[u8], skew: usize) -> (Vec<u64>, usize) {
    let mut words = vec![0u64; bytes.len().div_ceil(8) + 2];
    let start = skew;
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[start..start + bytes.len()]
        .copy_from_slice(bytes);
    (words, start)
}

fn image_view(words: &[u64], start: usize, len: usize) -> &[u8] {
    &bytemuck::cast_slice::<u64, u8>(words)[start..start + len]
}

/// The image the host would write for the tiny convnet.
fn written_image() -> Vec<u8> {
    let mut buffer = vec![0u64; 16 * 1024];
    run(Constants::write(bytemuck::cast_slice_mut(&mut buffer)))
        .unwrap()
        .image
}

#[test]
fn an_image_moves_the_constants_out_of_the_tail_and_keeps_the_outputs() {
    let in_tail = run(Constants::Tail).unwrap();
    assert!(in_tail.image.is_empty());

    let image = written_image();
    let (words, start) = aligned_copy(&image, 0);
    let read = run(Constants::read(image_view(&words, start, image.len()))).unwrap();
    assert_eq!(read.output, in_tail.output, "outputs with the image");
    assert_eq!(read.image, image, "the firmware checks the whole image");
    // Every op's data went to the image: the tail keeps only the tables.
    assert!(!image.is_empty());
    assert!(
        read.tail + image.len() as u32 / 2 < in_tail.tail,
        "tail {} with the image ({} B) against {} without",
        read.tail,
        image.len(),
        in_tail.tail
    );
}

#[test]
fn a_changed_byte_fails_the_op_that_works_it_out() {
    let mut image = written_image();
    let byte = image.len() / 2;
    image[byte] ^= 0x5a;
    let (words, start) = aligned_copy(&image, 0);
    let error = run(Constants::read(image_view(&words, start, image.len())))
        .err()
        .expect("a changed image is refused");
    match error {
        InterpreterError::Kernel {
            error: KernelError::ConstantImageDiffers { byte: at },
            ..
        } => assert_eq!(at as usize, byte),
        other => panic!("unexpected error: {other}"),
    }
    assert!(error.to_string().contains(&format!("at byte {byte}")));
}

#[test]
fn a_short_or_long_image_is_named() {
    let image = written_image();
    let short = &image[..image.len() - 8];
    let (words, start) = aligned_copy(short, 0);
    match run(Constants::read(image_view(&words, start, short.len()))).err() {
        Some(InterpreterError::Kernel {
            error: KernelError::ConstantImageShort { image: held, .. },
            ..
        }) => assert_eq!(held as usize, short.len()),
        other => panic!("unexpected result: {other:?}"),
    }

    let mut long = image.clone();
    long.extend_from_slice(&[0; 8]);
    let (words, start) = aligned_copy(&long, 0);
    assert_eq!(
        run(Constants::read(image_view(&words, start, long.len()))).err(),
        Some(InterpreterError::ConstantImageLonger {
            used: image.len() as u32,
            image: long.len() as u32,
        })
    );
}

#[test]
fn a_misaligned_image_is_refused() {
    let image = written_image();
    let (words, start) = aligned_copy(&image, IMAGE_ALIGN as usize / 2);
    assert_eq!(
        run(Constants::read(image_view(&words, start, image.len()))).err(),
        Some(InterpreterError::ConstantImageMisaligned)
    );
}

/// A constant image handed to a build with the `no-constant-image`
/// feature is refused at allocate, by name; the default build reads it.
/// CI runs this test in both builds.
#[test]
fn a_no_constant_image_build_refuses_an_image_by_name() {
    let mut buffer = vec![0u64; 16 * 1024];
    let result = run(Constants::write(bytemuck::cast_slice_mut(&mut buffer)));
    if hilt_runtime::constants::IMAGE_LINKED {
        assert_eq!(result.unwrap().output, run(Constants::Tail).unwrap().output);
    } else {
        assert_eq!(result.err(), Some(InterpreterError::ConstantImageNotLinked));
        assert!(run(Constants::Tail).is_ok());
    }
}
