//! A tiny bump allocator. Nothing in the firmware allocates (hilt's model
//! verifier, `hilt_runtime::schema::verify`, builds no error trace), but
//! the `flatbuffers` crate links `alloc` for its builder, and a binary that
//! links `alloc` must name a global allocator. The linker drops this one
//! when, as now, nothing calls it. It never frees; out of space returns
//! null, which ends in the panic handler.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::{Cell, UnsafeCell};

const SIZE: usize = 2048;

struct Bump {
    memory: UnsafeCell<[u8; SIZE]>,
    next: Cell<usize>,
}

// SAFETY: allocation hands out disjoint ranges: the bump pointer moves
// inside a critical section (ARMv6-M has no compare-and-swap).
unsafe impl Sync for Bump {}

// SAFETY: every returned pointer is inside `memory`, aligned as asked, and
// never handed out twice.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.memory.get() as usize;
        cortex_m::interrupt::free(|_| {
            let start = (base + self.next.get()).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > SIZE {
                return core::ptr::null_mut();
            }
            self.next.set(end);
            // SAFETY: `start < SIZE`, inside the array.
            unsafe { (self.memory.get() as *mut u8).add(start) }
        })
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static HEAP: Bump = Bump {
    memory: UnsafeCell::new([0; SIZE]),
    next: Cell::new(0),
};
