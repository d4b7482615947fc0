//! [`Arena`] as the reference port: its tail is the persistent allocator,
//! its temp stack and head the non-persistent one.

use super::{AllocatorMemory, NonPersistentAllocator, PersistentAllocator};
use crate::arena::{Arena, ArenaError, Region};

impl AllocatorMemory for Arena<'_> {
    fn memory_len(&self) -> usize {
        self.capacity()
    }

    fn memory_address(&self) -> usize {
        self.bytes(Region::default()).as_ptr() as usize
    }

    fn region_bytes(&mut self, region: Region) -> &mut [u8] {
        self.bytes_mut(region)
    }
}

impl PersistentAllocator for Arena<'_> {
    fn allocate_persistent(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        self.alloc_persistent(size, align)
    }

    fn persistent_used_bytes(&self) -> usize {
        self.tail_bytes()
    }
}

impl NonPersistentAllocator for Arena<'_> {
    fn allocate_temp(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        self.alloc_temp(size, align)
    }

    fn reset_temp(&mut self) {
        Arena::reset_temp(self);
    }

    fn commit_head(&mut self, size: usize, align: u32) -> Result<Region, ArenaError> {
        Arena::commit_head(self, size, align)
    }

    fn head(&self) -> Region {
        Arena::head(self)
    }
}
