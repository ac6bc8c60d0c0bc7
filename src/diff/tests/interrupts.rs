//! Interrupt time is the machine's: a stack through an interrupt entry is in no
//! function's row and no share, on both sides, and shows on a line of its own;
//! system calls and page faults are still compared.

use super::*;
use crate::diff::interrupts::is_interrupt_entry;
use crate::diff::table::{Sides, write_markdown, write_table};

const USER: &str = "main;f1 1000\nmain;f2 1000\nmain;f3 1000\n";

fn folded(text: &str) -> Run {
    Run::from_folded(text, "x".into()).unwrap()
}

/// BASE with 10 samples of interrupts, NEW with 400 (12% of its CPU: a loaded
/// runner), the program's own samples the same.
fn loaded(irq: &str) -> ([Run; 1], [Run; 1]) {
    let side = |n: u64| folded(&format!("{USER}main;f1;{irq} {n}\n"));
    ([side(10)], [side(400)])
}

fn text(c: &Comparison, base: &[Run], new: &[Run], verbose: bool) -> String {
    let mut out = Vec::new();
    write_table(c, Sides { base, new }, 20, verbose, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn interrupt_entries_are_told_by_name() {
    for name in [
        "asm_sysvec_apic_timer_interrupt_[k]",
        "asm_sysvec_reschedule_ipi",
        "sysvec_call_function_single_[k]",
        "asm_common_interrupt",
        "asm_spurious_interrupt_[k]",
        "apic_timer_interrupt",
        "el0t_64_irq",
        "el1h_64_irq_handler_[k]",
        "el0_interrupt",
        "el1_interrupt",
        "gic_handle_irq",
    ] {
        assert!(is_interrupt_entry(name), "{name}");
    }
    for name in [
        "asm_exc_page_fault_[k]",
        "exc_page_fault",
        "entry_SYSCALL_64_[k]",
        "do_syscall_64",
        "el0_svc",
        "el0t_64_sync",
        "el0_da",
        "irqentry_exit_to_user_mode_[k]",
        "schedule",
        "main",
    ] {
        assert!(!is_interrupt_entry(name), "{name}");
    }
}

/// (a) Interrupt time rising alone, as on a loaded runner: no regression, and no
/// function's share moves (`--compare-interrupts` brings the old false alarm back).
#[test]
fn interrupt_time_rising_alone_moves_no_share() {
    // perf's folded output names kernel frames bare or with `_[k]`.
    for irq in [
        "asm_sysvec_reschedule_ipi_[k];irqentry_exit_to_user_mode_[k];schedule_[k]",
        "asm_sysvec_reschedule_ipi;irqentry_exit_to_user_mode;schedule",
        "entry_SYSCALL_64_[k];do_syscall_64_[k];asm_sysvec_apic_timer_interrupt_[k];hrtimer_interrupt_[k]",
    ] {
        let (base, new) = loaded(irq);
        let c = compare(&base, &new, gate(0.05)).unwrap();
        assert!(named(&c).is_empty(), "{irq}: {:?}", named(&c));
        for r in &c.rows {
            assert!(!r.function.contains("sysvec"), "{irq}: {}", r.function);
            assert!(!r.function.contains("irqentry"), "{irq}: {}", r.function);
            assert!((r.base_share - r.new_share).abs() < 1e-12, "{irq}: {r:?}");
            let moved = matches!(r.verdict, Verdict::Slower | Verdict::Faster);
            assert!(!moved, "{irq}: {r:?}");
        }
        let f1 = c.rows.iter().find(|r| r.function == "f1").unwrap();
        assert!((f1.base_share - 1.0 / 3.0).abs() < 1e-12, "{f1:?}");
        let i = c.interrupts.unwrap();
        assert_eq!((i.base_samples, i.new_samples), (10, 400));
        assert!((i.new_share - 400.0 / 3400.0).abs() < 1e-12, "{i:?}");

        let opts = CompareOptions {
            compare_interrupts: true,
            ..gate(0.05)
        };
        let c = compare(&base, &new, opts).unwrap();
        assert!(c.interrupts.is_none());
        assert!(
            named(&c).contains(&"f1".to_owned()),
            "{irq}: {:?}",
            named(&c)
        );
    }
}

/// The same from a recording, where kernel frames carry their kind: a user
/// function that happens to bear an entry's name is the program's.
#[test]
fn a_recordings_kernel_frames_are_told_by_kind() {
    let rec = |irq: u64, user_named: u64| {
        let mut r = run(&[1000, 1000, 1000, user_named]);
        r.frames[4].text = "asm_sysvec_mine".into();
        r.frames.push(Label {
            text: "asm_sysvec_apic_timer_interrupt_[k]".into(),
            class: FrameClass::Kernel,
        });
        r.stacks.push((
            vec![0, 1, 5],
            StackWeight {
                samples: irq,
                cpu_ns: irq * 1_000_000,
            },
        ));
        r.samples += irq;
        r.cpu_ns += irq * 1_000_000;
        r
    };
    let (base, new) = ([rec(10, 100)], [rec(400, 300)]);
    let c = compare(&base, &new, gate(0.05)).unwrap();
    assert_eq!(named(&c), ["asm_sysvec_mine"]);
    assert_eq!(c.interrupts.unwrap().new_samples, 400);
    let f0 = c.rows.iter().find(|r| r.function == "f0").unwrap();
    assert!((f0.base_share - 1000.0 / 3100.0).abs() < 1e-12, "{f0:?}");
}

/// (b) Page faults and system calls are the program's: still compared, and a
/// rise in them still fails the gate in the user function that causes it.
#[test]
fn page_faults_and_system_calls_are_still_compared() {
    for kernel in [
        "asm_exc_page_fault_[k];exc_page_fault_[k];handle_mm_fault_[k]",
        "entry_SYSCALL_64_[k];do_syscall_64_[k];ksys_write_[k]",
    ] {
        let side = |n: u64| [folded(&format!("{USER}main;f1;{kernel} {n}\n"))];
        let (base, new) = (side(20), side(600));
        let c = compare(&base, &new, gate(0.05)).unwrap();
        assert_eq!(c.interrupts.unwrap().new_samples, 0);
        let entry = kernel.split(';').next().unwrap();
        let row = c.rows.iter().find(|r| r.function == entry).unwrap();
        assert_eq!(row.verdict, Verdict::Slower, "{row:?}");
        assert!(named(&c).contains(&"f1".to_owned()), "{:?}", named(&c));
    }
}

/// (c) The interrupts line, with both sides' shares, in the short and the full
/// table, markdown and JSON; none when interrupts are compared as functions.
#[test]
fn the_interrupts_line_shows_both_sides() {
    let (base, new) = loaded("asm_sysvec_reschedule_ipi_[k];schedule_[k]");
    let c = compare(&base, &new, gate(0.05)).unwrap();
    let want = "interrupts: BASE 0.33% NEW 11.76% of CPU — the machine's, not compared";
    for verbose in [false, true] {
        let t = text(&c, &base, &new, verbose);
        assert!(t.contains(want), "{t}");
        assert!(!t.lines().next().unwrap().contains("REGRESSION"), "{t}");
    }
    let mut md = Vec::new();
    write_markdown(
        &c,
        Sides {
            base: &base,
            new: &new,
        },
        20,
        &mut md,
    )
    .unwrap();
    let md = String::from_utf8(md).unwrap();
    assert!(
        md.contains("interrupts: BASE 0.33% NEW 11.76% of CPU"),
        "{md}"
    );
    let mut json = Vec::new();
    crate::diff::json::write(
        &c,
        Sides {
            base: &base,
            new: &new,
        },
        &mut json,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let i = &v["interrupts"];
    assert_eq!(i["new_samples"], 400);
    assert_eq!(i["verdict"], "untested");
    assert!((i["base_share_pct"].as_f64().unwrap() - 1000.0 / 3010.0).abs() < 1e-9);

    let opts = CompareOptions {
        compare_interrupts: true,
        ..gate(0.05)
    };
    let c = compare(&base, &new, opts).unwrap();
    assert!(!text(&c, &base, &new, true).contains("interrupts:"));
}
