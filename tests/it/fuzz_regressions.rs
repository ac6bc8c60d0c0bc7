//! Every input a fuzzer found a crash, hang or blow-up with (fuzz/regressions/TARGET/),
//! and the checked-in seeds, replayed through the same code the fuzz targets run
//! (fuzz/src/lib.rs, included here), so a fixed finding stays fixed.

use std::path::Path;

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod pipelines;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for dir in [
        root.join("regressions").join(target),
        root.join("seeds").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.is_file() && p.file_name().is_none_or(|n| n != ".keep"))
            .collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let started = std::time::Instant::now();
            run(&data);
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(20),
                "{} took {took:?}",
                file.display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn recording_inputs() {
    assert!(replay("recording", pipelines::recording) > 0);
}

#[test]
fn parser_inputs() {
    assert!(replay("parsers", pipelines::parsers) > 0);
}

#[test]
fn jvm_inputs() {
    assert!(replay("jvm", pipelines::jvm) > 0);
}

#[test]
fn unwind_inputs() {
    replay("unwind", pipelines::unwind);
}

#[test]
fn symbolize_inputs() {
    replay("symbolize", pipelines::symbolize);
}

#[test]
fn perfdata_inputs() {
    assert!(replay("perfdata", pipelines::perfdata) > 0);
}
