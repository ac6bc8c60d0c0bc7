//! `top`'s processes view: each process of the sliding window with its CPU, threads and
//! hottest function, every process under the one that started it (a pre-fork server's
//! workers under their master), as a tree. The parents come from the recording's
//! process starts and, for processes already running at attach, from what the command
//! reads of them ([`Top::set_parent`]); only processes of the recording are parents, so
//! the tree stops at the attached processes, not at the shell that started them.

use std::collections::{HashMap, HashSet};

use super::{Top, WindowStats};
use crate::format::ThreadState;
use crate::output::top::human_time;

/// Levels of the tree drawn at most: deeper processes are drawn at this level (a chain
/// of parents from reused pids cannot loop or run away).
const MAX_DEPTH: usize = 16;

/// What `top` knows of the processes beyond one window: who started each one, and
/// the names of those it has met.
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    /// Each process's parent, by pid.
    parents: HashMap<u32, u32>,
    /// Names of the processes met (in a window, or attached), by pid.
    names: HashMap<u32, String>,
    /// The processes `top` was started on: always kept.
    attached: HashSet<u32>,
    /// Processes whose parent was asked for and not found (gone, or not readable).
    asked: HashSet<u32>,
}

impl Lineage {
    /// Learns the processes a window started and the names of those it ran.
    pub(super) fn learn(&mut self, w: &WindowStats) {
        for &(pid, ppid) in &w.starts {
            if pid != ppid {
                self.parents.insert(pid, ppid);
            }
        }
        for t in w.threads.values() {
            if is_placeholder(&t.process) {
                continue;
            }
            let name = self.names.entry(t.pid).or_default();
            if name.is_empty() || is_placeholder(name) {
                name.clone_from(&t.process);
            }
        }
    }

    /// Whether `pid` is one of the processes `top` was started on.
    pub fn is_attached(&self, pid: u32) -> bool {
        self.attached.contains(&pid)
    }

    /// Forgets every process that is neither in `window` (the pids of the sliding
    /// window) nor an ancestor of one, nor attached: what the tree needs stays, a
    /// fork-heavy host's history does not pile up.
    pub(super) fn prune(&mut self, window: &HashSet<u32>) {
        let mut keep: HashSet<u32> = self.attached.clone();
        for &pid in window {
            let mut p = pid;
            for _ in 0..=MAX_DEPTH {
                if !keep.insert(p) && p != pid {
                    break;
                }
                match self.parents.get(&p) {
                    Some(&up) => p = up,
                    None => break,
                }
            }
        }
        self.parents.retain(|p, _| keep.contains(p));
        self.names.retain(|p, _| keep.contains(p));
        self.asked.retain(|p| keep.contains(p));
    }
}

impl Top {
    /// `pid`, named `name`, is one of the processes `top` was started on.
    pub fn attach(&mut self, pid: u32, name: &str) {
        self.lineage.attached.insert(pid);
        self.lineage.names.insert(pid, name.to_owned());
    }

    /// The processes of the sliding window whose parent is not known yet (running
    /// before attach) and was not asked for before: the command reads each one's
    /// parent and gives it with [`Top::set_parent`].
    pub fn unknown_parents(&mut self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .windows
            .iter()
            .flat_map(|w| w.threads.values().map(|t| t.pid))
            .filter(|p| !self.lineage.parents.contains_key(p))
            .collect::<HashSet<u32>>()
            .into_iter()
            .filter(|&p| self.lineage.asked.insert(p))
            .collect();
        out.sort_unstable();
        out
    }

    /// Processes whose parent or name `top` keeps now.
    #[cfg(test)]
    pub(super) fn lineage_len(&self) -> usize {
        self.lineage.parents.len().max(self.lineage.names.len())
    }

    /// `pid`'s parent is `ppid` (None: not found).
    pub fn set_parent(&mut self, pid: u32, ppid: Option<u32>) {
        if let Some(ppid) = ppid.filter(|&p| p != pid) {
            self.lineage.parents.insert(pid, ppid);
        }
    }
}

/// One process's line of the view.
#[derive(Debug, Default)]
struct Row {
    name: String,
    cpu: u64,
    threads: usize,
    /// On-CPU time by leaf function over its threads.
    leaves: HashMap<String, u64>,
}

/// Whether `name` is the model's stand-in for a process whose name the window did not
/// see (`[tid N]`): the name `top` learned at attach or from an earlier window is
/// better.
fn is_placeholder(name: &str) -> bool {
    name.starts_with("[tid ") && name.ends_with(']')
}

/// The processes view's lines (column titles first) of the merged window `m`, at most
/// `room` of them (the titles included); CPU shares are of `wall`.
pub(super) fn lines(
    m: &WindowStats,
    lineage: &Lineage,
    wall: u64,
    off_cpu: bool,
    room: usize,
) -> Vec<String> {
    let rows = process_rows(m);
    let tree = Tree::of(&rows, lineage);
    let mut out = vec![format!(
        "{:>8} {:<24} {:>6} {:>9} {:>7}  HOTTEST FUNCTION",
        "PID", "PROCESS", "CPU%", "CPU", "THREADS"
    )];
    // Depth-first from the roots; a loop of parents (reused pids) is cut by `drawn`.
    let mut drawn: HashSet<u32> = HashSet::new();
    let mut todo: Vec<(u32, usize)> = (tree.children.get(&None))
        .map(|l| l.iter().rev().map(|&p| (p, 0)).collect())
        .unwrap_or_default();
    while let Some((pid, depth)) = todo.pop() {
        if out.len() >= room || !drawn.insert(pid) {
            continue;
        }
        let empty = Row::default();
        let r = rows.get(&pid).unwrap_or(&empty);
        out.push(tree_line(pid, depth, r, lineage, wall, off_cpu));
        if let Some(kids) = tree.children.get(&Some(pid)) {
            todo.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
        }
    }
    // A loop of parents leaves its processes unreachable from a root: drawn flat.
    let cpu = |p: u32| rows.get(&p).map_or(0, |r| r.cpu);
    let mut rest: Vec<u32> = tree.shown.difference(&drawn).copied().collect();
    rest.sort_by(|a, b| cpu(*b).cmp(&cpu(*a)).then(a.cmp(b)));
    for pid in rest {
        if out.len() >= room {
            break;
        }
        let r = rows.get(&pid);
        out.push(format!(
            "{:>8} {:<24} {:>5.1}% {:>9} {:>7}",
            pid,
            super::truncate(r.map_or("", |r| r.name.as_str()), 24),
            r.map_or(0, |r| r.cpu) as f64 * 100.0 / wall as f64,
            human_time(r.map_or(0, |r| r.cpu)),
            r.map_or(0, |r| r.threads),
        ));
    }
    out.truncate(room.max(1));
    out
}

/// Each process of the window: its name, CPU, threads and leaf functions.
fn process_rows(m: &WindowStats) -> HashMap<u32, Row> {
    let mut rows: HashMap<u32, Row> = HashMap::new();
    for t in m.threads.values() {
        let r = rows.entry(t.pid).or_default();
        if r.name.is_empty() && !is_placeholder(&t.process) {
            r.name.clone_from(&t.process);
        }
        r.cpu += t.states[ThreadState::Running as usize];
        r.threads += 1;
        for (leaf, v) in &t.leaves {
            *r.leaves.entry(leaf.clone()).or_default() += v;
        }
    }
    rows
}

/// The processes shown, each under the one that started it.
struct Tree {
    /// The window's processes and their known ancestors.
    shown: HashSet<u32>,
    /// Each shown process's children (None: the roots), the busiest subtree first.
    children: HashMap<Option<u32>, Vec<u32>>,
}

impl Tree {
    fn of(rows: &HashMap<u32, Row>, lineage: &Lineage) -> Tree {
        // A parent is drawn when it is a process of the recording: met in a window,
        // or attached (an idle master has no sample, and its workers still go under
        // it).
        let known = |p: u32| rows.contains_key(&p) || lineage.names.contains_key(&p);
        let parent = |p: u32| lineage.parents.get(&p).copied().filter(|&up| known(up));
        let mut shown: HashSet<u32> = rows.keys().copied().collect();
        for &pid in rows.keys() {
            let mut p = pid;
            for _ in 0..MAX_DEPTH {
                match parent(p) {
                    Some(up) if up != pid => {
                        shown.insert(up);
                        p = up;
                    }
                    _ => break,
                }
            }
        }
        let mut children: HashMap<Option<u32>, Vec<u32>> = HashMap::new();
        for &pid in &shown {
            let up = parent(pid).filter(|up| shown.contains(up) && *up != pid);
            children.entry(up).or_default().push(pid);
        }
        // Each subtree's CPU, to put the busiest first at every level.
        let cpu = |p: u32| rows.get(&p).map_or(0, |r| r.cpu);
        let mut subtree: HashMap<u32, u64> = HashMap::new();
        for &pid in &shown {
            let mut p = pid;
            for _ in 0..=MAX_DEPTH {
                *subtree.entry(p).or_default() += cpu(pid);
                match parent(p).filter(|up| shown.contains(up) && *up != pid) {
                    Some(up) => p = up,
                    None => break,
                }
            }
        }
        for list in children.values_mut() {
            list.sort_by(|a, b| subtree[b].cmp(&subtree[a]).then(a.cmp(b)));
        }
        Tree { shown, children }
    }
}

/// One process's line in the tree, indented by its `depth`.
fn tree_line(
    pid: u32,
    depth: usize,
    r: &Row,
    lineage: &Lineage,
    wall: u64,
    off_cpu: bool,
) -> String {
    let name = if r.name.is_empty() {
        lineage
            .names
            .get(&pid)
            .map_or_else(|| format!("[pid {pid}]"), Clone::clone)
    } else {
        r.name.clone()
    };
    let hottest = r
        .leaves
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(name, _)| name.as_str())
        .unwrap_or(if off_cpu {
            "(off the CPU)"
        } else {
            "(no sample)"
        });
    let label = format!("{}{}", "  ".repeat(depth.min(MAX_DEPTH)), name);
    format!(
        "{:>8} {:<24} {:>5.1}% {:>9} {:>7}  {}",
        pid,
        super::truncate(&label, 24),
        r.cpu as f64 * 100.0 / wall as f64,
        human_time(r.cpu),
        r.threads,
        hottest
    )
}
