//! The exported C functions themselves, as the rocm backend calls them: statuses as `int`s, null
//! out-parameters, `hipGetLastError`'s read-and-reset, the properties written at hip-sys's
//! offsets, and a launch through `extra` with `HIP_LAUNCH_PARAM_BUFFER_POINTER/SIZE/END`. They
//! share the process's one device, so nothing here faults it.

mod common;

use std::ffi::{CStr, c_void};
use std::ptr::null_mut;

use w4a16_hip_emu::launch::{PARAM_BUFFER_POINTER, PARAM_BUFFER_SIZE, PARAM_END};
use w4a16_hip_emu::props::{GCN_ARCH_NAME_OFFSET, PROP_BYTES};
use w4a16_hip_emu::*;

fn gfx() -> &'static str {
    w4a16_hip_emu::runtime::configured()
        .expect("a valid environment")
        .0
        .gfx
}

#[test]
fn statuses_and_the_last_error_follow_hip() {
    let mut count = 0;
    assert_eq!(hipGetDeviceCount(&mut count), 0);
    assert_eq!(count, 1);
    assert_eq!(hipGetDeviceCount(null_mut()), 1, "hipErrorInvalidValue");
    assert_eq!(hipSetDevice(1), 101, "hipErrorInvalidDevice");
    assert_eq!(hipGetLastError(), 101, "the last error of this thread");
    assert_eq!(hipGetLastError(), 0, "reset by reading");
    assert_eq!(hipSetDevice(0), 0);
    assert_eq!(
        hipFree(0x1234 as *mut c_void),
        17,
        "hipErrorInvalidDevicePointer"
    );
    assert_eq!(hipStreamDestroy(0x1234 as *mut c_void), 400);
    assert_eq!(hipEventQuery(0x1234 as *mut c_void), 400);
    // SAFETY: a null out-parameter is refused before anything is written.
    assert_eq!(unsafe { hipMalloc(null_mut(), 16) }, 1);
    let describe = unsafe { CStr::from_ptr(w4a16HipEmuDescribe()) };
    assert!(describe.to_str().unwrap().contains("emulated HIP runtime"));
}

#[test]
fn properties_land_at_hip_sys_offsets() {
    // u64 words: hipDeviceProp_t's 8-byte alignment, 64 bytes to spare past it.
    let mut words = vec![0u64; (PROP_BYTES + 64) / 8];
    // SAFETY: a buffer larger than hipDeviceProp_t, suitably aligned.
    assert_eq!(
        unsafe { hipGetDeviceProperties(words.as_mut_ptr().cast(), 0) },
        0
    );
    let buf: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let name = CStr::from_bytes_until_nul(&buf[..256])
        .unwrap()
        .to_str()
        .unwrap();
    assert!(name.starts_with("w4a16 emulated HIP runtime"), "{name}");
    let arch =
        CStr::from_bytes_until_nul(&buf[GCN_ARCH_NAME_OFFSET..GCN_ARCH_NAME_OFFSET + 256]).unwrap();
    assert_eq!(arch.to_str().unwrap(), gfx());
    assert!(
        buf[PROP_BYTES..].iter().all(|b| *b == 0),
        "nothing past the struct"
    );
    assert_eq!(
        unsafe { hipGetDeviceProperties(words.as_mut_ptr().cast(), 2) },
        101
    );
}

#[test]
fn a_launch_through_extra_runs_and_a_wrong_size_is_refused() {
    let Some(image) = common::add_one(gfx()) else {
        return;
    };
    // SAFETY (throughout): out-parameters of the right types, host buffers of the copied sizes,
    // an `extra` list ended by HIP_LAUNCH_PARAM_END.
    unsafe {
        let mut module = null_mut();
        assert_eq!(hipModuleLoadData(&mut module, image.as_ptr().cast()), 0);
        let mut f = null_mut();
        assert_eq!(hipModuleGetFunction(&mut f, module, c"add_one".as_ptr()), 0);
        assert_eq!(hipModuleGetFunction(&mut f, module, c"nope".as_ptr()), 500);
        let input: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let (mut x, mut y) = (null_mut(), null_mut());
        assert_eq!(hipMalloc(&mut x, 256), 0);
        assert_eq!(hipMalloc(&mut y, 256), 0);
        assert_eq!(hipMemcpy(x, input.as_ptr().cast(), 256, 1), 0);
        let mut stream = null_mut();
        assert_eq!(hipStreamCreate(&mut stream), 0);
        let mut args = common::args(x as u64, y as u64, 2.0);
        let launch = |size: usize, args: &mut Vec<u8>| {
            let mut size = size;
            let mut extra: [*mut c_void; 5] = [
                PARAM_BUFFER_POINTER as *mut c_void,
                args.as_mut_ptr().cast(),
                PARAM_BUFFER_SIZE as *mut c_void,
                (&mut size as *mut usize).cast(),
                PARAM_END as *mut c_void,
            ];
            hipModuleLaunchKernel(
                f,
                1,
                1,
                1,
                64,
                1,
                1,
                0,
                stream,
                null_mut(),
                extra.as_mut_ptr(),
            )
        };
        assert_eq!(
            launch(common::ARG_BYTES - 4, &mut args),
            1,
            "short of the float"
        );
        assert_eq!(hipGetLastError(), 1);
        assert_eq!(launch(common::ARG_BYTES, &mut args), 0);
        assert_eq!(hipGetLastError(), 0, "a good launch leaves no error");
        let mut ev = null_mut();
        assert_eq!(hipEventCreate(&mut ev), 0);
        assert_eq!(hipEventRecord(ev, stream), 0);
        assert_eq!(hipEventQuery(ev), 0);
        let mut out = vec![0f32; 64];
        assert_eq!(
            hipMemcpyAsync(out.as_mut_ptr().cast(), y, 256, 2, stream),
            0
        );
        let want: Vec<f32> = input.iter().map(|v| v + 2.0).collect();
        assert_eq!(out, want);
        assert_eq!(hipEventDestroy(ev), 0);
        assert_eq!(hipStreamDestroy(stream), 0);
        assert_eq!(hipFree(x), 0);
        assert_eq!(hipFree(y), 0);
        assert_eq!(hipModuleUnload(module), 0);
    }
}
