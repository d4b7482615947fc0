//! The words of a firmware's notes: a `Note` message carries a sentence's
//! kind and its values; the agent's [`Note`] reads them back into the
//! runtime's own types and writes the sentence with their `Display`, so the
//! log reads as if the firmware had written it.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use hilt_agent::Note;
use hilt_proto::NoteKind;

/// The sentence a note says; a body the host cannot read is named, with
/// its kind and length, rather than dropped.
pub fn words(kind: NoteKind, body: &[u8]) -> String {
    let mut intern = intern;
    match Note::read(kind, body, &mut intern) {
        Some(note) => note.to_string(),
        None => format!(
            "a note of kind {} the host could not read ({} bytes: a firmware of another hilt, or a body cut to fit)",
            kind.0,
            body.len()
        ),
    }
}

/// Keeps each distinct text of a note once, for the life of the process:
/// the runtime's errors hold `&'static str` names, and a firmware's texts
/// are a few short names, so the set stays small.
fn intern(text: &str) -> &'static str {
    static TEXTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(kept) = texts.get(text) {
        return kept;
    }
    let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
    texts.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    use hilt_runtime::accel::AccelError;
    use hilt_runtime::interpreter::InterpreterError;
    use hilt_runtime::kernels::KernelError;
    use hilt_runtime::planner::OfflinePlanError;
    use hilt_runtime::wire_form::{FormWriter, WireForm};

    use super::*;

    fn body(put: impl FnOnce(&mut FormWriter<'_>)) -> Vec<u8> {
        let mut buf = [0u8; 400];
        let mut w = FormWriter::new(&mut buf);
        put(&mut w);
        w.written().to_vec()
    }

    #[test]
    fn a_start_note_reads_as_the_firmware_line() {
        let bytes = body(|w| {
            w.text("qemu-mps2-an386");
            w.text("hello.tflite");
            2_768u32.put(w);
            4_096u32.put(w);
            w.text("SysTick");
        });
        assert_eq!(
            words(NoteKind::START, &bytes),
            "hilt firmware: board qemu-mps2-an386, model hello.tflite (2768 bytes), arena 4096 bytes, cycles from SysTick"
        );
    }

    #[test]
    fn an_error_note_reads_as_the_error_s_own_words() {
        let error = InterpreterError::Kernel {
            op: 3,
            code: hilt_runtime::interpreter::OpName::Builtin(9),
            error: KernelError::UnsupportedParameter {
                what: "fused activation",
            },
        };
        assert_eq!(
            words(NoteKind::INTERPRETER, &body(|w| error.put(w))),
            error.to_string()
        );
        let accel = body(|w| {
            2u32.put(w);
            5u32.put(w);
            AccelError::Timeout.put(w);
        });
        assert_eq!(
            words(NoteKind::ACCELERATOR, &accel),
            format!("op 2, job 5: {}", AccelError::Timeout)
        );
    }

    #[test]
    fn a_note_the_host_cannot_read_is_named_not_dropped() {
        let error = body(|w| InterpreterError::NotAllocated.put(w));
        // Another kind's body, a kind no host knows, a cut body, a byte more.
        assert!(words(NoteKind::START, &error).contains("kind 1 the host could not read"));
        assert!(words(NoteKind(200), &error).contains("kind 200"));
        let planner = body(|w| {
            w.text("greedy");
            OfflinePlanError::NotFound.put(w);
        });
        assert!(words(NoteKind::PLANNER, &planner[..planner.len() - 1]).contains("could not read"));
        let mut longer = planner.clone();
        longer.push(0);
        assert!(words(NoteKind::PLANNER, &longer).contains("could not read"));
        assert_eq!(
            words(NoteKind::PLANNER, &planner),
            format!("planner greedy: {}", OfflinePlanError::NotFound)
        );
    }
}
