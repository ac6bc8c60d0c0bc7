//! Separate debug files: a stripped fixture gets its names back from a debug file found
//! by build-id (in a `--debug-dir`), by `DIR/<basename>.debug`, or by `.gnu_debuglink`
//! (checked by build-id, or by CRC when there is no build-id); a debug file that does
//! not match is refused.

use std::ffi::OsStr;

use super::*;

/// Builds the fixture, splits it into `dir/debug/name.debug` and a stripped
/// `dir/bin/name` with a debuglink. Returns (stripped, debug file, unstripped).
fn split(dir: &Path, extra: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let full = build_c(dir, "full", extra);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("debug")).unwrap();
    let debug = dir.join("debug/app.debug");
    let stripped = dir.join("bin/app");
    run(
        "objcopy",
        &[
            OsStr::new("--only-keep-debug"),
            full.as_os_str(),
            debug.as_os_str(),
        ],
    );
    run(
        "strip",
        &[OsStr::new("-o"), stripped.as_os_str(), full.as_os_str()],
    );
    let link = format!("--add-gnu-debuglink={}", debug.display());
    run("objcopy", &[OsStr::new(&link), stripped.as_os_str()]);
    (stripped, debug, full)
}

/// The names of `caller` and `static_function` (addresses from the unstripped file).
fn names(s: &mut Symbolizer, stripped: &Path, full: &Path) -> Vec<Vec<SymbolLine>> {
    let (caller, caller_size) = symbol(full, "caller");
    let (stat, _) = symbol(full, "static_function");
    // An address inside caller where helper is inlined: ask binutils.
    let addrs: Vec<u64> = (caller..caller + caller_size).collect();
    let chains = binutils_addr2line(full, &addrs);
    let inl = addrs[chains
        .iter()
        .position(|c| c.len() == 2)
        .expect("inlined helper")];
    s.symbolize_module(&module(stripped), &[inl, stat])
}

fn assert_full_names(out: &[Vec<SymbolLine>]) {
    let chain: Vec<(&str, bool)> = out[0].iter().map(|f| (&*f.function, f.inlined)).collect();
    assert_eq!(chain, [("helper", true), ("caller", false)]);
    assert!(out[0][0].line.is_some() && out[0][1].line.is_some());
    assert_eq!(out[1].last().map(|f| &*f.function), Some("static_function"));
}

fn with_dirs(dirs: Vec<PathBuf>) -> Symbolizer {
    Symbolizer::new(SymbolizerOptions { debug_dirs: dirs })
}

/// Each address a function of the stripped binary: without its debug file it has
/// only its function's start, from the unwind tables, and no line.
fn only_function_starts(out: &[Vec<SymbolLine>]) -> bool {
    out.iter().all(|f| {
        f.len() == 1
            && f[0].function.starts_with("fn_")
            && f[0].function.ends_with("@app")
            && f[0].line.is_none()
    })
}

#[test]
fn stripped_binary_without_its_debug_file_has_only_function_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug, full) = split(dir.path(), &[]);
    std::fs::remove_file(&debug).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = names(&mut s, &stripped, &full);
    assert!(only_function_starts(&out), "{out:?}");
    // Two functions, two starts.
    assert_ne!(out[0][0].function, out[1][0].function);
    assert!(s.stats().debug_files.is_empty());
}

#[test]
fn debug_file_by_build_id_in_a_debug_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug, full) = split(dir.path(), &[]);
    let data = std::fs::read(&stripped).unwrap();
    let id = ElfInfo::parse(&data)
        .unwrap()
        .build_id
        .expect("gcc adds a build-id");
    let hex = crate::elf::build_id_hex(&id);
    let store = dir.path().join("store");
    let target = store
        .join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::rename(&debug, &target).unwrap();

    let mut s = with_dirs(vec![store]);
    assert_full_names(&names(&mut s, &stripped, &full));
    assert_eq!(s.stats().debug_files, [target]);
}

#[test]
fn debug_file_by_basename_in_a_debug_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug, full) = split(dir.path(), &[]);
    // Not the debuglink name: found only as DIR/<basename of module>.debug.
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::rename(&debug, store.join("app.debug")).unwrap();
    let mut s = with_dirs(vec![store.clone()]);
    assert_full_names(&names(&mut s, &stripped, &full));
    assert_eq!(s.stats().debug_files, [store.join("app.debug")]);
}

#[test]
fn debug_file_by_debuglink_next_to_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug, full) = split(dir.path(), &[]);
    let next_to = dir.path().join("bin/.debug/app.debug");
    std::fs::create_dir_all(next_to.parent().unwrap()).unwrap();
    std::fs::rename(&debug, &next_to).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    assert_full_names(&names(&mut s, &stripped, &full));
    assert_eq!(s.stats().debug_files, [next_to]);
}

#[test]
fn debuglink_without_build_id_is_checked_by_crc() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug, full) = split(dir.path(), &["-Wl,--build-id=none"]);
    let data = std::fs::read(&stripped).unwrap();
    assert_eq!(ElfInfo::parse(&data).unwrap().build_id, None);
    let next_to = dir.path().join("bin/app.debug");
    std::fs::copy(&debug, &next_to).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    assert_full_names(&names(&mut s, &stripped, &full));
    assert_eq!(s.stats().debug_files, std::slice::from_ref(&next_to));

    // A debug file of another build under the same name fails the CRC: refused.
    let other = build_c(
        dir.path(),
        "other",
        &["-Wl,--build-id=none", "-DOTHER=1", "-O1"],
    );
    let other_debug = dir.path().join("other.debug");
    run(
        "objcopy",
        &[
            OsStr::new("--only-keep-debug"),
            other.as_os_str(),
            other_debug.as_os_str(),
        ],
    );
    std::fs::rename(&other_debug, &next_to).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = names(&mut s, &stripped, &full);
    assert!(s.stats().debug_files.is_empty());
    assert!(only_function_starts(&out), "{out:?}");
}
