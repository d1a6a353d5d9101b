//! The emulated runtime's semantics, on a fresh device per test (`Runtime::new`): memory and its
//! bound, copies in every direction, streams, events on the model clock, modules, launches and
//! their validation, and the sticky fault of a kernel that reads past its buffer. Every misuse
//! is checked for HIP's status code.

mod common;

use w4a16_emu::dispatch::Dims;
use w4a16_emu::machine::Machine;
use w4a16_hip_emu::error::HipError;
use w4a16_hip_emu::runtime::{self, Runtime};

fn device(gfx: &str) -> Runtime {
    Runtime::new(Machine::of(gfx).expect("a declared machine"), 1 << 20)
}

fn code(e: HipError) -> i32 {
    e.code()
}

fn upload(rt: &mut Runtime, data: &[u8]) -> u64 {
    let at = rt.malloc(data.len()).unwrap();
    // SAFETY: `data` is a host range of its length.
    unsafe {
        rt.memcpy(
            at,
            data.as_ptr() as u64,
            data.len(),
            runtime::HOST_TO_DEVICE,
        )
    }
    .unwrap();
    at
}

fn download(rt: &mut Runtime, at: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is a host range of `len` bytes.
    unsafe { rt.memcpy(out.as_mut_ptr() as u64, at, len, runtime::DEVICE_TO_HOST) }.unwrap();
    out
}

#[test]
fn memory_is_bounded_and_frees_only_what_it_allocated() {
    let mut rt = device("gfx1151");
    assert_eq!(rt.malloc(0), Ok(0), "hipMalloc(0) gives a null pointer");
    let a = rt.malloc(1 << 19).unwrap();
    let too_much = rt.malloc((1 << 19) + 1).unwrap_err();
    assert_eq!(code(too_much.clone()), 2, "{too_much}");
    assert!(too_much.to_string().contains("hipErrorOutOfMemory"));
    assert_eq!(rt.free(0), Ok(()), "hipFree(nullptr) is a no-op");
    assert_eq!(rt.free(a + 4).map_err(code), Err(17), "an interior pointer");
    rt.free(a).unwrap();
    assert_eq!(rt.free(a).map_err(code), Err(17), "a second free");
    assert!(
        rt.malloc(1 << 20).is_ok(),
        "freed memory is available again"
    );
}

#[test]
fn copies_go_in_every_direction_and_refuse_what_is_not_device_memory() {
    let mut rt = device("gfx1151");
    let data: Vec<u8> = (0..64u8).collect();
    let a = upload(&mut rt, &data);
    let b = rt.malloc(64).unwrap();
    // SAFETY (all copies below): host buffers of at least the copied length.
    unsafe { rt.memcpy(b, a, 64, runtime::DEVICE_TO_DEVICE) }.unwrap();
    assert_eq!(download(&mut rt, b, 64), data);
    // An interior device pointer, and hipMemcpyDefault finding both directions itself.
    let mut tail = [0u8; 16];
    unsafe { rt.memcpy(tail.as_mut_ptr() as u64, b + 48, 16, runtime::DEFAULT) }.unwrap();
    assert_eq!(tail[..], data[48..]);
    let ones = [1u8; 8];
    unsafe { rt.memcpy(b, ones.as_ptr() as u64, 8, runtime::DEFAULT) }.unwrap();
    assert_eq!(download(&mut rt, b, 8), ones);
    let mut host = [0u8; 4];
    unsafe {
        rt.memcpy(
            host.as_mut_ptr() as u64,
            ones.as_ptr() as u64,
            4,
            runtime::HOST_TO_HOST,
        )
    }
    .unwrap();
    assert_eq!(host, [1; 4]);
    // Misuse.
    let past = unsafe { rt.memcpy(b + 60, ones.as_ptr() as u64, 8, runtime::HOST_TO_DEVICE) };
    assert_eq!(
        past.map_err(code),
        Err(1),
        "a copy running past the allocation"
    );
    let host_as_device = unsafe {
        rt.memcpy(
            host.as_mut_ptr() as u64,
            ones.as_ptr() as u64,
            4,
            runtime::DEVICE_TO_HOST,
        )
    };
    assert_eq!(
        host_as_device.map_err(code),
        Err(1),
        "a host pointer as the device side"
    );
    assert_eq!(
        unsafe { rt.memcpy(0, a, 4, runtime::DEVICE_TO_HOST) }.map_err(code),
        Err(1)
    );
    assert_eq!(
        unsafe { rt.memcpy(b, a, 4, 7) }.map_err(code),
        Err(21),
        "no such hipMemcpyKind"
    );
    assert_eq!(
        unsafe { rt.memcpy(0, 0, 0, runtime::HOST_TO_DEVICE) },
        Ok(()),
        "zero bytes"
    );
}

#[test]
fn async_copies_need_a_live_stream() {
    let mut rt = device("gfx1100");
    let a = rt.malloc(16).unwrap();
    let data = [7u8; 16];
    let s = rt.stream_create().unwrap();
    // SAFETY (all copies below): `data` holds 16 bytes.
    unsafe { rt.memcpy_async(a, data.as_ptr() as u64, 16, runtime::HOST_TO_DEVICE, s) }.unwrap();
    unsafe { rt.memcpy_async(a, data.as_ptr() as u64, 16, runtime::HOST_TO_DEVICE, 0) }
        .expect("the null stream");
    assert_eq!(download(&mut rt, a, 16), data);
    rt.stream_destroy(s).unwrap();
    let gone = unsafe { rt.memcpy_async(a, data.as_ptr() as u64, 16, runtime::HOST_TO_DEVICE, s) };
    assert_eq!(gone.map_err(code), Err(400), "a destroyed stream");
    assert_eq!(
        rt.stream_destroy(s).map_err(code),
        Err(400),
        "destroyed twice"
    );
    assert_eq!(
        rt.stream_destroy(0).map_err(code),
        Err(400),
        "the null stream"
    );
}

#[test]
fn events_read_the_model_clock() {
    let mut rt = device("gfx1151");
    let (start, end) = (rt.event_create().unwrap(), rt.event_create().unwrap());
    assert_eq!(
        rt.event_elapsed(start, end).map_err(code),
        Err(400),
        "never recorded"
    );
    rt.event_record(start, 0).unwrap();
    let a = rt.malloc(1 << 20).unwrap();
    let data = vec![0u8; 1 << 20];
    // SAFETY: `data` holds the copied MiB.
    unsafe { rt.memcpy(a, data.as_ptr() as u64, 1 << 20, runtime::HOST_TO_DEVICE) }.unwrap();
    rt.event_record(end, 0).unwrap();
    rt.event_query(end).unwrap();
    // gfx1151's declared 256 GB/s: one MiB takes 4.096 µs of model time.
    let ms = rt.event_elapsed(start, end).unwrap();
    assert!((ms - 0.004096).abs() < 1e-7, "{ms} ms");
    let s = rt.stream_create().unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(
        rt.event_record(end, s).map_err(code),
        Err(400),
        "a destroyed stream"
    );
    rt.event_destroy(end).unwrap();
    assert_eq!(rt.event_query(end).map_err(code), Err(400));
    assert_eq!(rt.event_destroy(end).map_err(code), Err(400));
    assert_eq!(rt.event_elapsed(start, end).map_err(code), Err(400));
}

#[test]
fn the_target_and_memory_come_from_the_environment_or_refuse_naming_the_value() {
    // Read through the same parser the runtime uses at start-up.
    assert_eq!(runtime::DEFAULT_TARGET, "gfx1151");
    let bad = runtime::configured_from(Some("gfx942"), None).unwrap_err();
    assert_eq!(bad.code(), 100);
    assert!(bad.to_string().contains("gfx942"), "{bad}");
    let bad = runtime::configured_from(None, Some("lots")).unwrap_err();
    assert!(bad.to_string().contains("lots"), "{bad}");
    let (m, bytes) = runtime::configured_from(Some("gfx1201"), Some("64")).unwrap();
    assert_eq!((m.gfx, bytes), ("gfx1201", 64 << 20));
    let (m, bytes) = runtime::configured_from(None, None).unwrap();
    assert_eq!(
        (m.gfx, bytes),
        ("gfx1151", runtime::DEFAULT_MEMORY_MIB << 20)
    );
}

#[test]
fn modules_load_for_their_target_only_and_hand_out_their_kernels() {
    let Some(image) = common::add_one("gfx1151") else {
        return;
    };
    let mut rt = device("gfx1151");
    let m = rt.module_load(&image).unwrap();
    let f = rt.module_function(m, "add_one").unwrap();
    assert_eq!(
        rt.module_function(m, "add_one"),
        Ok(f),
        "one handle per kernel"
    );
    assert_eq!(rt.module_function(m, "add_two").map_err(code), Err(500));
    assert_eq!(rt.module_function(m + 1, "add_one").map_err(code), Err(400));
    rt.module_unload(m).unwrap();
    assert_eq!(
        rt.module_unload(m).map_err(code),
        Err(400),
        "unloaded twice"
    );
    let dims = Dims {
        grid: [1, 1, 1],
        block: [64, 1, 1],
        dynamic_lds: 0,
    };
    let stale = rt.launch(f, &dims, 0, |_| Ok(Vec::new()));
    assert_eq!(
        stale.map_err(code),
        Err(400),
        "a function of an unloaded module"
    );

    let mut other = device("gfx1100");
    let wrong = other.module_load(&image).unwrap_err();
    assert_eq!(wrong.code(), 209, "{wrong}");
    assert!(wrong.to_string().contains("gfx1151") && wrong.to_string().contains("gfx1100"));
    let not_code = other.module_load(b"\x7fELF not really").unwrap_err();
    assert_eq!(not_code.code(), 200, "{not_code}");
}

#[test]
fn the_image_length_comes_from_its_elf_header() {
    let Some(image) = common::add_one("gfx1100") else {
        return;
    };
    // SAFETY: a whole ELF image.
    assert_eq!(
        unsafe { w4a16_hip_emu::module::image_len(image.as_ptr()) },
        Ok(image.len())
    );
    let garbage = [0u8; 64];
    // SAFETY: 64 readable bytes.
    let e = unsafe { w4a16_hip_emu::module::image_len(garbage.as_ptr()) }.unwrap_err();
    assert_eq!(e.code(), 200, "{e}");
}

/// A device with `add_one` loaded, `input` uploaded and an output of the same size.
fn loaded(gfx: &str, input: &[f32]) -> Option<(Runtime, usize, u64, u64)> {
    let image = common::add_one(gfx)?;
    let mut rt = device(gfx);
    let m = rt.module_load(&image).unwrap();
    let f = rt.module_function(m, "add_one").unwrap();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let x = upload(&mut rt, &bytes);
    let y = rt.malloc(bytes.len()).unwrap();
    Some((rt, f, x, y))
}

fn dims(grid: u32, block: u32, lds: u32) -> Dims {
    Dims {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        dynamic_lds: lds,
    }
}

#[test]
fn a_launch_runs_the_machine_code_and_advances_the_clock() {
    for gfx in ["gfx1100", "gfx1151", "gfx1201"] {
        let input: Vec<f32> = (0..128).map(|i| i as f32).collect();
        let Some((mut rt, f, x, y)) = loaded(gfx, &input) else {
            return;
        };
        let (start, end) = (rt.event_create().unwrap(), rt.event_create().unwrap());
        rt.event_record(start, 0).unwrap();
        rt.launch(f, &dims(2, 64, 0), 0, |_| Ok(common::args(x, y, 0.5)))
            .unwrap();
        rt.event_record(end, 0).unwrap();
        let out: Vec<f32> = download(&mut rt, y, 512)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want: Vec<f32> = input.iter().map(|v| v + 0.5).collect();
        assert_eq!(out, want, "{gfx}");
        assert!(
            rt.event_elapsed(start, end).unwrap() > 0.0,
            "{gfx}: the launch took model time"
        );
    }
}

#[test]
fn launches_the_device_or_kernel_cannot_take_are_refused_before_running() {
    let Some((mut rt, f, x, y)) = loaded("gfx1151", &[0.0; 64]) else {
        return;
    };
    let args = |_: &_| Ok(common::args(x, y, 1.0));
    for (d, status, what) in [
        (dims(0, 64, 0), 9, "a zero grid"),
        (dims(1, 0, 0), 9, "a zero block"),
        (dims(1, 2048, 0), 9, "past the device's 1024 work-items"),
        (
            dims(1, 512, 0),
            701,
            "past the kernel's max_flat_workgroup_size 256",
        ),
        (dims(1, 64, 65 << 10), 701, "past 64 KiB of LDS"),
    ] {
        let e = rt.launch(f, &d, 0, args).unwrap_err();
        assert_eq!(e.code(), status, "{what}: {e}");
    }
    let bad_stream = rt.launch(f, &dims(1, 64, 0), 0xdead, args).unwrap_err();
    assert_eq!(bad_stream.code(), 400);
    assert_eq!(
        rt.launch(0x1, &dims(1, 64, 0), 0, args).map_err(code),
        Err(400),
        "no function"
    );
    let short = rt.launch(f, &dims(1, 64, 0), 0, |_| {
        Err(HipError::InvalidValue("short".into()))
    });
    assert_eq!(
        short.map_err(code),
        Err(1),
        "the argument reader's refusal is the launch's"
    );
    // Nothing ran: the output is still zero and the device is healthy.
    assert_eq!(download(&mut rt, y, 256), vec![0u8; 256]);
    assert_eq!(rt.healthy(), Ok(()));
}

#[test]
fn a_kernel_reading_past_its_buffer_is_a_sticky_illegal_address_at_the_next_wait() {
    let Some((mut rt, f, x, y)) = loaded("gfx1151", &[0.0; 64]) else {
        return;
    };
    let done = rt.event_create().unwrap();
    // Two workgroups of 64 over 64-element buffers: the second reads past `in`.
    let launched = rt.launch(f, &dims(2, 64, 0), 0, |_| Ok(common::args(x, y, 1.0)));
    assert_eq!(
        launched,
        Ok(()),
        "the launch itself is accepted, as on a GPU"
    );
    let fault = rt.event_query(done).unwrap_err();
    assert_eq!(fault.code(), 700, "{fault}");
    assert!(
        fault.to_string().contains("add_one"),
        "names the kernel: {fault}"
    );
    let mut out = [0u8; 4];
    // SAFETY: `out` holds 4 bytes.
    let later = unsafe { rt.memcpy(out.as_mut_ptr() as u64, y, 4, runtime::DEVICE_TO_HOST) };
    assert_eq!(later.map_err(code), Err(700), "sticky: every later call");
    assert_eq!(rt.malloc(4).map_err(code), Err(700));
}
