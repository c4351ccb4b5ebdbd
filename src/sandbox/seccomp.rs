//! The seccomp filter of a sandboxed command: what the namespaces do not
//! cover, compiled with `seccompiler` (rust-vmm's, Firecracker's filter
//! compiler) and installed just before `execve`.
//!
//! Denied with `EPERM`:
//! - acting on other processes: `ptrace`, `process_vm_readv`/`writev`,
//!   `kcmp`, `pidfd_getfd`; `prlimit64`, `setpriority`, `sched_setaffinity`,
//!   `sched_setscheduler`, `sched_setparam` and `sched_setattr` on any
//!   process but the caller (pid argument not 0): inside the PID namespace
//!   the only other processes are the command's own and the sandbox's init,
//!   and the init must not be slowed or limited;
//! - the kernel's keyrings (`keyctl`, `add_key`, `request_key`), which are
//!   not namespaced by the user namespace alone;
//! - `perf_event_open`, `bpf`, `userfaultfd`, `io_uring_*` (its operations
//!   bypass this filter), module loading, `kexec_*`, `reboot`, `swapon`,
//!   `quotactl`, `acct`, `open_by_handle_at`, `lookup_dcookie`;
//! - changing the view: `mount`, `umount2`, `pivot_root`, `chroot`,
//!   `setns`, `unshare`, the new mount API (`fsopen`, `fsmount`, `fsconfig`,
//!   `fspick`, `open_tree`, `move_mount`, `mount_setattr`), and `clone` with
//!   any `CLONE_NEW*` flag (a new user namespace inside would give the
//!   command capabilities over new namespaces of its own);
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`, which type into a terminal.
//!
//! `clone3` gets `ENOSYS`, because its flags live in memory a filter cannot
//! read: the C library then falls back to `clone`, whose flags it can.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// The `CLONE_NEW*` flags (and `CLONE_NEWTIME`, 0x80).
const CLONE_NEW: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80,
];

/// Denied outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_quotactl,
    libc::SYS_acct,
    libc::SYS_open_by_handle_at,
    libc::SYS_lookup_dcookie,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
];

/// Denied unless their first argument (a pid, or `who` of `setpriority`)
/// is 0, the caller itself.
const OTHERS_DENIED: &[libc::c_long] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
];

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp filter for the {} architecture", std::env::consts::ARCH))
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// The two programs to install: the `EPERM` filter and the `clone3` one.
pub fn programs() -> Result<[BpfProgram; 2], String> {
    let arch = arch()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        rules.insert(nr, Vec::new());
    }
    for &nr in OTHERS_DENIED {
        rules.insert(nr, vec![rule(vec![condition(0, SeccompCmpOp::Ne, 0)?])?]);
    }
    // setpriority(which, who, prio): `who` is the second argument.
    rules.insert(libc::SYS_setpriority, vec![rule(vec![condition(1, SeccompCmpOp::Ne, 0)?])?]);
    // clone(flags, …) on x86_64 and aarch64: the flags are the first argument.
    let clone: Result<Vec<SeccompRule>, String> =
        CLONE_NEW.iter().map(|&f| rule(vec![condition(0, SeccompCmpOp::MaskedEq(f), f)?])).collect();
    rules.insert(libc::SYS_clone, clone?);
    let tty: Result<Vec<SeccompRule>, String> = [u64::from(libc::TIOCSTI as u32), 0x541C]
        .iter()
        .map(|&req| rule(vec![condition(1, SeccompCmpOp::MaskedEq(0xffff_ffff), req)?]))
        .collect();
    rules.insert(libc::SYS_ioctl, tty?);
    let deny = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| e.to_string())?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    Ok([
        BpfProgram::try_from(deny).map_err(|e| e.to_string())?,
        BpfProgram::try_from(clone3).map_err(|e| e.to_string())?,
    ])
}

/// Installs `programs` on the calling thread (`no_new_privs` must be set).
/// Only system calls: safe between `fork` and `execve`.
pub fn install(programs: &[BpfProgram; 2]) -> Result<(), i32> {
    for p in programs {
        let prog = libc::sock_fprog { len: p.len() as u16, filter: p.as_ptr() as *mut libc::sock_filter };
        // SAFETY: `prog` points at a valid BPF program that outlives the call.
        let r = unsafe {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog)
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
        }
    }
    Ok(())
}

/// Whether the kernel has seccomp filters (`PR_GET_SECCOMP` answers).
pub fn available() -> bool {
    // SAFETY: plain prctl query.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_machine() {
        let [deny, clone3] = programs().unwrap();
        assert!(deny.len() > DENIED.len(), "{}", deny.len());
        assert!(!clone3.is_empty());
        assert!(available());
    }
}
