//! Live processes: a libc address taken inside qsort's callback (named through
//! libc6-dbg, found via the target's files), and perf maps written by a real Node and a
//! real CPython 3.12 `-X perf` process.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use super::*;
use crate::process::locate;

use crate::test_fixture::Reaped;

/// Spawns `cmd` with piped stdin/stdout and returns it with its first stdout line.
fn spawn_and_read_line(cmd: &mut Command) -> (Reaped, String) {
    let mut child = Reaped(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    (child, line.trim().to_owned())
}

/// The mapping of `pid` holding `avma`: (start, end, file offset, path).
fn mapping_of(pid: u32, avma: u64) -> (u64, u64, u64, String) {
    let m = crate::test_fixture::mapping_of(pid, avma);
    (m.start, m.end, m.offset, m.path)
}

#[test]
fn libc_address_inside_qsort_is_msort_with_tmp() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let (child, line) = spawn_and_read_line(Command::new(&bin).arg("qsort"));
    let pid = child.0.id();
    let ret = u64::from_str_radix(line.trim_start_matches("0x"), 16).expect("an address");
    let (start, end, off, path) = mapping_of(pid, ret);
    assert!(path.contains("libc"), "{path}");

    let located = locate::open_mapped_file(pid, &path, (start, end), None).unwrap();
    let info = ElfInfo::parse((*located.image).as_ref()).unwrap();
    let bias = info.bias_for_mapping(start, off).unwrap();
    let svma = ret - 1 - bias;
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let m = ModuleSource {
        image: located.image,
        path: path.clone(),
        root: Some(PathBuf::from(format!("/proc/{pid}/root"))),
    };
    let out = s.symbolize_module(&m, &[svma]);
    let chain: Vec<&str> = out[0].iter().map(|f| f.function.as_str()).collect();
    assert_eq!(chain.first(), Some(&"msort_with_tmp"), "{:?}", out[0]);
    assert!(out[0][0].file.as_deref().unwrap().ends_with("msort.c"));
    assert_eq!(s.stats().debug_files.len(), 1, "libc6-dbg used");

    // The same chain as binutils gives for the debug file.
    let theirs = binutils_addr2line(&s.stats().debug_files[0], &[svma]);
    let their_chain: Vec<&str> = theirs[0].iter().map(|f| f.0.as_str()).collect();
    assert_eq!(chain, their_chain);
    let lines: Vec<Option<u32>> = out[0].iter().map(|f| f.line).collect();
    let their_lines: Vec<Option<u32>> = theirs[0].iter().map(|f| f.2).collect();
    assert_eq!(lines, their_lines);
}

/// The lines of a perf map, once it has a line containing `needle`.
fn wait_for_map(path: &Path, needle: &str) -> String {
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.contains(needle)
        {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never named {needle}", path.display());
}

/// Removes a perf map the test caused to be written.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn check_perf_map(map: &Path, needle: &str) {
    let text = wait_for_map(map, needle);
    let line = text.lines().rfind(|l| l.contains(needle)).unwrap();
    let mut fields = line.split_whitespace();
    let start = u64::from_str_radix(fields.next().unwrap().trim_start_matches("0x"), 16).unwrap();
    let size = u64::from_str_radix(fields.next().unwrap().trim_start_matches("0x"), 16).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let map = crate::symbolize::perfmap::PerfMap::parse(&text);
    let out = s.symbolize_perf_map(&map, &[start, start + size - 1, start + size / 2, 0]);
    for frame in &out[..3] {
        let f = frame.as_ref().expect("a name");
        assert!(f.function.contains(needle), "{f:?}");
        assert!(!f.inlined);
    }
    assert_eq!(out[3], None);
}

#[test]
fn node_perf_basic_prof_map() {
    let script = "function hotFunctionForPerfMap(n){let s=0;for(let i=0;i<n;i++){s+=i%7}return s}\
                  let t=0;for(let k=0;k<2000;k++){t+=hotFunctionForPerfMap(10000)}\
                  console.log('ready '+t);process.stdin.resume();";
    // Node also writes an isolate-*-v8.log into its working directory.
    let cwd = std::env::temp_dir();
    let (child, line) = spawn_and_read_line(
        Command::new("node")
            .current_dir(&cwd)
            .arg("--perf-basic-prof")
            .arg("--logfile=/dev/null")
            .arg("-e")
            .arg(script),
    );
    assert!(line.starts_with("ready"), "{line}");
    let map = RemoveOnDrop(PathBuf::from(format!("/tmp/perf-{}.map", child.0.id())));
    check_perf_map(&map.0, "hotFunctionForPerfMap");
}

#[test]
fn python_312_perf_trampoline_map() {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let python = Path::new(&home).join(".pyenv/versions/3.12.1/bin/python3.12");
    let script = "import sys\n\
                  def hot_python_function_for_perf(n):\n    return sum(i % 7 for i in range(n))\n\
                  t = sum(hot_python_function_for_perf(1000) for _ in range(50))\n\
                  print('ready', t, flush=True)\n\
                  sys.stdin.read()\n";
    let (child, line) =
        spawn_and_read_line(Command::new(&python).args(["-X", "perf", "-c", script]));
    assert!(line.starts_with("ready"), "{line}");
    let map = RemoveOnDrop(PathBuf::from(format!("/tmp/perf-{}.map", child.0.id())));
    check_perf_map(&map.0, "hot_python_function_for_perf");
}

#[test]
fn vdso_copy_names_its_functions() {
    let pid = std::process::id();
    let vdso = crate::test_fixture::own_maps()
        .into_iter()
        .find(|m| m.path == "[vdso]")
        .expect("a vdso");
    let (start, end) = (vdso.start, vdso.end);
    let image = locate::read_vdso(pid, start, end).unwrap();
    let (svma, size) = {
        let file = object::File::parse((*image).as_ref()).unwrap();
        file.dynamic_symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains("clock_gettime")) && s.size() > 0)
            .map(|s| (s.address(), s.size()))
            .expect("clock_gettime in the vdso")
    };
    let m = ModuleSource {
        image,
        path: "[vdso]".into(),
        root: None,
    };
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = s.symbolize_module(&m, &[svma, svma + size - 1]);
    for frames in out {
        let f = frames.last().expect("a name");
        assert!(f.function.contains("clock_gettime"), "{f:?}");
    }
}

/// Debian's libc6-dbg: 4,000-odd compressed units. The few dozen libc addresses of a
/// C recording must parse only their own units and come out as binutils names them.
#[test]
fn libc_debug_file_names_match_binutils_with_units_skipped() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let (start, end) = text_range(libc);
    let addrs: Vec<u64> = (start..end)
        .step_by(((end - start) / 60) as usize)
        .collect();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    s.symbolize_module(&module(libc), &addrs[..1]);
    let debug = s
        .stats()
        .debug_files
        .first()
        .cloned()
        .expect("libc6-dbg is installed (.ci/run installs it)");

    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let compared = super::c_fixture::compare_with_binutils(&mut s, libc, &debug, &addrs, false);
    assert!(compared.len() > 40, "only {} compared", compared.len());
    assert!(
        s.stats().units_skipped > 1000,
        "units skipped: {:?}",
        s.stats()
    );
}
