//! Turns on the machine for the tests of this one process. The demo (a simulated cluster
//! of 12 nodes with stand-in kubelets and 12 agent processes) runs alone among the tests
//! that start a simulated cluster; those run beside each other, as they did when each
//! file was a binary of its own. Other tests are light and take no turn.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Tests holding a shared turn, or -1 while one runs alone.
static HOLDERS: Mutex<isize> = Mutex::new(0);
static RELEASED: Condvar = Condvar::new();

/// A turn, given back when dropped. It may move between threads (an async test's
/// harness does), unlike a `std::sync::RwLock` guard.
#[must_use = "the turn ends when it is dropped"]
pub struct Turn {
    alone: bool,
}

fn holders() -> MutexGuard<'static, isize> {
    HOLDERS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait(guard: MutexGuard<'static, isize>) -> MutexGuard<'static, isize> {
    RELEASED.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// A turn beside the other shared ones; waits while a test runs alone.
pub fn shared() -> Turn {
    let mut n = holders();
    while *n < 0 {
        n = wait(n);
    }
    *n += 1;
    Turn { alone: false }
}

/// The machine to this test alone among turn-takers; waits for the others to finish.
pub fn alone() -> Turn {
    let mut n = holders();
    while *n != 0 {
        n = wait(n);
    }
    *n = -1;
    Turn { alone: true }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut n = holders();
        if self.alone {
            *n = 0;
        } else {
            *n -= 1;
        }
        RELEASED.notify_all();
    }
}
