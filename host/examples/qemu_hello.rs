use std::time::Duration;
fn main() {
    let elf = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let image = hilt::elf::inspect(&elf).unwrap();
    println!("{image:?}");
    let settings = hilt::board::QemuSettings {
        machine: "mps2-an386".into(),
        cpu: "cortex-m4".into(),
        icount_shift: 0,
    };
    let mut qemu = hilt::qemu::Qemu::start(&settings, &elf).unwrap();
    let mut gdb = qemu.connect(Duration::from_secs(5)).unwrap();
    let t = std::time::Instant::now();
    let rtt = hilt::rtt::Rtt::attach(&mut gdb, image.rtt_address, Duration::from_secs(5)).unwrap();
    println!("rtt attached in {:?}: {rtt:?}", t.elapsed());
    let mut link = hilt::link::Link::new(&mut gdb, rtt);
    link.send(&hilt_proto::Message::HelloRequest, Duration::from_secs(5))
        .unwrap();
    for _ in 0..2 {
        let r = link.recv(Duration::from_secs(5), "hello", |m| format!("{m:?}"));
        println!("{r:?}");
    }
    println!("logs: {:?}", link.logs);
    println!("total {:?}", t.elapsed());
}
