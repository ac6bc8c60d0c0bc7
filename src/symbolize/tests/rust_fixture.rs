//! The Rust fixture (`fixture.rs`, rustc -O -g): generic instances and a closure come
//! out as readable paths without hashes.

use super::*;

fn build_rust(dir: &Path) -> PathBuf {
    let out = dir.join("fixture");
    crate::test_fixture::rustc(&fixture_source("fixture.rs"), &out, &["-O", "-g"]);
    out
}

/// Every address of every function symbol whose raw name contains `part`.
fn addresses_of(bin: &Path, part: &str) -> Vec<u64> {
    let data = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .filter(|s| s.name().is_ok_and(|n| n.contains(part)) && s.size() > 0)
        .flat_map(|s| s.address()..s.address() + s.size())
        .collect()
}

#[test]
fn generics_and_closures_are_readable() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_rust(dir.path());
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let m = module(&bin);

    let work = addresses_of(&bin, "7fixture4work");
    let names: std::collections::BTreeSet<String> = s
        .symbolize_module(&m, &work)
        .into_iter()
        .filter_map(|frames| frames.last().map(|f| f.function.clone()))
        .collect();
    assert!(names.contains("fixture::work::<u64>"), "{names:?}");
    assert!(names.contains("fixture::work::<f64>"), "{names:?}");

    // The closure is inlined into `apply`: it must show up as an inlined frame.
    let apply = addresses_of(&bin, "7fixture5apply");
    let chains = s.symbolize_module(&m, &apply);
    let closure = chains
        .iter()
        .flatten()
        .find(|f| f.function.starts_with("fixture::main::{{closure}}"))
        .unwrap_or_else(|| panic!("no closure frame in {chains:?}"));
    assert!(closure.inlined);
    assert!(closure.file.as_deref().unwrap().ends_with("fixture.rs"));
    for chain in &chains {
        let outer = chain.last().expect("apply is named");
        assert!(outer.function.starts_with("fixture::apply::<"), "{outer:?}");
        assert!(!outer.inlined);
        assert!(chain[..chain.len() - 1].iter().all(|f| f.inlined));
    }
    for f in chains.iter().flatten() {
        assert!(!f.function.contains("17h"), "hash left in {}", f.function);
    }
}
