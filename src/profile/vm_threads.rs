//! Threads a runtime runs for itself, told apart from the application's by their names:
//! HotSpot names its garbage collector, JIT compiler and housekeeping threads (`GC
//! Thread#0`, `C2 CompilerThre`, `VM Thread`; /proc cuts names to 15 bytes). Outputs
//! group them under `[JVM]` and their kind, so a flame graph by thread shows at a glance
//! what the VM cost beside the application's own threads.

/// What a runtime's own thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VmThreadKind {
    /// Garbage collection (and reference processing).
    Gc,
    /// Compiling code (and sweeping the code cache).
    Compiler,
    /// The VM's other housekeeping: safepoints, signals, services, finalization.
    Runtime,
}

/// A thread group: the runtime and what its threads do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadGroup {
    /// The runtime, as its root frame says it: `JVM`.
    pub runtime: &'static str,
    /// What the threads do.
    pub kind: VmThreadKind,
}

impl VmThreadKind {
    /// The word outputs show: `GC`, `JIT compiler`, `runtime`.
    pub fn label(self) -> &'static str {
        match self {
            VmThreadKind::Gc => "GC",
            VmThreadKind::Compiler => "JIT compiler",
            VmThreadKind::Runtime => "runtime",
        }
    }
}

impl ThreadGroup {
    /// The root frames a thread of the group goes under: `[JVM]`, then `[GC]`.
    pub fn root_frames(self) -> [String; 2] {
        [
            format!("[{}]", self.runtime),
            format!("[{}]", self.kind.label()),
        ]
    }
}

impl std::fmt::Display for ThreadGroup {
    /// `JVM GC`, `JVM JIT compiler`, `JVM runtime`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.runtime, self.kind.label())
    }
}

/// HotSpot's own threads by the start of their names (JDK 8 to 21; G1, Parallel, Serial,
/// ZGC, Shenandoah; C1, C2, Graal's JVMCI).
const HOTSPOT: &[(&str, VmThreadKind)] = &[
    ("GC Thread#", VmThreadKind::Gc),
    ("GC task thread", VmThreadKind::Gc),
    ("Gang worker#", VmThreadKind::Gc),
    ("G1 ", VmThreadKind::Gc),
    ("ZDirector", VmThreadKind::Gc),
    ("ZDriver", VmThreadKind::Gc),
    ("ZStat", VmThreadKind::Gc),
    ("ZUncommitter", VmThreadKind::Gc),
    ("ZUnmapper", VmThreadKind::Gc),
    ("ZWorker#", VmThreadKind::Gc),
    ("Shenandoah", VmThreadKind::Gc),
    ("Concurrent Mark", VmThreadKind::Gc),
    ("Reference Handl", VmThreadKind::Gc),
    ("Finalizer", VmThreadKind::Gc),
    ("Common-Cleaner", VmThreadKind::Gc),
    ("C1 CompilerThre", VmThreadKind::Compiler),
    ("C2 CompilerThre", VmThreadKind::Compiler),
    ("JVMCI", VmThreadKind::Compiler),
    ("Sweeper thread", VmThreadKind::Compiler),
    ("VM Thread", VmThreadKind::Runtime),
    ("VM Periodic Tas", VmThreadKind::Runtime),
    ("Service Thread", VmThreadKind::Runtime),
    ("Monitor Deflati", VmThreadKind::Runtime),
    ("Signal Dispatch", VmThreadKind::Runtime),
    ("Attach Listener", VmThreadKind::Runtime),
    ("Notification Th", VmThreadKind::Runtime),
    ("RuntimeWorker#", VmThreadKind::Runtime),
    ("JFR ", VmThreadKind::Runtime),
];

/// The group of a thread named `name` in a HotSpot JVM, or None for the application's
/// threads (and the launcher's `java` threads, which run `main`).
pub fn jvm_thread_group(name: &str) -> Option<ThreadGroup> {
    HOTSPOT
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, kind)| ThreadGroup {
            runtime: "JVM",
            kind,
        })
}

/// Whether a mapped file is HotSpot's library (a process mapping it is a JVM).
pub fn is_libjvm(path: &str) -> bool {
    path.ends_with("/libjvm.so")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_threads_by_kind() {
        // Names as /proc shows them on JDK 17 (G1, Parallel, ZGC, Shenandoah).
        let kind = |n: &str| jvm_thread_group(n).map(|g| g.kind);
        for n in [
            "GC Thread#0",
            "G1 Conc#0",
            "G1 Main Marker",
            "G1 Refine#0",
            "G1 Service",
            "ZDirector",
            "ZWorker#0",
            "Shenandoah GC T",
            "Reference Handl",
            "Finalizer",
        ] {
            assert_eq!(kind(n), Some(VmThreadKind::Gc), "{n}");
        }
        for n in ["C1 CompilerThre", "C2 CompilerThre", "Sweeper thread"] {
            assert_eq!(kind(n), Some(VmThreadKind::Compiler), "{n}");
        }
        for n in [
            "VM Thread",
            "VM Periodic Tas",
            "Service Thread",
            "Monitor Deflati",
            "Signal Dispatch",
            "Attach Listener",
            "Notification Th",
            "RuntimeWorker#1",
        ] {
            assert_eq!(kind(n), Some(VmThreadKind::Runtime), "{n}");
        }
        // The application's threads, and the launcher's.
        for n in [
            "java",
            "main",
            "chain-worker",
            "pool-1-thread-1",
            "ZooKeeper",
            "GC",
        ] {
            assert_eq!(kind(n), None, "{n}");
        }
        let g = jvm_thread_group("GC Thread#3").unwrap();
        assert_eq!(g.root_frames(), ["[JVM]", "[GC]"]);
        assert_eq!(g.to_string(), "JVM GC");
        assert!(is_libjvm(
            "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"
        ));
        assert!(!is_libjvm("/usr/lib/libjvm.so.old"));
    }
}
