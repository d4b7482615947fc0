//! vnpu's tests: jobs made by hand on 64-byte aligned buffers, through the
//! core and the stepped driver.

use super::*;
use crate::accel::{Accelerator, Access, Job, JobRegion, NEVER, RegionRole, Ticket};

/// A 64-byte aligned buffer for hand-made jobs.
#[repr(C, align(64))]
struct Buf([u8; 256]);

fn job(regions: &[JobRegion]) -> Job {
    let mut job = Job::new(7);
    for r in regions {
        // SAFETY: every test region lies in a `Buf` that outlives the job.
        assert!(unsafe { job.push(*r) });
    }
    job
}

/// Regions are addresses from one raw pointer to the buffer; the tests
/// touch the buffer only through that pointer while jobs hold it.
fn region(base: *mut u8, at: usize, len: u32, access: Access, role: RegionRole) -> JobRegion {
    JobRegion {
        address: base as usize + at,
        len,
        access,
        role,
    }
}

#[test]
fn the_driver_checks_name_the_region_at_fault() {
    let mut buf = Buf([0; 256]);
    let base = buf.0.as_mut_ptr();
    let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
    let output = region(base, 64, 32, Access::ReadWrite, RegionRole::Output(2));
    let mut core = VnpuCore::new(VnpuConfig::default());
    let misaligned = region(base, 8, 16, Access::Read, RegionRole::Input(3));
    assert_eq!(
        core.submit(&job(&[input, misaligned])),
        Err(AccelError::Misaligned {
            region: 1,
            role: RegionRole::Input(3)
        })
    );
    let read_only_output = JobRegion {
        access: Access::Read,
        ..output
    };
    assert_eq!(
        core.submit(&job(&[input, read_only_output])),
        Err(AccelError::WriteToReadOnly {
            region: 1,
            role: RegionRole::Output(2)
        })
    );
    let windows = [
        AddressWindow {
            start: base as usize,
            len: 64,
            writable: false,
        },
        AddressWindow {
            start: base as usize + 64,
            len: 64,
            writable: true,
        },
    ];
    let mut windowed = VnpuCore::new(VnpuConfig {
        windows: &windows,
        ..VnpuConfig::default()
    });
    let far = region(base, 128, 32, Access::Read, RegionRole::Input(4));
    assert_eq!(
        windowed.submit(&job(&[input, output, far])),
        Err(AccelError::OutsideWindow {
            region: 2,
            role: RegionRole::Input(4)
        })
    );
    let output_in_rom = region(base, 32, 32, Access::ReadWrite, RegionRole::Output(2));
    assert_eq!(
        windowed.submit(&job(&[input, output_in_rom])),
        Err(AccelError::WriteToReadOnly {
            region: 1,
            role: RegionRole::Output(2)
        })
    );
    let mut two = VnpuCore::new(VnpuConfig {
        max_regions: 1,
        ..VnpuConfig::default()
    });
    assert_eq!(
        two.submit(&job(&[input, output])),
        Err(AccelError::TooManyRegions { count: 2 })
    );
    // A job with no kernel to run completes with `Unsupported`, and only
    // after its cycles: the default's fixed cost.
    let fixed = LatencyModel::MICRO_NPU.job_cycles;
    let id = windowed.submit(&job(&[input, output])).unwrap();
    assert_eq!(windowed.submit(&job(&[input])), Err(AccelError::Busy));
    assert!(!windowed.step(fixed - 1));
    assert_eq!(windowed.poll(id), Ok(false));
    assert!(windowed.step(1));
    assert_eq!(windowed.retire(id), Err(AccelError::Unsupported));
    assert!(!windowed.is_busy());
}

#[test]
fn outputs_hold_the_pattern_from_the_start_and_leases_catch_writes() {
    let mut buf = Buf([0; 256]);
    let base = buf.0.as_mut_ptr();
    let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
    let output = region(base, 64, 32, Access::ReadWrite, RegionRole::Output(2));
    let mut core = VnpuCore::new(VnpuConfig::default());
    let id = core.submit(&job(&[input, output])).unwrap();
    // SAFETY: inside `buf`, through the pointer the job's regions use.
    let byte = |i: usize| unsafe { base.add(i).read_volatile() };
    assert!((64..96).all(|i| byte(i) == OUTPUT_PATTERN));
    core.step(10);
    assert_eq!(core.violation(), None);
    // Someone writes the input while the engine holds it: seen when
    // the job computes (leases are not checked at every step).
    // SAFETY: as above.
    unsafe { base.add(5).write_volatile(1) };
    core.step(10);
    assert_eq!(core.violation(), None);
    core.step(10_000);
    let v = core.violation().unwrap();
    assert_eq!((v.job, v.op), (id, 7));
    assert_eq!(
        v.error,
        AccelError::LeaseViolation {
            region: 0,
            role: RegionRole::Input(1)
        }
    );
    assert_eq!(core.retire(id), Err(v.error));
}

#[test]
fn dropping_an_unwaited_ticket_aborts_the_job() {
    let mut buf = Buf([0; 256]);
    let base = buf.0.as_mut_ptr();
    let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
    let engine = SteppedVnpu::new(VnpuConfig::default(), Never);
    {
        let _ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
        assert!(engine.core.borrow().is_busy());
    }
    assert!(!engine.core.borrow().is_busy());
    // Aborted explicitly, or waited past its deadline: freed as well.
    let ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
    ticket.abort();
    assert!(!engine.core.borrow().is_busy());
    let ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
    assert_eq!(ticket.wait(5), Err(AccelError::Timeout));
    assert!(!engine.core.borrow().is_busy());
}

#[test]
fn steppers_complete_at_once_late_or_never() {
    let mut buf = Buf([0; 256]);
    let base = buf.0.as_mut_ptr();
    let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
    let at_once = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let ticket = Ticket::submit(&at_once, &job(&[input])).unwrap();
    assert_eq!(ticket.poll(), Ok(true));
    assert_eq!(ticket.wait(NEVER), Err(AccelError::Unsupported));
    // 2000 cycles at 500 per tick: done at the fourth tick.
    let slow = VnpuConfig {
        latency: LatencyModel {
            job_cycles: 2_000,
            cycles_per_1000_macs: 4,
        },
        ..VnpuConfig::default()
    };
    let late = SteppedVnpu::new(slow, Slices(500));
    let ticket = Ticket::submit(&late, &job(&[input])).unwrap();
    assert_eq!(ticket.poll(), Ok(false));
    assert_eq!(late.now(), 1);
    assert_eq!(ticket.wait(NEVER), Err(AccelError::Unsupported));
    assert_eq!(late.now(), 4);
    assert_eq!(late.stats().busy_cycles, 2000);
}

#[test]
fn invalidate_copies_whole_lines_back() {
    let mut memory = Buf([1; 256]);
    let mut shadow = [0u8; 256];
    let start = memory.0.as_mut_ptr() as usize;
    {
        // SAFETY: `memory` outlives `core` and is what the shadow mirrors.
        let mut core = unsafe { VnpuCore::non_coherent(VnpuConfig::default(), &mut shadow, start) };
        // One byte invalidated: its whole 32-byte line comes back from the
        // engine's view, destroying the CPU's neighbours on that line.
        core.invalidate(start + 40, 1);
    }
    assert!(memory.0[32..64].iter().all(|&b| b == 0));
    assert!(
        memory.0[..32]
            .iter()
            .chain(&memory.0[64..])
            .all(|&b| b == 1)
    );
}
