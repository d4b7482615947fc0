//! The driver's contract on hand-made jobs over the virtual device: what
//! it refuses and how it names it, which ranges its cache hooks get and
//! when, deadlines, aborts, one job at a time, and errors the device itself
//! reports. The jobs carry no kernel, so the device ends each one with
//! `Unsupported` (its error register, decoded): these tests are about the
//! driver's wiring; `tests/models.rs` runs real ops.

mod common;

use std::time::Instant;

use common::{Buf, CacheOp, HostPlatform, Line, RecordingCache, with_timer};
use hilt_npu_driver::{Descriptor, Driver, Platform, VirtualNpu, WaitMode};
use hilt_runtime::accel::vnpu::{EngineFault, VnpuConfig, VnpuCore};
use hilt_runtime::accel::{
    AccelError, Accelerator, Access, AddressWindow, Capabilities, Job, JobRegion, RegionRole,
    Ticket,
};

fn region(buf: &mut Buf, at: usize, len: u32, access: Access, role: RegionRole) -> JobRegion {
    JobRegion {
        address: buf.0.as_mut_ptr() as usize + at,
        len,
        access,
        role,
    }
}

fn job(regions: &[JobRegion]) -> Job {
    let mut job = Job::new(3);
    for r in regions {
        // SAFETY: every region lies in a `Buf` the test keeps alive and
        // untouched until the job is waited or aborted.
        assert!(unsafe { job.push(*r) });
    }
    job
}

/// An input, an output, a scratch buffer and the op data, 64-byte aligned.
fn four_regions(buf: &mut Buf) -> [JobRegion; 4] {
    [
        region(buf, 0, 48, Access::Read, RegionRole::Input(0)),
        region(buf, 64, 40, Access::ReadWrite, RegionRole::Output(1)),
        region(buf, 128, 32, Access::ReadWrite, RegionRole::Scratch(0)),
        region(buf, 192, 20, Access::Read, RegionRole::Descriptor),
    ]
}

/// A slow engine: no job ends within a test unless stopped.
fn slow() -> VnpuConfig<'static> {
    let mut config = VnpuConfig::default();
    config.latency.job_cycles = u64::MAX / 2;
    config
}

/// Runs `body` with a driver (interrupt mode, the line wired) over a
/// virtual device on `config`, whose driver believes `caps`.
fn rig<T>(
    config: VnpuConfig<'_>,
    caps: Capabilities<'_>,
    body: impl FnOnce(&Driver<'_, &VirtualNpu<'_>>, &VirtualNpu<'_>, &RecordingCache<'_>) -> T,
) -> T {
    let device = VirtualNpu::new(VnpuCore::new(config));
    let host = HostPlatform::new();
    let cache = RecordingCache::new(&device);
    let platform = Platform {
        cache: &cache,
        event: &host,
        clock: &host,
    };
    let driver = Driver::new(&device, caps, platform, WaitMode::Interrupt);
    with_timer(&device, &driver, 1_000, Line::Wired, || {
        body(&driver, &device, &cache)
    })
}

#[test]
fn cache_hooks_get_every_region_and_the_descriptor_before_the_start_and_the_written_ones_after_the_end()
 {
    let mut buf = Buf([0; 512]);
    let regions = four_regions(&mut buf);
    let config = VnpuConfig::default();
    rig(config, config.capabilities(), |driver, _, cache| {
        let ticket = Ticket::submit(driver, &job(&regions)).unwrap();
        let cleaned = cache.take();
        let (descriptor, rest) = cleaned.split_last().unwrap();
        let expected: Vec<CacheOp> = regions
            .iter()
            .map(|r| CacheOp::Clean(r.address, r.len as usize))
            .collect();
        assert_eq!(rest, expected.as_slice());
        let CacheOp::Clean(at, len) = *descriptor else {
            panic!("{descriptor:?}")
        };
        assert_eq!(len, size_of::<Descriptor>());
        assert!(at.is_multiple_of(32), "a descriptor on its own lines");
        let buf_range = regions[0].address..regions[0].address + 512;
        assert!(!buf_range.contains(&at), "the descriptor is the driver's");
        // Nothing is invalidated while the device may still write.
        assert_eq!(
            ticket.wait(driver.now() + 1_000_000),
            Err(AccelError::Unsupported)
        );
        assert_eq!(
            cache.take(),
            [
                CacheOp::Invalidate(regions[1].address, 40),
                CacheOp::Invalidate(regions[2].address, 32),
            ]
        );
        let stats = driver.stats();
        assert_eq!((stats.started, stats.ended_by_interrupt), (1, 1));
        assert_eq!(stats.ended_by_poll, 0);
    });
}

#[test]
fn a_hung_device_misses_the_deadline_and_the_ticket_stops_it() {
    let mut buf = Buf([0; 512]);
    let regions = four_regions(&mut buf);
    let config = VnpuConfig {
        fault: EngineFault::NeverCompletes,
        ..VnpuConfig::default()
    };
    rig(config, config.capabilities(), |driver, device, _| {
        let ticket = Ticket::submit(driver, &job(&regions)).unwrap();
        let started = Instant::now();
        assert_eq!(ticket.wait(driver.now() + 5_000), Err(AccelError::Timeout));
        assert!(started.elapsed().as_micros() >= 5_000);
        // The wait's error stopped the device before returning, and the
        // stop ended in the interrupt handler.
        let stats = driver.stats();
        assert_eq!((stats.stops, stats.ended_by_interrupt), (1, 1));
        assert!(!device.is_busy());
        let again = Ticket::submit(driver, &job(&regions)).unwrap();
        again.abort();
        assert_eq!(driver.stats().stops, 2);
    });
}

#[test]
fn abort_returns_once_the_device_let_go_and_the_job_is_forgotten() {
    let mut buf = Buf([0; 512]);
    let regions = four_regions(&mut buf);
    let config = slow();
    rig(config, config.capabilities(), |driver, device, _| {
        let ticket = Ticket::submit(driver, &job(&regions)).unwrap();
        let id = ticket.id();
        assert_eq!(driver.poll(id), Ok(false));
        assert!(device.is_busy());
        ticket.abort();
        assert!(!device.is_busy());
        assert_eq!(driver.poll(id), Err(AccelError::UnknownJob));
        assert_eq!(driver.stats().stops, 1);
        // A dropped ticket aborts too.
        drop(Ticket::submit(driver, &job(&regions)).unwrap());
        assert!(!device.is_busy());
        assert_eq!(driver.stats().stops, 2);
    });
}

#[test]
fn one_job_at_a_time() {
    let mut buf = Buf([0; 512]);
    let regions = four_regions(&mut buf);
    let config = slow();
    rig(config, config.capabilities(), |driver, _, _| {
        let first = Ticket::submit(driver, &job(&regions)).unwrap();
        assert_eq!(
            Ticket::submit(driver, &job(&regions)).map(|t| t.id()),
            Err(AccelError::Busy)
        );
        first.abort();
        assert_eq!(driver.stats().started, 1);
    });
}

#[test]
fn jobs_the_device_cannot_take_are_refused_by_name_before_it_sees_them() {
    let mut buf = Buf([0; 512]);
    let [input, output, ..] = four_regions(&mut buf);
    let misaligned = region(&mut buf, 264, 16, Access::Read, RegionRole::Input(3));
    let far = region(&mut buf, 320, 16, Access::Read, RegionRole::Input(4));
    let read_only_output = JobRegion {
        access: Access::Read,
        ..output
    };
    let windows = [AddressWindow {
        start: input.address,
        len: 256,
        writable: true,
    }];
    let config = VnpuConfig {
        windows: &windows,
        max_regions: 3,
        ..VnpuConfig::default()
    };
    rig(config, config.capabilities(), |driver, device, cache| {
        let refused = |regions: &[JobRegion]| driver.submit(&job(regions)).unwrap_err();
        assert_eq!(
            refused(&[input, misaligned]),
            AccelError::Misaligned {
                region: 1,
                role: RegionRole::Input(3)
            }
        );
        assert_eq!(
            refused(&[input, output, far]),
            AccelError::OutsideWindow {
                region: 2,
                role: RegionRole::Input(4)
            }
        );
        assert_eq!(
            refused(&[input, read_only_output]),
            AccelError::WriteToReadOnly {
                region: 1,
                role: RegionRole::Output(1)
            }
        );
        assert_eq!(
            refused(&[input, output, input, output]),
            AccelError::TooManyRegions { count: 4 }
        );
        assert_eq!(driver.stats().started, 0);
        assert_eq!(device.stats().jobs, 0);
        assert!(cache.take().is_empty(), "nothing cleaned for a refused job");
    });
}

#[test]
fn the_device_error_register_is_decoded_into_the_error_it_names() {
    let mut buf = Buf([0; 512]);
    let [input, output, ..] = four_regions(&mut buf);
    let misaligned = region(&mut buf, 264, 16, Access::Read, RegionRole::Input(3));
    // The driver believes 8-byte bases will do; the device wants 16.
    let config = VnpuConfig::default();
    let caps = Capabilities {
        align: 8,
        ..config.capabilities()
    };
    rig(config, caps, |driver, _, _| {
        let ticket = Ticket::submit(driver, &job(&[input, output, misaligned])).unwrap();
        assert_eq!(
            ticket.wait(driver.now() + 1_000_000),
            Err(AccelError::Misaligned {
                region: 2,
                role: RegionRole::Input(3)
            })
        );
        assert_eq!(driver.stats().ended_by_interrupt, 1);
    });
    // An engine failure of its own comes back with its code.
    let config = VnpuConfig {
        fault: EngineFault::Error(0x2A),
        ..VnpuConfig::default()
    };
    rig(config, config.capabilities(), |driver, _, _| {
        let ticket = Ticket::submit(driver, &job(&[input, output])).unwrap();
        assert_eq!(
            ticket.wait(driver.now() + 1_000_000),
            Err(AccelError::Engine { code: 0x2A })
        );
    });
}
