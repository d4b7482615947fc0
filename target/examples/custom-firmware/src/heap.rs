//! The product's heap: a few KiB, never freed. hilt-agent itself needs no
//! heap; the flatbuffers verifier inside it builds a `Vec` only when it
//! rejects a model, and a rejected model is reported, not run.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::{Cell, UnsafeCell};

const HEAP_BYTES: usize = 4096;

struct Heap {
    bytes: UnsafeCell<[u8; HEAP_BYTES]>,
    used: critical_section::Mutex<Cell<usize>>,
}

// SAFETY: `used` moves under a critical section; each range is handed out once.
unsafe impl Sync for Heap {}

// SAFETY: every pointer returned lies inside `bytes`, is aligned as asked,
// and is handed out once.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        critical_section::with(|cs| {
            let used = self.used.borrow(cs);
            let base = self.bytes.get() as usize;
            let start = (base + used.get()).next_multiple_of(layout.align()) - base;
            match start.checked_add(layout.size()) {
                Some(end) if end <= HEAP_BYTES => {
                    used.set(end);
                    // SAFETY: `start` is inside `bytes`.
                    unsafe { (self.bytes.get() as *mut u8).add(start) }
                }
                _ => core::ptr::null_mut(),
            }
        })
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static HEAP: Heap = Heap {
    bytes: UnsafeCell::new([0; HEAP_BYTES]),
    used: critical_section::Mutex::new(Cell::new(0)),
};
