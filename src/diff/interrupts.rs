//! Time the kernel spent in interrupts taken while the target ran: the machine's,
//! not the program's. A sample whose stack passes through an interrupt entry frame
//! (x86-64 `asm_sysvec_*`, `asm_common_interrupt`; arm64 `el0_interrupt`,
//! `el1_interrupt`, `gic_handle_irq`; and what they call) was taken while the CPU
//! served a timer, a reschedule IPI, a device or the softirqs run on the way out,
//! with the preemption on return from it: how much of that lands on a process
//! follows the machine's load, not its code. [`set_apart`] takes those stacks out of
//! each run before functions are compared, so that they are in no function's row
//! and in neither side's share denominator, and counts them for a line of their own.
//! Synchronous entries (system calls, page faults, other exceptions) are the
//! program's and stay.

use super::input::{InputKind, Run, StackWeight};
use crate::profile::FrameClass;

/// How much of each side was interrupt time, set apart and not compared.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Interrupts {
    /// BASE's samples under an interrupt entry, all its runs together.
    pub base_samples: u64,
    /// NEW's samples under an interrupt entry (`base_samples` is BASE's).
    pub new_samples: u64,
    /// Their share of all of BASE's samples (interrupts included), pooled.
    pub base_share: f64,
    /// Their share of all of NEW's samples (`base_share` is BASE's).
    pub new_share: f64,
}

/// Whether a kernel frame's name (without its `_[k]` suffix) is an asynchronous
/// kernel entry: an interrupt (external, timer, inter-processor) or an NMI, on
/// x86-64 (5.8 and later, and the older names) or arm64.
pub fn is_interrupt_entry(name: &str) -> bool {
    let name = name.strip_suffix("_[k]").unwrap_or(name);
    // x86-64 since 5.8: the IDT entries and the C handlers they call.
    if name.starts_with("asm_sysvec_") || name.starts_with("sysvec_") {
        return true;
    }
    // arm64 since 5.13: the vector entries (`el0t_64_irq`, `el1h_64_fiq_handler`).
    if (name.starts_with("el0t_") || name.starts_with("el1h_"))
        && (name.contains("_irq") || name.contains("_fiq"))
    {
        return true;
    }
    // Any irqchip's root handler (`gic_handle_irq`, `generic_handle_irq`).
    if name.ends_with("_handle_irq") {
        return true;
    }
    matches!(
        name,
        // x86-64
        "asm_common_interrupt"
            | "common_interrupt"
            | "asm_spurious_interrupt"
            | "spurious_interrupt"
            | "asm_exc_nmi"
            | "exc_nmi"
            // x86-64 before 5.8
            | "apic_timer_interrupt"
            | "reschedule_interrupt"
            | "call_function_interrupt"
            | "call_function_single_interrupt"
            | "irq_work_interrupt"
            | "x86_platform_ipi"
            | "do_IRQ"
            // arm64
            | "el0_interrupt"
            | "el1_interrupt"
            | "el0_irq"
            | "el1_irq"
            | "el0_fiq"
            | "el1_fiq"
            | "handle_arch_irq"
    )
}

/// Whether a frame of `run` may name kernel code: a recording's frames say their
/// kind; a folded file's kernel frames carry `_[k]` only when its writer added it
/// (perf's own folded output names them bare), so any of its names may be one.
fn may_be_kernel(run: &Run, class: FrameClass) -> bool {
    class == FrameClass::Kernel || (run.kind == InputKind::Folded && class == FrameClass::Native)
}

/// `run` without the stacks that pass through an interrupt entry, its samples and
/// CPU time less theirs; and what was taken out.
fn split(run: &Run) -> (Run, StackWeight) {
    let entry: Vec<bool> = run
        .frames
        .iter()
        .map(|f| may_be_kernel(run, f.class) && is_interrupt_entry(&f.text))
        .collect();
    let mut out = StackWeight::default();
    let stacks = run
        .stacks
        .iter()
        .filter(|(stack, w)| {
            let irq = stack.iter().any(|&f| entry[f as usize]);
            if irq {
                out.samples += w.samples;
                out.cpu_ns = out.cpu_ns.saturating_add(w.cpu_ns);
            }
            !irq
        })
        .cloned()
        .collect();
    let kept = Run {
        stacks,
        samples: run.samples.saturating_sub(out.samples),
        cpu_ns: run.cpu_ns.saturating_sub(out.cpu_ns),
        ..run.clone()
    };
    (kept, out)
}

/// BASE's and NEW's runs with interrupt time taken out, and how much there was.
pub fn set_apart(base: &[Run], new: &[Run]) -> (Vec<Run>, Vec<Run>, Interrupts) {
    let side = |runs: &[Run]| {
        let (kept, out): (Vec<Run>, Vec<StackWeight>) = runs.iter().map(split).unzip();
        let irq: u64 = out.iter().map(|w| w.samples).sum();
        let all: u64 = runs.iter().map(|r| r.samples).sum();
        (kept, irq, irq as f64 / all.max(1) as f64)
    };
    let (b, base_samples, base_share) = side(base);
    let (n, new_samples, new_share) = side(new);
    let i = Interrupts {
        base_samples,
        new_samples,
        base_share,
        new_share,
    };
    (b, n, i)
}

/// The line that shows it: `interrupts: BASE 0.32% NEW 6.69% of CPU — the machine's,
/// not compared`.
pub fn line(i: &Interrupts) -> String {
    format!(
        "interrupts: BASE {:.2}% NEW {:.2}% of CPU — the machine's, not compared (time under an interrupt entry is in no function's row or share; --compare-interrupts to compare it).",
        i.base_share * 100.0,
        i.new_share * 100.0
    )
}
