//! The program of each process, the tower `report` merges processes of one program
//! into (issue 46): a process names itself (its main thread's name, which
//! `prctl(PR_SET_NAME)` sets) but not its executable, so processes of one name that
//! ran different executables are told apart by the executable's path, and a process
//! renaming itself `postgres` does not merge into postgres's tower.

use std::collections::{BTreeSet, HashMap};

use super::Thread;

/// Turns each thread's `program`, as built (its executable's path, or its process's
/// name when the recording holds no workload for it), into the tower's name: the
/// process's name, or `NAME [PATH]` when processes of that name ran more than one
/// executable. A thread whose executable is unknown keeps the name.
pub(super) fn name_programs(threads: &mut [Thread]) {
    let mut paths: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for t in threads.iter() {
        if t.program.starts_with('/') {
            paths
                .entry(t.process.as_str())
                .or_default()
                .insert(t.program.as_str());
        }
    }
    let shared: BTreeSet<String> = paths
        .into_iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    for t in threads.iter_mut() {
        t.program = if shared.contains(&t.process) && t.program.starts_with('/') {
            format!("{} [{}]", t.process, t.program)
        } else {
            t.process.clone()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(pid: u32, process: &str, program: &str) -> Thread {
        Thread {
            pid,
            tid: pid,
            name: process.into(),
            process: process.into(),
            group: None,
            service: None,
            container: None,
            exe: None,
            program: program.into(),
        }
    }

    #[test]
    fn a_process_renamed_like_another_program_gets_a_tower_of_its_own() {
        let pg = "/usr/lib/postgresql/16/bin/postgres";
        let mut t = vec![
            thread(1, "postgres", pg),
            thread(2, "postgres", pg),
            // Renamed itself `postgres`.
            thread(3, "postgres", "/tmp/x/miner"),
            // No workload recorded: its name.
            thread(4, "postgres", "postgres"),
            thread(5, "nginx", "/usr/sbin/nginx"),
        ];
        name_programs(&mut t);
        let got: Vec<&str> = t.iter().map(|t| t.program.as_str()).collect();
        assert_eq!(
            got,
            [
                "postgres [/usr/lib/postgresql/16/bin/postgres]",
                "postgres [/usr/lib/postgresql/16/bin/postgres]",
                "postgres [/tmp/x/miner]",
                "postgres",
                "nginx",
            ]
        );
        // One executable: the name alone, as before.
        let mut t = vec![thread(1, "postgres", pg), thread(2, "postgres", pg)];
        name_programs(&mut t);
        assert!(t.iter().all(|t| t.program == "postgres"));
    }
}
