//! Per-thread f64 buffers that outlive one case. The offloaded reference builds X in f64 for
//! every case and the decoded W for every layer: tens of MB to GB each. A fresh allocation of
//! that size comes from the kernel as zeroed pages, and clearing them was a third of the CPU
//! side of a run (`bench --cpu-side`). A worker runs one case after another on its thread, so
//! the buffers of the last case serve the next.

use std::cell::RefCell;

/// Buffers kept per thread between uses, in bytes: above this a returned buffer is freed
/// (a worker of a many-worker run must not sit on the largest layer's operands for good).
pub const KEEP_BYTES: usize = 4 << 30;

/// What a buffer holds; each role keeps its own, so two in use at once never share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// X rows in f64.
    XSigned,
    /// |X| rows.
    XAbs,
}

const ROLES: usize = 2;

thread_local! {
    static KEPT: RefCell<[Vec<f64>; ROLES]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// A buffer of `len` values for `role`. Its contents are whatever it last held (zero past
/// its last length): the caller writes every value before reading any.
pub fn take(role: Role, len: usize) -> Vec<f64> {
    let mut v = KEPT.with(|k| std::mem::take(&mut k.borrow_mut()[role as usize]));
    resize_for_overwrite(&mut v, len);
    v
}

/// Returns a buffer taken for `role`, kept for the next [`take`] while the thread's kept
/// buffers stay within [`KEEP_BYTES`].
pub fn give(role: Role, v: Vec<f64>) {
    give_within(role, v, KEEP_BYTES);
}

fn give_within(role: Role, v: Vec<f64>, limit: usize) {
    KEPT.with(|k| {
        let mut kept = k.borrow_mut();
        let others: usize = kept
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != role as usize)
            .map(|(_, b)| b.capacity() * 8)
            .sum();
        if others + v.capacity() * 8 <= limit {
            kept[role as usize] = v;
        }
    });
}

/// `v` resized to `len` values without clearing the ones it keeps: for buffers whose every
/// value the caller writes (a reused allocation is then never touched twice).
pub fn resize_for_overwrite(v: &mut Vec<f64>, len: usize) {
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_reused_by_its_role_and_has_the_length_asked() {
        let mut x = take(Role::XSigned, 1000);
        assert_eq!(x.len(), 1000);
        x.fill(3.0);
        let at = x.as_ptr();
        give(Role::XSigned, x);
        // The other role gets a buffer of its own.
        let a = take(Role::XAbs, 10);
        assert_ne!(a.as_ptr(), at);
        // The same role gets the same allocation back, shorter or longer as asked.
        let y = take(Role::XSigned, 500);
        assert_eq!((y.len(), y.as_ptr()), (500, at));
        give(Role::XSigned, y);
        let z = take(Role::XSigned, 800);
        assert_eq!(z.len(), 800);
        assert!(z[..500].iter().all(|&v| v == 3.0), "what it last held");
        assert!(z[500..].iter().all(|&v| v == 0.0), "past its last length");
        give(Role::XAbs, a);
    }

    #[test]
    fn buffers_past_the_limit_are_not_kept() {
        let held = take(Role::XSigned, 100);
        give(Role::XSigned, held);
        // 100 values kept for XSigned: 101 more for XAbs pass a limit of 200 values.
        give_within(Role::XAbs, vec![1.0; 101], 200 * 8);
        assert_eq!(take(Role::XAbs, 0).capacity(), 0, "not kept");
        give_within(Role::XAbs, vec![1.0; 100], 200 * 8);
        assert_eq!(take(Role::XAbs, 0).capacity(), 100, "kept");
    }
}
