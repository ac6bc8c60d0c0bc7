//! The target's files changed or planted under the recorder: a library truncated on
//! disk while mapped, a corrupt ELF, hostile `/tmp/perf-PID.map` variants. Names
//! degrade; `profile` is never killed, hung or led to read what it must not.

use super::*;

/// The end of the last loadable segment: cutting the file there leaves the code the
/// target runs and removes the symbol tables and DWARF after it.
fn end_of_code(lib: &Path) -> u64 {
    let info = ElfInfo::parse(&std::fs::read(lib).unwrap()).unwrap();
    info.segments
        .iter()
        .map(|s| s.file_offset + s.file_size)
        .max()
        .unwrap()
}

/// A library truncated on disk while mapped: `profile` read it through a mapping and
/// died of SIGBUS while naming (issue 14, item 6). Now it keeps the names it read.
#[test]
fn a_library_truncated_while_mapped_does_not_kill_profile() {
    let dir = scratch();
    let lib = dir.path().join("libcut.so");
    std::fs::copy(faultlib(), &lib).unwrap();
    let target = Target::start(&faults_bin(), &["dlopen", lib.to_str().unwrap()]);
    let out = dir.path().join("x.prof");
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "2",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    wait_for_attach(&out, &mut rec);
    let cut = end_of_code(&lib);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lib)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let status = wait_at_most(&mut rec, Duration::from_secs(30), "truncated library");
    assert!(status.success(), "{status:?}\n{}", child_stderr(&mut rec));
    let stacks = stacks(&out);
    assert!(
        stacks.iter().any(|(f, _)| f.iter().any(|x| x == "lib_hot")),
        "{stacks:?}"
    );
}

/// A corrupt ELF file in the target: everything after the code of a library the target
/// loaded (section headers, symbol tables, DWARF) overwritten with noise. The recording
/// completes and the library's exported function is still named from `.dynsym`.
#[test]
fn a_corrupt_elf_in_the_target_degrades_names_only() {
    let dir = scratch();
    let lib = dir.path().join("libnoise.so");
    let mut bytes = std::fs::read(faultlib()).unwrap();
    let cut = end_of_code(&faultlib()) as usize;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for b in &mut bytes[cut..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&lib, &bytes).unwrap();
    let target = Target::start(&faults_bin(), &["dlopen", lib.to_str().unwrap()]);
    let out = dir.path().join("x.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "1.5",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(!stderr(&o).contains("panicked"));
    let r = read(&out);
    assert!(!r.samples.is_empty());
    // The section headers are noise: no symbol table is found, the frames keep their
    // module and offset.
    let (folded, _) = report_folded(&out);
    assert!(folded.contains("libnoise.so+0x"), "{folded}");
}

/// Plants `/tmp/perf-PID.map` variants for a target running code in anonymous memory
/// (no perf map of its own): only a regular file owned by root or the target's user
/// names the frames; the others are refused with the reason in the summary, and none
/// hangs the recorder or copies a file it points to (issue 14, item 1).
#[test]
fn hostile_perf_maps_are_refused_with_a_reason() {
    use std::os::unix::fs::symlink;
    let dir = scratch();
    let target = Target::start(&faults_bin(), &["jit"]);
    let pid = target.pid();
    let map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let _cleanup = RemoveOnDrop(map.clone());
    let code = jit_code_address(pid);
    let line = format!("{code:x} 40 planted_name\n");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{code:x} 40 secret_contents\n")).unwrap();

    let record = |tag: &str| -> (String, String) {
        let out = dir.path().join(format!("{tag}.prof"));
        let mut rec = spawn_profile(&[
            "record",
            "-p",
            &pid.to_string(),
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ]);
        let status = wait_at_most(&mut rec, Duration::from_secs(30), tag);
        let err = child_stderr(&mut rec);
        assert!(status.success(), "{tag}: {err}");
        (report_folded(&out).0, err)
    };

    // Root's own map is used.
    std::fs::write(&map, &line).unwrap();
    let (folded, _) = record("root");
    assert!(folded.contains("planted_name"), "{folded}");

    // Another user's map is not.
    std::os::unix::fs::chown(&map, Some(4242), None).unwrap();
    let (folded, err) = record("other-user");
    assert!(!folded.contains("planted_name"), "{folded}");
    assert!(err.contains("owned by uid 4242"), "{err}");

    // A symlink is not followed.
    std::fs::remove_file(&map).unwrap();
    symlink(&secret, &map).unwrap();
    let (folded, err) = record("symlink");
    assert!(!folded.contains("secret_contents"), "{folded}");
    assert!(err.contains("symbolic link"), "{err}");

    // A FIFO does not block.
    std::fs::remove_file(&map).unwrap();
    assert!(Command::new("mkfifo").arg(&map).status().unwrap().success());
    let (_, err) = record("fifo");
    assert!(err.contains("not a regular file"), "{err}");

    // A huge file is not read.
    std::fs::remove_file(&map).unwrap();
    std::fs::File::create(&map)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let (_, err) = record("huge");
    assert!(err.contains("more than the"), "{err}");
}

struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Start of the target's anonymous executable mapping.
fn jit_code_address(pid: u32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f[1] == "rwxp" && f.len() == 5
        })
        .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
        .expect("an anonymous rwx mapping")
}
